"""A `Translator` as the `Engine` that translates a document's sentences
(`t2t_lite.document.document`): t2t-decode --input_format=document, `Translator.translate_document`
and t2t-serve's /api/document."""

from __future__ import annotations

import tensorflow as tf

from t2t_lite.decode.guidance import Terminology, terminology_guides
from t2t_lite.document.document import Alignment, Engine
from t2t_lite.document.markup import read_pharaoh
from t2t_lite.model.ensemble import Ensemble
from t2t_lite.vocabulary import UNK_ID


def translator_engine(translator, terminology: Terminology | None = None) -> Engine:
    """The `Engine` of a `t2t_lite.decode.translator.Translator`: its best hypotheses, their
    alignments (`details`; none for an ensemble, whose sentences then align in proportion), its
    tokenizer's counts and the model's positions. With `terminology`, each sentence's
    translation must contain the target terms of the source terms in it, as for a line of
    `--terminology`."""
    aligns = not isinstance(translator.model, Ensemble)
    tokenizer = translator.tokenizer

    def translate(sentences: list[str]) -> list[tuple[str, Alignment | None]]:
        found = translator.hypotheses(
            sentences,
            log_progress=False,
            details=aligns,
            guides=terminology_guides(terminology, sentences),
        )
        return [
            (hyps[0].text, read_pharaoh(hyps[0].details.alignment) if aligns else None)
            if hyps
            else ("", [])
            for hyps in found
        ]

    def token_counts(sentences: list[str]) -> list[int]:
        return [int(n) + 1 for n in tokenizer.encode(tf.constant(sentences)).row_lengths()]

    def breaks(number: str) -> bool:
        ids = tokenizer.encode_py(number)
        return UNK_ID in ids or tokenizer.decode_py(ids) != number

    return Engine(translate, token_counts, translator.max_positions, breaks)
