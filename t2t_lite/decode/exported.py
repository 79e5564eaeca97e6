"""A SavedModel written by t2t-export, read back in Python: its folder, its signature names and
`ExportedTranslator`, which translates text with it as `Translator` does with a run.

The export is self-contained (tokenizer, search and postprocessing are in its graph), so its
search settings are the ones it was exported with; n-best lists come from its `nbest` signature.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from t2t_lite.extras import lazy_import

tf = lazy_import("tensorflow")

NBEST_SIGNATURE = "nbest"
SAMPLE_SIGNATURE = "sample"
IDS_SIGNATURE = "translate_ids"
ATTENTION_SIGNATURE = "attention"
GUIDED_SIGNATURE = "guided"
EXPORT_INFO = "t2t_export.json"  # in the version folder's assets.extra/
# The guided signature's repetition and length controls (t2t_lite.search.controls), a value
# per line, and their dtypes and values that turn them off.
CONTROL_INPUTS = ("no_repeat_ngram_size", "repetition_penalty", "min_length", "disable_unk")
CONTROL_TYPES = (("int32", 0), ("float32", 1.0), ("int32", 0), ("bool", False))


def resolve_version(export_dir: str) -> str:
    """`export_dir` itself when it holds saved_model.pb, else its newest numeric version
    folder; a FileNotFoundError names --export_dir when there is neither."""
    if os.path.isfile(os.path.join(export_dir, "saved_model.pb")):
        return export_dir
    if not os.path.isdir(export_dir):
        raise FileNotFoundError(f"--export_dir={export_dir} is not a folder")
    versions = [int(name) for name in os.listdir(export_dir) if name.isdigit()]
    for version in sorted(versions, reverse=True):
        path = os.path.join(export_dir, str(version))
        if os.path.isfile(os.path.join(path, "saved_model.pb")):
            return path
    raise FileNotFoundError(
        f"--export_dir={export_dir} holds neither saved_model.pb nor a version folder with one "
        "(t2t-export writes export_dir/<version>/)"
    )


def is_export(path: str) -> bool:
    """Whether `path` is a SavedModel of t2t-export or a folder of its versions."""
    try:
        resolve_version(path)
    except FileNotFoundError:
        return False
    return True


def strings(tensor) -> list:
    """A string tensor --> nested lists of Python str."""
    return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(tensor.numpy()).tolist()


class ExportedTranslator:
    """Translates with the newest version in `export_dir` (or the SavedModel folder itself)."""

    def __init__(self, export_dir: str):
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops the graph uses)

        self.path = resolve_version(export_dir)
        self.model = tf.saved_model.load(self.path)
        self.signatures = self.model.signatures
        with open(os.path.join(self.path, "assets.extra", EXPORT_INFO), encoding="utf-8") as f:
            self.info: dict[str, Any] = json.load(f)
        self.max_nbest = int(self.info.get("settings", {}).get("nbest", 1))

    def search(self, lines: Sequence[str], nbest: int = 1) -> tuple[list, list, list[bool]]:
        """(texts `[lines][nbest]`, scores `[lines][nbest]`, truncated `[lines]`) of the export's
        search; `nbest` up to the export's (t2t-export --nbest)."""
        if not 1 <= nbest <= self.max_nbest:
            raise ValueError(
                f"nbest={nbest} must be in [1, {self.max_nbest}] for {self.path} (an export's "
                "search is fixed: t2t-export --nbest)"
            )
        inputs = tf.constant(list(lines), tf.string)
        if nbest == 1:
            found = self.signatures["serving_default"](inputs=inputs)
            outputs, scores = found["outputs"][:, None], found["scores"][:, None]
        else:
            found = self.signatures[NBEST_SIGNATURE](inputs=inputs)
            outputs, scores = found["outputs"][:, :nbest], found["scores"][:, :nbest]
        truncated = [bool(t) for t in found["truncated"].numpy()]
        return strings(outputs), scores.numpy().tolist(), truncated

    @property
    def takes_controls(self) -> bool:
        """Whether the guided signature takes the repetition and length controls (an export
        written before they existed does not)."""
        if GUIDED_SIGNATURE not in self.signatures:
            return False
        _, named = self.signatures[GUIDED_SIGNATURE].structured_input_signature
        return CONTROL_INPUTS[0] in named

    def guided(
        self, lines: Sequence[str], guides: Sequence[Any] | None = None, controls: Any = None
    ) -> dict:
        """The `guided` signature's outputs for `lines`, each held to its `Guide` (prefix and
        target phrases; None: unguided): the best translations with their tokens, token
        probabilities, word alignments and confidence. `controls`: a
        `t2t_lite.search.controls.Controls` of Python values for every line (None: the
        export's settings). A ValueError for an export without the signature, or controls
        asked of one that does not take them."""
        if GUIDED_SIGNATURE not in self.signatures:
            raise ValueError(
                f"{self.path} has no guided signature (prefixes, constraints, terminology): "
                "export the run again with this version of t2t-export"
            )
        from t2t_lite.decode.guidance import Guide

        guides = guides or [Guide()] * len(lines)
        width = max((len(g.constraints) for g in guides), default=0)
        table = [list(g.constraints) + [""] * (width - len(g.constraints)) for g in guides]
        given = {
            "inputs": tf.constant(list(lines), tf.string),
            "prefixes": tf.constant([g.prefix for g in guides], tf.string),
            "constraints": tf.constant(table, tf.string, shape=[len(lines), width]),
        }
        if self.takes_controls:
            values = controls or [self.info.get("settings", {}).get(k) for k in CONTROL_INPUTS]
            for name, value, (dtype, off) in zip(
                CONTROL_INPUTS, values, CONTROL_TYPES, strict=True
            ):
                value = off if value is None else value
                given[name] = tf.fill([len(lines)], tf.constant(value, dtype))
        elif controls is not None:
            raise ValueError(
                f"{self.path}'s guided signature takes no repetition or length controls: "
                "export the run again with this version of t2t-export"
            )
        return self.signatures[GUIDED_SIGNATURE](**given)

    def aligned(
        self, lines: Sequence[str], guides: Sequence[Any] | None = None
    ) -> list[tuple[str, list[tuple[int, int]] | None]]:
        """The best translation of each line (held to its `Guide`, if given) and its word
        alignment, from the `guided` signature (an export without it: no alignment, and no
        guides)."""
        if GUIDED_SIGNATURE not in self.signatures and guides is None:
            return [(row[0], None) for row in self.search(lines)[0]]
        from t2t_lite.document.markup import read_pharaoh

        found = self.guided(lines, guides)
        return [
            (text, read_pharaoh(alignment))
            for text, alignment in zip(
                strings(found["outputs"]), strings(found["alignment"]), strict=True
            )
        ]

    def translate_document(self, text: str, language: str = "en", terminology=None) -> str:
        """As `Translator.translate_document`, with the export's search; `terminology` (a
        `t2t_lite.decode.guidance.Terminology`) through its guided signature."""
        from t2t_lite.decode.guidance import terminology_guides
        from t2t_lite.document.document import Engine, translate_document

        engine = Engine(lambda lines: self.aligned(lines, terminology_guides(terminology, lines)))
        return translate_document(text, engine, language)

    def translate(self, lines: Sequence[str], nbest: int = 1, scores: bool = False) -> list:
        """As `Translator.translate`: a string per line; with nbest > 1 a list of them; with
        `scores` (text, score) pairs instead of texts. An empty line gives ""."""
        texts, values, _ = self.search(lines, nbest)
        return shape_translations(lines, texts, values, nbest, scores)


def shape_translations(lines, texts, values, nbest: int, scores: bool) -> list:
    """What `translate` returns for `lines` from their n-best texts and scores."""
    out = []
    for line, row, row_scores in zip(lines, texts, values, strict=True):
        if not line.strip():
            row, row_scores = [""] * nbest, [0.0] * nbest
        items = [(t, float(s)) for t, s in zip(row, row_scores, strict=True)] if scores else row
        out.append(items[0] if nbest == 1 else list(items[:nbest]))
    return out
