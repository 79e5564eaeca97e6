"""t2t-serve: a local web page and JSON API to translate, compare hypotheses and see attention.

  t2t-serve --output_dir=runs/ende              # a training run, as t2t-decode restores it
  t2t-serve --export_dir=/srv/models/ende       # a t2t-export SavedModel (its newest version)
  t2t-serve --output_dir=runs/ende --port=8081 --beam_size=4 --max_sentences=8
  t2t-serve --output_dir=runs/ende --jit_compile   # each search compiled by XLA
  t2t-serve --output_dir=runs/ende --adapters=calc=runs/calc_lora   # + adapters, per request

Open http://127.0.0.1:8080/ for the page; http://127.0.0.1:8080/docs describes the API. The
page translates sentences with a chosen beam size, alpha and n-best, shows every layer's and
head's attention, and draws parse trees for parsing runs. Binding --host to anything but a
loopback address prints a warning: the server has no authentication. Requests must name the
server by a loopback name or --host in their Host header (--allowed_hosts adds names).
"""

from __future__ import annotations

from absl import flags

from t2t_lite.bin import cli, run_flags, search_flags
from t2t_lite.extras import import_extra

FLAGS = flags.FLAGS
run_flags.define_run_flags(output_dir_required=False)  # or --export_dir
flags.DEFINE_string("export_dir", None, "SavedModel (t2t-export) to serve; newest version.")
flags.DEFINE_string("host", "127.0.0.1", "Address to listen on.")
flags.DEFINE_integer("port", 8080, "Port to listen on.", lower_bound=0, upper_bound=65535)
flags.DEFINE_string(
    "model_name",
    None,
    "With --export_dir: the name of TF Serving's REST API, /v1/models/NAME (default: the "
    "export folder's name).",
)
flags.DEFINE_string(
    "adapters",
    None,
    "With --output_dir: LoRA adapter runs over it, NAME=RUN,NAME=RUN; a request's adapter "
    "field chooses one.",
)
flags.DEFINE_integer("max_sentences", 32, "Sentences per request.", lower_bound=1)
flags.DEFINE_integer("max_characters", 1000, "Characters per sentence.", lower_bound=1)
flags.DEFINE_integer(
    "max_concurrent", 2, "Searches and scorings at once (every route); more get 429.", lower_bound=1
)
flags.DEFINE_integer(
    "max_constraints", 16, "Target phrases (constraints) per sentence.", lower_bound=1
)
flags.DEFINE_string(
    "allowed_hosts",
    None,
    "Host header names served besides localhost, 127.0.0.1, [::1] and --host, comma-separated "
    "(e.g. the name of a proxy in front); '*' serves any (no DNS-rebinding guard).",
)
flags.DEFINE_string(
    "version_labels",
    None,
    "With --export_dir: TF Serving's version labels of the served version, LABEL=VERSION,... "
    "(/v1/models/NAME/labels/LABEL).",
)
search_flags.define_jit_compile_flag()
flags.adopt_module_key_flags(run_flags)
flags.adopt_module_key_flags(search_flags)


def main() -> None:
    run_flags.check_run_flags()  # before TensorFlow loads
    for module, package in (("fastapi", "fastapi"), ("fastapi_offline", "fastapi-offline"),
                            ("uvicorn", "uvicorn")):  # fmt: skip
        import_extra(module, package, "serve", "t2t-serve")  # before the run is restored
    from t2t_lite.serve.web import server  # after flag parsing: --help stays fast

    sock = server.listen(FLAGS.host, FLAGS.port)  # a port in use fails before the model loads
    limits = server.Limits(
        max_sentences=FLAGS.max_sentences,
        max_characters=FLAGS.max_characters,
        max_concurrent=FLAGS.max_concurrent,
        max_constraints=FLAGS.max_constraints,
    )
    backend = server.load_backend(
        run_flags.from_flags(),
        FLAGS.export_dir,
        jit_compile=FLAGS.jit_compile,
        model_name=FLAGS.model_name,
        adapters=server.parse_adapters(FLAGS.adapters or ""),
        version_labels=server.parse_names(FLAGS.version_labels or "", "--version_labels"),
    )
    hosts = [name.strip() for name in (FLAGS.allowed_hosts or "").split(",") if name.strip()]
    server.serve(backend, limits, sock, hosts)


def run() -> None:
    cli.run(main)


if __name__ == "__main__":
    run()
