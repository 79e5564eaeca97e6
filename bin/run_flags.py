"""The flags that locate a training run, defined once for every command that restores one
(t2t-decode, t2t-export, t2t-serve, t2t-visualize, t2t-calibrate; t2t-distill's teacher), read
into a `RunFlags` (`t2t_lite.run.run_flags`), whose `restore` is the one way to the run.

    --output_dir   the run (required unless the command says otherwise)
    --checkpoint   a checkpoint path or folder, or several for an ensemble; default: the newest
                   readable of output_dir/final, averaged/ and checkpoints/
    --data_dir     the folder with the vocabulary; default: the one the run trained on
    --usr_dir      the Python file or package that registers the run's own problem
    the search flags (--beam_size, --alpha, --patience, --extra_length, --constrained, --sampling,
    --shortlist) and --quantize, from `t2t_lite.bin.search_flags`
"""

from __future__ import annotations

import dataclasses
from typing import Any

from absl import flags

from t2t_lite.bin import search_flags
from t2t_lite.run.run_flags import RunFlags

FLAGS = flags.FLAGS
CHECKPOINT_HELP = (
    "Checkpoint path or folder (default: the newest readable of output_dir/final, "
    "output_dir/averaged and output_dir/checkpoints, the folder written last first)."
)


def define_run_flags(output_dir_required: bool = True, ensembles: bool = False) -> None:
    """Defines --output_dir, --checkpoint, --data_dir, --usr_dir, the search flags and
    --quantize; with `ensembles`, --checkpoint takes several and --ensemble_weights exists."""
    flags.DEFINE_string(
        "output_dir",
        None,
        "The training run's directory (written by t2t-train).",
        required=output_dir_required,
    )
    checkpoint_help = CHECKPOINT_HELP
    if ensembles:
        checkpoint_help += (
            " Several, comma-separated (paths, folders or run folders of one vocabulary): an "
            "ensemble averaging their probabilities at each step."
        )
        flags.DEFINE_list(
            "ensemble_weights", None, "One weight per --checkpoint of an ensemble (default: equal)."
        )
    flags.DEFINE_string("checkpoint", None, checkpoint_help)
    flags.DEFINE_string("data_dir", None, "Folder holding the vocabulary (default: the run's).")
    flags.DEFINE_string(
        "usr_dir", None, "Python file or package registering the run's own problem (--usr_dir)."
    )
    search_flags.define_search_flags()
    search_flags.define_quantize_flag()


# The command-line flags that are not `RunFlags` everywhere: t2t-export's --nbest is its
# signature's, not a search setting (t2t-decode passes its own).
_NOT_RUN_FLAGS = ("nbest",)


def from_flags(**given: Any) -> RunFlags:
    """The `RunFlags` of the flags this command defines (the others keep their defaults),
    `given` on top (t2t-distill's --teacher as output_dir, t2t-decode's --nbest)."""
    values = {
        field.name: FLAGS[field.name].value
        for field in dataclasses.fields(RunFlags)
        if field.name in FLAGS and field.name not in _NOT_RUN_FLAGS
    }
    return RunFlags(**{**values, **given})


def check_run_flags(nbest: int | None = None) -> None:
    """Refuses, before TensorFlow loads, what needs no model: an --output_dir without the run's
    hparams.json, a malformed --sampling or --shortlist, sampling values out of range, --nbest
    above a given --beam_size (`nbest`: the command's --nbest). The rest is checked where the
    run is restored, against the problem's defaults and the model."""
    from t2t_lite.hparams import SearchSettings
    from t2t_lite.run.run_info import RunInfo

    if FLAGS.output_dir:
        RunInfo.load(FLAGS.output_dir)
    given = {k: v for k, v in from_flags().search_overrides().items() if v is not None}
    nbest = nbest or 1
    # Unset values stay neutral here (a beam of nbest, no constraint) so that only the given
    # ones can be refused; the problem's defaults may differ.
    given = {"constrained": False, **given, "nbest": nbest}
    given.setdefault("beam_size", nbest)
    SearchSettings().override(**given).check()


def restore_run(search: dict[str, Any] | None = None, **options: Any):
    """`RunFlags.restore` of this command's flags: `search` settings on top of the search
    flags', `options` to `Run.restore`."""
    return from_flags().restore(search, **options)
