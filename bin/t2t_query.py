"""t2t-query: translate lines with a model served by TF Serving (REST or gRPC predict API).

  echo "Ein kleiner Test." | t2t-query --server=localhost:8501 --model=ende
  t2t-query --model=ende --input_file=newstest2014.de --output_file=out.en
  t2t-query --model=ende --protocol=grpc --server=localhost:8500 --input_file=in.de
  t2t-query --model=ende --signature_name=nbest --input_file=in.de   # index ||| text ||| score

N lines in give N lines out (n-best: n lines per input, in t2t-decode's Moses format), or an
error: an answer with a line break or with another count is refused, naming the input line.
--output_file is written whole or not at all. Inputs the server truncated go to stderr.
"""

from __future__ import annotations

from absl import flags

from t2t_lite.bin import cli
from t2t_lite.serve import query

FLAGS = flags.FLAGS
flags.DEFINE_enum("protocol", "rest", ["rest", "grpc"], "TF Serving's REST or gRPC API.")
flags.DEFINE_string(
    "server", None, "host:port; default localhost:8501 (REST), localhost:8500 (gRPC)."
)
flags.DEFINE_string("model", None, "Served model name (MODEL_NAME).", required=True)
flags.DEFINE_integer("version", None, "Model version; default: the newest served.")
flags.DEFINE_string(
    "signature_name",
    None,
    "serving_default (the default: a line each) or nbest (Moses n-best lines). The export's "
    "other signatures, sample (with a seed input), translate_ids (ids in) and attention "
    "(tensors out), take or give more than a line of text: call them with a TF Serving client "
    "(docs/serving.md).",
)
flags.DEFINE_string("input_file", "-", "UTF-8 lines to translate; - is stdin.")
flags.DEFINE_string("output_file", None, "Written whole or not at all; default: stdout.")
flags.DEFINE_integer("batch_size", 32, "Lines per request.", lower_bound=1)
flags.DEFINE_enum(
    "request_format", "instances", query.REQUEST_FORMATS, "REST: row (instances) or column."
)
flags.DEFINE_float(
    "timeout", 60.0, "Seconds each request may take in all, connection and answer (a deadline)."
)
flags.DEFINE_integer(
    "retries",
    3,
    "Retries of a server not answering yet (REST: 503 or no connection; gRPC: UNAVAILABLE), "
    "waiting 0.5 s, then twice as long each time.",
)
flags.DEFINE_integer(
    "max_answer_bytes", query.MAX_ANSWER_BYTES, "REST: a larger answer is refused.", lower_bound=1
)


def main() -> None:
    predict = query.make_predictor(
        FLAGS.protocol,
        FLAGS.server,
        FLAGS.model,
        FLAGS.version,
        FLAGS.signature_name,
        FLAGS.request_format,
        FLAGS.timeout,
        FLAGS.retries,
        FLAGS.max_answer_bytes,
    )
    query.query_file(FLAGS.input_file, predict, FLAGS.output_file, FLAGS.batch_size)


def run() -> None:
    cli.run(main)


if __name__ == "__main__":
    run()
