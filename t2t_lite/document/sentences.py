"""A paragraph's sentences, each short enough for the model.

Sentences come from sentencex (Wikimedia's segmenter, rules for about 300 languages, abbreviations
included), over the paragraph's plain text (`t2t_lite.document.markup`). A sentence is a range of
the paragraph's whitespace-separated words, so that word alignments of its translation count
from the paragraph's words.

A sentence with more tokens than the model takes is never truncated: it is split at the clause
boundary (a word ending in , ; : or a dash between words) nearest its middle, again until every
piece fits, and a warning names the line; without a clause boundary it is split at its middle
word.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import NamedTuple

from absl import logging

_CLAUSE_ENDS = (",", ";", ":")
_DASHES = ("-", "–", "—")


class Sentence(NamedTuple):
    """Words [start, end) of a paragraph's plain text."""

    start: int
    end: int


def sentence_spans(plain: str, language: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the sentences of `plain` (sentencex)."""
    import sentencex  # a core dependency; imported here so that markup alone stays light

    found = []
    for boundary in sentencex.get_sentence_boundaries(language, plain):
        start, end = boundary["start_index"], boundary["end_index"]
        if plain[start:end].strip():
            found.append((start, end))
    return found


def split_sentences(plain: str, words: Sequence[tuple[int, int]], language: str) -> list[Sentence]:
    """The sentences of `plain` as word ranges; `words` are its words' (start, end) offsets.
    Every word is in exactly one sentence."""
    starts = sorted({s for s, _ in sentence_spans(plain, language)} | {0})
    sentences, word = [], 0
    for k, _ in enumerate(starts):
        end_offset = starts[k + 1] if k + 1 < len(starts) else len(plain) + 1
        first = word
        while word < len(words) and words[word][0] < end_offset:
            word += 1
        if word > first:
            sentences.append(Sentence(first, word))
    if word < len(words):  # words past the last boundary (never, but no word is lost)
        sentences.append(Sentence(word, len(words)))
    return sentences


def _cut(words: Sequence[str]) -> int:
    """Where a too-long run of words is split: after the clause boundary nearest the middle."""
    middle = len(words) / 2
    cuts = [
        k
        for k in range(1, len(words))
        if words[k - 1].endswith(_CLAUSE_ENDS) or words[k] in _DASHES
    ]
    return min(cuts, key=lambda k: abs(k - middle)) if cuts else max(1, len(words) // 2)


def fit_sentences(
    sentences: Sequence[Sentence],
    words: Sequence[str],
    token_counts: Callable[[list[str]], list[int]],
    max_tokens: int,
    name: str,
) -> list[Sentence]:
    """`sentences` with each one of more than `max_tokens` tokens (`token_counts` of its text,
    EOS included) split until every piece fits; a warning names `name` (e.g. "doc.md:12")."""
    todo, fitted = deque(sentences), []
    counts = deque(token_counts([" ".join(words[s.start : s.end]) for s in todo]))
    warned = set()
    while todo:
        sentence, count = todo.popleft(), counts.popleft()
        if count <= max_tokens or sentence.end - sentence.start < 2:
            fitted.append(sentence)
            continue
        if sentence not in warned:
            logging.warning(
                "%s: a sentence of %d tokens, more than the model's %d: split at a clause "
                "boundary and translated in parts",
                name,
                count,
                max_tokens,
            )
        cut = sentence.start + _cut(words[sentence.start : sentence.end])
        parts = [Sentence(sentence.start, cut), Sentence(cut, sentence.end)]
        warned.update(parts)
        todo.extendleft(reversed(parts))
        counts.extendleft(reversed(token_counts([" ".join(words[p.start : p.end]) for p in parts])))
    return fitted
