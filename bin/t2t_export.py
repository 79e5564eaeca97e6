"""t2t-export: a trained run --> a SavedModel for TF Serving, raw text in, translation out.

  t2t-export --output_dir=runs/ende_base --export_dir=/srv/models/ende
  t2t-export --output_dir=runs/ende_base --export_dir=/srv/models/ende --version=7 \\
      --checkpoint=runs/ende_base/averaged --beam_size=4 --alpha=0.6 --max_input_length=256

Restores the run as t2t-decode does and searches as it does (the problem's decoding constraint
and postprocessing included), so the export answers what t2t-decode writes. Writes
export_dir/<version>/ (by default one more than the largest version there); the folder appears
whole or not at all. Inspect it with `python -m t2t_lite.bin.saved_model_cli show --all --dir ...`.
--format=ctranslate2 writes a CTranslate2 model folder there instead (docs/serving.md),
--format=argos an Argos Translate package (.argosmodel, for argostranslate and LibreTranslate;
docs/serving.md), and --format=litert a LiteRT model of greedy search, ids in, ids out
(docs/deploy.md).
An adapter run (t2t-train --lora_rank) exports as base + adapter; --merge_lora folds the adapter
into the base weights first, a plain model that --quantize=int8 can quantize.
"""

from __future__ import annotations

import json
import re

from absl import flags

from t2t_lite.bin import cli, run_flags, search_flags
from t2t_lite.extras import import_extra

FLAGS = flags.FLAGS
run_flags.define_run_flags()
flags.adopt_module_key_flags(run_flags)
flags.adopt_module_key_flags(search_flags)
flags.DEFINE_string(
    "export_dir", None, "Folder of versions that TF Serving watches.", required=True
)
flags.DEFINE_integer("version", None, "Version folder name; default: largest + 1.")
flags.DEFINE_integer(
    "max_input_length",
    None,
    "Longer inputs (tokens, EOS included) are truncated and flagged; "
    "default: the model's max_positions.",
)
flags.DEFINE_integer("nbest", None, "Hypotheses of the nbest signature; default: beam.")
flags.DEFINE_enum(
    "format", "saved_model", ["saved_model", "ctranslate2", "argos", "litert"], "What to write."
)
flags.DEFINE_string(
    "ct2_quantization", "float32", "CTranslate2's weights (also argos'): int8, int16, ..."
)
flags.DEFINE_string(
    "argos_languages",
    None,
    "FROM,TO: --format=argos' language pair (ISO 639 codes, e.g. en,de); default: the problem's.",
)
flags.DEFINE_enum(
    "litert_quantization", "none", ["none", "int8"], "LiteRT's weights: int8 by its converter."
)
flags.DEFINE_integer(
    "litert_batch_size",
    None,
    "A fixed number of sentences per call of the LiteRT model (for delegates that need static "
    "shapes); default: any number.",
    lower_bound=1,
)
flags.DEFINE_boolean(
    "merge_lora", False, "An adapter run: fold the adapter into the base weights (one model)."
)
flags.DEFINE_multi_string(
    "score",
    [],
    "SOURCE,REFERENCE: a test set translated and scored (BLEU, chrF) for the model card "
    "(README.md); repeat for several.",
)
flags.DEFINE_string("license", "other", "The model card's license (a Hugging Face Hub id).")
flags.DEFINE_string("model_name", None, "The model card's title; default: the run folder's name.")


CONVERTER_QUANTIZATION = {
    "ctranslate2": "--ct2_quantization",
    "argos": "--ct2_quantization",
    "litert": "--litert_quantization",
}


def main() -> None:
    if FLAGS.quantize != "none" and FLAGS.format in CONVERTER_QUANTIZATION:  # before restoring
        raise ValueError(
            f"--quantize={FLAGS.quantize}: --format={FLAGS.format} quantizes in its own "
            f"converter; pass {CONVERTER_QUANTIZATION[FLAGS.format]} instead"
        )
    if FLAGS.format in ("ctranslate2", "argos"):  # before the run is restored: a quick error
        import_extra(
            "ctranslate2", "ctranslate2", "ctranslate2", f"t2t-export --format={FLAGS.format}"
        )
    languages = argos_languages()
    if FLAGS.format == "litert":
        import_extra("ai_edge_litert", "ai-edge-litert", "litert", "t2t-export --format=litert")
        if FLAGS.beam_size not in (None, 1) or FLAGS.nbest not in (None, 1):
            raise ValueError("--format=litert searches greedily: leave out --beam_size and --nbest")
    if FLAGS.shortlist and FLAGS.format in ("litert", "argos"):
        raise ValueError(f"--shortlist: --format={FLAGS.format} searches the whole vocabulary")
    from t2t_lite.serve import versions

    versions.check_target(FLAGS.export_dir, FLAGS.version)  # before TensorFlow loads
    pairs = score_pairs()  # before TensorFlow loads
    run_flags.check_run_flags(FLAGS.nbest)
    from t2t_lite.serve import export  # TensorFlow: after the flags are checked

    run = run_flags.restore_run(
        search={"max_input_length": FLAGS.max_input_length},
        # CTranslate2 (argos too) and LiteRT: one model
        merge_lora=FLAGS.merge_lora or FLAGS.format in ("ctranslate2", "argos", "litert"),
    )
    if FLAGS.format == "argos":  # before the model card translates the test sets
        from t2t_lite.serve import argos_export

        languages = argos_export.checked_pair(run, languages)
    card = model_card(run, pairs, languages)
    if FLAGS.format == "argos":
        path, info = argos_export.export_run(
            run, FLAGS.export_dir, FLAGS.version, FLAGS.ct2_quantization, card, languages
        )
    elif FLAGS.format == "ctranslate2":
        from t2t_lite.serve import ctranslate2_export as ct2

        path, info = ct2.export_run(
            run, FLAGS.export_dir, FLAGS.version, FLAGS.ct2_quantization, card
        )
    elif FLAGS.format == "litert":
        from t2t_lite.serve import litert_export

        path, info = litert_export.export_run(
            run,
            FLAGS.export_dir,
            FLAGS.version,
            quantization=FLAGS.litert_quantization,
            batch_size=FLAGS.litert_batch_size,
            card=card,
        )
    else:
        path, info = export.export_run(run, FLAGS.export_dir, FLAGS.version, FLAGS.nbest, card)
    print(json.dumps({FLAGS.format: path, **info["settings"]}))


def score_pairs() -> list[tuple[str, str]]:
    """--score's (source, reference) pairs, checked before TensorFlow loads."""
    import os

    pairs = []
    for value in FLAGS.score:
        parts = value.split(",")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"--score={value}: give SOURCE,REFERENCE (two files)")
        for path in parts:
            if not os.path.isfile(path):
                raise ValueError(f"--score: file not found: {path}")
        pairs.append((parts[0], parts[1]))
    return pairs


def argos_languages() -> tuple[str, str] | None:
    """--argos_languages' pair, checked before TensorFlow loads (None: the problem's)."""
    if FLAGS.argos_languages is None:
        return None
    if FLAGS.format != "argos":
        raise ValueError("--argos_languages: only --format=argos writes a language pair")
    pair = tuple(FLAGS.argos_languages.split(","))
    if len(pair) != 2 or not all(re.fullmatch("[a-z]{2,3}", code) for code in pair):
        raise ValueError(
            f"--argos_languages={FLAGS.argos_languages}: give FROM,TO, two ISO 639 language "
            "codes (e.g. en,de)"
        )
    return pair


def model_card(run, pairs: list[tuple[str, str]], languages: tuple[str, str] | None = None):
    """card(info, usage) -> the README.md model card: --score's test sets (`pairs`) translated
    now as the export searches (greedy for LiteRT), the run folder's records, the flags'
    license and name; `languages` (from, to) overrides the problem's."""
    import os

    from t2t_lite.decode.translator import Translator
    from t2t_lite.serve import model_card as cards
    from t2t_lite.serve.facts import run_facts

    settings = run.search
    if FLAGS.format == "litert":
        settings = settings.override(beam_size=1, alpha=0.0, nbest=1)
    translator = Translator(
        run.model, run.tokenizer, settings, postprocess=run.problem.postprocess,
        constraint=run.constraint, shortlist=run.shortlist,
    )  # fmt: skip

    problem = tuple(getattr(run.problem, f"{side}_language", "") for side in ("source", "target"))
    source_language, target_language = languages or problem
    how = f"t2t_lite, beam {settings.beam_size}, alpha {settings.alpha:g}"
    scored = cards.score_test_sets(pairs, translator.translate, how)
    facts = {
        "name": FLAGS.model_name or os.path.basename(os.path.abspath(run.output_dir)),
        "format": FLAGS.format,
        "license": FLAGS.license,
        "source_language": source_language,
        "target_language": target_language,
        "max_input_length": settings.input_limit(run.model.max_positions),
        "vocabulary": os.path.basename(run.tokenizer.path),
        "record": cards.run_record(run.output_dir, run.data_dir),
        **run_facts(run),
    }
    return lambda info, usage: cards.card({**info, **facts}, scored, usage)


def run() -> None:
    cli.run(main)


if __name__ == "__main__":
    run()
