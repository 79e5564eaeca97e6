"""t2t-datagen: raw text --> vocabulary, TFRecord shards and metadata.json in --data_dir.

  t2t-datagen --problem=translate_ende_lohelp --data_dir=~/t2t_data/lohelp_ende
  t2t-datagen --problem=text2text --data_dir=D --train_src=a.en --train_tgt=a.de \\
      --dev_src=b.en --dev_tgt=b.de
  t2t-datagen --problem=algorithmic_reverse --data_dir=D --problem_options=train_size=2000

Every option of a registered problem (its `default_options`, described by its `option_help`) is
also a flag of the same name; `--problem_options=key=value,...` passes any option, those of
--usr_dir problems too. Rerunning after an interruption finishes the job; a finished data_dir is
left alone.
"""

from __future__ import annotations

import json
import textwrap

from absl import app, flags, logging

from t2t_lite.bin import cli
from t2t_lite.problems import describe_options, get_problem, import_usr_dir, options_by_problem

FLAGS = flags.FLAGS
flags.DEFINE_string("problem", None, "Registered problem name.", required=True)
flags.DEFINE_string("data_dir", None, "Where vocabulary, shards and metadata go.", required=True)
flags.DEFINE_string("usr_dir", None, "Python package or .py file registering your own problems.")
flags.DEFINE_list("problem_options", [], "More problem options as key=value,key=value.")
# Options forwarded to the problem when given; a problem rejects those it does not take. An
# option named like another flag is passed with --problem_options only.
OPTION_FLAGS = {name: text for name, text in describe_options().items() if name not in FLAGS}
for _name, _help in OPTION_FLAGS.items():
    flags.DEFINE_string(_name, None, _help)


def _options_help() -> str:
    """--help's section: each problem's options (also flags of the same name), with defaults."""
    lines = ["options by problem (each a flag, or --problem_options=key=value):"]
    for names, options in options_by_problem():
        if not options:
            continue
        lines.append(f"  {', '.join(names)}:")
        for option, default, text in options:
            shown = f" (default: {default})" if default not in ("", None) else ""
            lines += textwrap.wrap(
                f"--{option}: {text}{shown}",
                100,
                initial_indent="    ",
                subsequent_indent="        ",
            )
    return "\n".join(lines)


cli.HELP_SECTIONS["t2t-datagen"] = (_options_help, frozenset(OPTION_FLAGS))


def _options() -> dict[str, str]:
    options = {name: FLAGS[name].value for name in OPTION_FLAGS if FLAGS[name].present}
    for item in FLAGS.problem_options:
        key, sep, value = item.partition("=")
        if not sep:
            raise app.UsageError(f"--problem_options item {item!r} is not key=value")
        options[key.strip()] = value.strip()
    return options


def main() -> None:
    if FLAGS.usr_dir:
        import_usr_dir(FLAGS.usr_dir)
    problem = get_problem(FLAGS.problem)
    metadata = problem.generate_data(FLAGS.data_dir, **_options())
    for split, entry in metadata["splits"].items():
        logging.info(
            "%s: %d examples in %d shards, %d pairs with an empty side skipped",
            split,
            entry["examples"],
            len(entry["shards"]),
            entry["skipped_empty"],
        )
    print(json.dumps({s: e["examples"] for s, e in metadata["splits"].items()}))


def run() -> None:
    cli.run(main)


if __name__ == "__main__":
    run()
