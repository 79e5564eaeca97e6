"""t2t-export: a trained run --> a SavedModel for TF Serving, raw text in, translation out.

  t2t-export --output_dir=runs/ende_base --export_dir=/srv/models/ende
  t2t-export --output_dir=runs/ende_base --export_dir=/srv/models/ende --version=7 \\
      --checkpoint=runs/ende_base/averaged --beam_size=4 --alpha=0.6 --max_input_length=256

Writes export_dir/<version>/ (by default one more than the largest version there); the folder
appears whole or not at all. Serve it with `tensorflow/serving` (see README, "Export and TF
Serving"), inspect it with `python -m t2t_lite.bin.saved_model_cli show --all --dir ...`.
"""

from __future__ import annotations

import json
import sys

from absl import app, flags

_OUTPUT_DIR = flags.DEFINE_string(
    "output_dir", None, "Training output_dir (hparams.json, checkpoints/).", required=True
)
_EXPORT_DIR = flags.DEFINE_string(
    "export_dir", None, "Folder of versions that TF Serving watches.", required=True
)
_CHECKPOINT = flags.DEFINE_string(
    "checkpoint", None, "Checkpoint path or folder; default: newest of averaged/ and checkpoints/."
)
_VERSION = flags.DEFINE_integer("version", None, "Version folder name; default: largest + 1.")
_DATA_DIR = flags.DEFINE_string("data_dir", None, "Vocabulary folder; default: the run's.")
_USR_DIR = flags.DEFINE_string("usr_dir", None, "Python package or .py file with your problems.")
_BEAM_SIZE = flags.DEFINE_integer("beam_size", None, "Beam width; default: the problem's.")
_ALPHA = flags.DEFINE_float("alpha", None, "Length-penalty alpha; default: the problem's.")
_EXTRA_LENGTH = flags.DEFINE_integer(
    "extra_length", None, "Max output length = input length + this; default: the problem's."
)
_MAX_INPUT_LENGTH = flags.DEFINE_integer(
    "max_input_length",
    None,
    "Longer inputs (tokens, EOS included) are truncated and flagged; "
    "default: the model's max_positions.",
)
_NBEST = flags.DEFINE_integer("nbest", None, "Hypotheses of the nbest signature; default: beam.")


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    from t2t_lite.problems import import_usr_dir
    from t2t_lite.serve import export  # after flag parsing: --help stays fast

    try:
        if _USR_DIR.value:
            import_usr_dir(_USR_DIR.value)
        translator, info = export.load_serving(
            _OUTPUT_DIR.value,
            checkpoint=_CHECKPOINT.value,
            data_dir=_DATA_DIR.value,
            beam_size=_BEAM_SIZE.value,
            alpha=_ALPHA.value,
            extra_length=_EXTRA_LENGTH.value,
            max_input_length=_MAX_INPUT_LENGTH.value,
            nbest=_NBEST.value,
        )
        path = export.write_saved_model(translator, _EXPORT_DIR.value, _VERSION.value, info)
    except (OSError, ValueError, KeyError) as error:
        sys.exit(f"t2t-export: {error}")
    print(json.dumps({"saved_model": path, **info["settings"]}))


def run() -> None:
    app.run(main)


if __name__ == "__main__":
    run()
