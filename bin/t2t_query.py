"""t2t-query: translate lines with a model served by TF Serving (REST predict API).

  echo "Ein kleiner Test." | t2t-query --server=localhost:8501 --model=ende
  t2t-query --model=ende --input_file=newstest2014.de > out.en
  t2t-query --model=ende --signature_name=nbest --input_file=in.de   # index ||| text ||| score

N lines in give N lines out (n-best: n lines per input, in t2t-decode's Moses format).
Inputs that the server truncated are reported on stderr. gRPC is not supported.
"""

from __future__ import annotations

import sys

from absl import flags

from t2t_lite.bin import cli
from t2t_lite.serve import query

FLAGS = flags.FLAGS
flags.DEFINE_string("server", query.DEFAULT_SERVER, "TF Serving's REST address.")
flags.DEFINE_string("model", None, "Served model name (MODEL_NAME).", required=True)
flags.DEFINE_integer("version", None, "Model version; default: the newest served.")
flags.DEFINE_string("signature_name", None, "Signature: serving_default (default) or nbest.")
flags.DEFINE_string("input_file", "-", "UTF-8 lines to translate; - is stdin.")
flags.DEFINE_integer("batch_size", 32, "Lines per request.", lower_bound=1)
flags.DEFINE_enum(
    "request_format", "instances", query.REQUEST_FORMATS, "Row (instances) or column (inputs)."
)
flags.DEFINE_float("timeout", 60.0, "Seconds to wait for each answer.")


def main() -> None:
    try:
        url = query.predict_url(FLAGS.server, FLAGS.model, FLAGS.version)
        if FLAGS.input_file == "-":
            stream, name = sys.stdin.buffer, "<stdin>"
        else:
            stream, name = open(FLAGS.input_file, "rb"), FLAGS.input_file  # noqa: SIM115
        with stream:
            rows = query.query_lines(
                query.read_lines(stream, name),
                url,
                batch_size=FLAGS.batch_size,
                signature_name=FLAGS.signature_name,
                request_format=FLAGS.request_format,
                timeout=FLAGS.timeout,
            )
            query.write_rows(rows)
    except (OSError, ValueError, query.ServingError) as error:
        sys.exit(f"t2t-query: {error}")


def run() -> None:
    cli.run(main)


if __name__ == "__main__":
    run()
