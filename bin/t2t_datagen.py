"""t2t-datagen: raw text --> vocabulary, TFRecord shards and metadata.json in --data_dir.

    t2t-datagen --problem=translate_ende_lohelp --data_dir=~/t2t_data/lohelp_ende
    t2t-datagen --problem=text2text --data_dir=D --train_src=a.en --train_tgt=a.de \\
        --dev_src=b.en --dev_tgt=b.de
    t2t-datagen --problem=algorithmic_reverse --data_dir=D --problem_options=train_size=2000

Rerunning after an interruption finishes the job; a finished data_dir is left alone.
"""

from __future__ import annotations

import json

from absl import app, flags, logging

from t2t_lite.problems import get_problem, import_usr_dir

FLAGS = flags.FLAGS
flags.DEFINE_string("problem", None, "Registered problem name.", required=True)
flags.DEFINE_string("data_dir", None, "Where vocabulary, shards and metadata go.", required=True)
flags.DEFINE_string("usr_dir", None, "Python package or .py file registering your own problems.")
# Options forwarded to the problem when given; a problem rejects those it does not take.
OPTION_FLAGS = {
    "raw_dir": "Local raw files (WMT14: {train,dev,test}.{en,de|fr}; lohelp: .deb cache).",
    "tfds_dir": "tensorflow-datasets data_dir for the WMT14 builders.",
    "help_dir": "An unpacked /usr/share/libreoffice/help tree (lohelp problems).",
    "ptb_dir": "Parsing (wsj_parsing*): WSJ section folders 00..24 of .mrg files.",
    "silver_trees": "wsj_parsing_semi: glob of bracketed silver trees added to training.",
    "gum_dir": "parsing_trees: GUM .ptb folder, split by document name.",
    **{
        f"{split}_trees": f"parsing_trees: glob(s) of {split} bracketed tree files."
        for split in ("train", "dev", "test")
    },
    **{
        f"{split}_{side}": f"text2text: {split} {'source' if side == 'src' else 'target'} file."
        for split in ("train", "dev", "test")
        for side in ("src", "tgt")
    },
}
for _name, _help in OPTION_FLAGS.items():
    flags.DEFINE_string(_name, None, _help)
flags.DEFINE_list("problem_options", [], "More problem options as key=value,key=value.")


def _options() -> dict[str, str]:
    options = {name: FLAGS[name].value for name in OPTION_FLAGS if FLAGS[name].present}
    for item in FLAGS.problem_options:
        key, sep, value = item.partition("=")
        if not sep:
            raise app.UsageError(f"--problem_options item {item!r} is not key=value")
        options[key.strip()] = value.strip()
    return options


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
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
    app.run(main)


if __name__ == "__main__":
    run()
