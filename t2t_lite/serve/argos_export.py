"""Export for Argos Translate: a trained run --> an `.argosmodel` package that argostranslate
installs (`argostranslate.package.install_from_path`) and translates with, and LibreTranslate
serves.

A package is a zip archive of one folder, `translate-<from>_<to>-<version>/`, as
argostranslate's `Package` reads it:

  - `model/`: the CTranslate2 model (`ctranslate2_export.T2TLiteConverter`, the conversion of
    `t2t-export --format=ctranslate2`), its weights in `--ct2_quantization`;
  - `sentencepiece.model`: the run's SentencePiece model, byte for byte. argostranslate encodes
    each sentence to pieces with it (`encode(out_type=str)`), and CTranslate2 looks the pieces up
    in the model's vocabulary, which is the run's pieces in id order ("<pad>", "<EOS>", "<unk>",
    ...): so a piece gets the id that t2t_lite gives it, "<EOS>" (id 1) is appended to the
    source and decoding starts from "<pad>" (id 0), as in training. The output pieces are joined
    back with the same model (`decode_pieces`);
  - `metadata.json`: the language pair (`from_code`, `from_name`, `to_code`, `to_name`), the
    package's version (the export's version number) and the argostranslate version it was made
    for;
  - `README.md`: the model card.

argostranslate splits text into sentences itself (MiniSBD by default, whose model for the
source language it fetches once); the package carries none. A run whose vocabulary is not
SentencePiece, or whose problem names no language pair (without `--argos_languages`), is refused,
as is whatever CTranslate2 cannot hold (`ctranslate2_export.refusal`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from absl import logging

from t2t_lite.decode.exported import EXPORT_INFO
from t2t_lite.run.run import Run
from t2t_lite.runtime import atomic_io
from t2t_lite.serve import ctranslate2_export as ct2
from t2t_lite.serve.versions import next_version, write_version

# The argostranslate release whose package layout this writes (and the check script installs).
ARGOS_VERSION = "1.11.0"
# English names of the languages t2t_lite's problems translate; another code is its own name.
LANGUAGE_NAMES = {
    "ar": "Arabic",
    "cs": "Czech",
    "de": "German",
    "en": "English",
    "es": "Spanish",
    "fr": "French",
    "it": "Italian",
    "ja": "Japanese",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ru": "Russian",
    "uk": "Ukrainian",
    "zh": "Chinese",
}


def language_pair(run: Run, languages: tuple[str, str] | None = None) -> tuple[str, str] | None:
    """The package's (from, to) codes: `languages`, else the problem's `source_language` and
    `target_language`; None for a problem that names none."""
    if languages:
        return languages
    pair = tuple(getattr(run.problem, f"{side}_language", "") for side in ("source", "target"))
    return pair if all(pair) else None  # type: ignore[return-value]


def refusal(run: Run, languages: tuple[str, str] | None = None) -> str | None:
    """Why argostranslate cannot use this run, or None when it can."""
    vocabulary = os.path.basename(run.tokenizer.path)
    if not vocabulary.endswith(".model"):
        return (
            f"its vocabulary {vocabulary} is not a SentencePiece model; argostranslate tokenizes "
            'with SentencePiece (a problem of vocab_type "bpe")'
        )
    if language_pair(run, languages) is None:
        return (
            f"problem {run.problem.name} names no language pair; pass "
            "--argos_languages=FROM,TO (ISO 639 codes, e.g. en,de)"
        )
    return ct2.refusal(run)


def checked_pair(run: Run, languages: tuple[str, str] | None = None) -> tuple[str, str]:
    """The package's language pair, once the run is known to fit (a ValueError if not)."""
    reason = refusal(run, languages)
    if reason:
        raise ValueError(f"{run.output_dir} cannot be exported for argostranslate: {reason}")
    return language_pair(run, languages)  # type: ignore[return-value]


def package_name(pair: tuple[str, str], version: int) -> str:
    """The package's folder and file name, as argostranslate's own packages are named."""
    return f"translate-{pair[0]}_{pair[1]}-{version}"


def metadata(pair: tuple[str, str], version: int) -> dict[str, Any]:
    """The package's metadata.json."""
    return {
        "type": "translate",
        "package_version": str(version),
        "argos_version": ARGOS_VERSION,
        "from_code": pair[0],
        "from_name": LANGUAGE_NAMES.get(pair[0], pair[0]),
        "to_code": pair[1],
        "to_name": LANGUAGE_NAMES.get(pair[1], pair[1]),
    }


def export_run(
    run: Run,
    export_dir: str,
    version: int | None = None,
    quantization: str = "float32",
    card: Callable[[dict[str, Any], str], str] | None = None,
    languages: tuple[str, str] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Writes `export_dir/<version>/`: the package `translate-<from>_<to>-<version>.argosmodel`,
    its model card (README.md, also inside the package) and t2t_export.json, whole or not at
    all (`write_version`). Returns the folder and the facts stored."""
    ct2.check_quantization(quantization)
    pair = checked_pair(run, languages)
    version = next_version(export_dir) if version is None else version
    name = package_name(pair, version)
    vocab_file = run.tokenizer.path
    converter = ct2.T2TLiteConverter(run.model, ct2.vocabulary_tokens(vocab_file))
    info = {
        **run.describe(),
        "format": "argos",
        "package": f"{name}.argosmodel",
        "metadata": metadata(pair, version),
        "quantization": quantization,
        "vocabulary": os.path.basename(vocab_file),
        "max_positions": run.hparams.max_positions,
    }
    for key in ("output_dir", "checkpoint", "data_dir"):
        info[key] = os.path.abspath(info[key])
    readme = card(info, usage(info)) if card else usage(info)
    start = time.monotonic()

    def write(folder: str) -> None:
        with tempfile.TemporaryDirectory() as scratch:
            package = os.path.join(scratch, name)
            os.makedirs(package)
            converter.convert(os.path.join(package, "model"), quantization=quantization)
            shutil.copyfile(vocab_file, os.path.join(package, "sentencepiece.model"))
            atomic_io.write_json(os.path.join(package, "metadata.json"), info["metadata"])
            atomic_io.write_text(os.path.join(package, "README.md"), readme)
            archive = shutil.make_archive(os.path.join(scratch, name), "zip", scratch, name)
            shutil.move(archive, os.path.join(folder, info["package"]))
        atomic_io.write_json(os.path.join(folder, EXPORT_INFO), info)
        atomic_io.write_text(os.path.join(folder, "README.md"), readme)

    path = write_version(export_dir, version, write)
    logging.info("wrote the argostranslate package %s in %.1f s", path, time.monotonic() - start)
    return path, info


def usage(info: dict[str, Any]) -> str:
    """The model card's "Use": installing the package and translating with argostranslate."""
    meta = info["metadata"]
    return (
        f"An Argos Translate package ({meta['from_name']} to {meta['to_name']}), converted by "
        f"t2t-export --format=argos from checkpoint `{os.path.basename(info['checkpoint'])}` "
        f"(problem {info['problem']}, hparams {info['hparams_set']}), weights "
        f"{info['quantization']}; docs/serving.md in t2t_lite tells how its search compares "
        "with t2t-decode's.\n\n"
        "```python\nimport argostranslate.package\nimport argostranslate.translate\n\n"
        f'argostranslate.package.install_from_path("{info["package"]}")\n'
        "print(argostranslate.translate.translate(\n"
        f'    "Click the OK button to close the dialog.", "{meta["from_code"]}", '
        f'"{meta["to_code"]}"\n))\n```\n\n'
        "LibreTranslate serves the installed package (`libretranslate --load-only "
        f"{meta['from_code']},{meta['to_code']}`)."
    )
