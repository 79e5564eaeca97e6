"""The flags that locate a training run, defined once for every command that restores one
(t2t-decode, t2t-export, t2t-serve, t2t-visualize), and the one function that restores it.

    --output_dir   the run (required unless the command says otherwise)
    --checkpoint   a checkpoint path or folder, or several for an ensemble; default: the newest
                   readable of output_dir/final, averaged/ and checkpoints/
    --data_dir     the folder with the vocabulary; default: the one the run trained on
    --usr_dir      the Python file or package that registers the run's own problem
    the search flags (--beam_size, --alpha, --extra_length, --constrained, --sampling) and
    --quantize, from `t2t_lite.bin.search_flags`
"""

from __future__ import annotations

from typing import Any

from absl import flags

from t2t_lite.bin import search_flags

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


def check_run_flags(nbest: int | None = None) -> None:
    """Refuses, before TensorFlow loads, what needs no model: an --output_dir without the run's
    hparams.json, a malformed --sampling or --shortlist, sampling values out of range, --nbest
    above a given --beam_size (`nbest`: the command's --nbest). The rest is checked where the
    run is restored, against the problem's defaults and the model."""
    from t2t_lite.hparams import SearchSettings
    from t2t_lite.run.run_info import RunInfo

    if FLAGS.output_dir:
        RunInfo.load(FLAGS.output_dir)
    given = {k: v for k, v in search_flags.search_overrides().items() if v is not None}
    nbest = nbest or 1
    # Unset values stay neutral here (a beam of nbest, no constraint) so that only the given
    # ones can be refused; the problem's defaults may differ.
    given = {"constrained": False, **given, "nbest": nbest}
    given.setdefault("beam_size", nbest)
    SearchSettings().override(**given).check()


def import_usr_dir() -> None:
    """Imports --usr_dir when given (its problems register themselves)."""
    if FLAGS.usr_dir:
        from t2t_lite.problems import import_usr_dir as import_it

        import_it(FLAGS.usr_dir)


def restore_run(search: dict[str, Any] | None = None, **options: Any):
    """`Run.restore` of the run the flags locate: --usr_dir imported first, the search flags'
    values (with `search` on top) and --quantize applied; `options` go to `Run.restore`."""
    from t2t_lite.run.run import Run

    import_usr_dir()
    overrides = {**search_flags.search_overrides(), **(search or {})}
    run = Run.restore(
        FLAGS.output_dir,
        FLAGS.checkpoint,
        FLAGS.data_dir,
        search=overrides,
        quantize=FLAGS.quantize,
        **options,
    )
    wanted = FLAGS["problem"].value if "problem" in FLAGS else None
    if wanted and wanted != run.problem.name:
        raise ValueError(
            f"--problem={wanted}, but the run in {FLAGS.output_dir} was trained on "
            f"{run.problem.name}"
        )
    return run
