"""BLEU two ways, both computed by sacreBLEU.

1. **sacreBLEU** (`sacre_bleu`): detokenized text scored with sacreBLEU's own tokenizer
   (`13a` by default) and its signature, e.g.
   `nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0`. This is the number to
   compare with other systems today.
2. **Tokenized BLEU as in the paper** (`tokenized_bleu`): the paper's Table 2 scores are
   tensor2tensor's `get_ende_bleu.sh`: Moses-tokenize hypothesis and reference, split hyphenated
   compounds (`rich-text` -> `rich ##AT##-##AT## text`, the GNMT/ConvS2S convention), then
   `multi-bleu.perl`. Here the Moses tokenizer is replaced by sacreBLEU's `13a` tokenizer (the
   mteval-v13a rules; like Moses without `-a` it keeps hyphens inside words), the compound split
   is the same regular expression, and the arithmetic is sacreBLEU's on the pre-tokenized text
   (`tokenize='none'`), case-sensitive and without smoothing, as `multi-bleu.perl` computes it.
   It reads higher than sacreBLEU's number; report it only next to the paper's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU
from sacrebleu.metrics.bleu import BLEUScore

# get_ende_bleu.sh: perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'. Python's re.sub scans
# left to right without overlaps exactly like perl's /g, so "x-y-z" -> "x ##AT##-##AT## y-z".
_COMPOUND = re.compile(r"(\S)-(\S)")
PAPER_TOKENIZER = "13a"


def read_lines(path: str) -> list[str]:
    """The lines of a UTF-8 text file, without line endings.

    `\\r\\n` endings and a leading byte-order mark are accepted. A bare `\\r` (old Mac line
    endings), a NUL byte or invalid UTF-8 is an error naming the file and line, because each of
    them would silently change how many lines the file has.
    """
    with open(path, "rb") as handle:
        data = handle.read()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()  # The file's final newline ends the last line; it starts no new one.
    lines = []
    for number, raw in enumerate(raw_lines, start=1):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if b"\r" in raw:
            raise ValueError(f"{path}:{number}: carriage return inside a line (CR-only endings?)")
        if b"\x00" in raw:
            raise ValueError(f"{path}:{number}: NUL byte")
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as error:
            raise ValueError(f"{path}:{number}: invalid UTF-8 ({error.reason})") from None
    return lines


def split_compounds(line: str) -> str:
    """`rich-text format` -> `rich ##AT##-##AT## text format` (tensor2tensor's get_ende_bleu.sh)."""
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", line)


def paper_tokenize(line: str, tokenize: str = PAPER_TOKENIZER) -> str:
    """Tokenizes with sacreBLEU's tokenizer `tokenize`, then splits hyphenated compounds."""
    return split_compounds(_tokenizer(tokenize)(line))


def _tokenizer(name: str):
    try:
        return BLEU(tokenize=name).tokenizer
    except KeyError:
        raise ValueError(f"unknown sacreBLEU tokenizer {name!r}") from None


def _check_lengths(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> None:
    for index, stream in enumerate(references):
        if len(stream) != len(hypotheses):
            raise ValueError(
                f"reference {index + 1} has {len(stream)} lines but the translation has "
                f"{len(hypotheses)}"
            )


@dataclass(frozen=True)
class BleuResult:
    """A sacreBLEU score with the signature that says how it was computed."""

    score: BLEUScore
    signature: str

    @property
    def bleu(self) -> float:
        return self.score.score


def sacre_bleu(
    hypotheses: Sequence[str], references: Sequence[Sequence[str]], tokenize: str = "13a"
) -> BleuResult:
    """sacreBLEU's corpus BLEU of detokenized text.

    Args:
      hypotheses: [n] system outputs.
      references: one or more reference streams, each [n] lines.
    """
    _check_lengths(hypotheses, references)
    metric = BLEU(tokenize=tokenize)
    score = metric.corpus_score(list(hypotheses), [list(r) for r in references])
    return BleuResult(score, str(metric.get_signature()))


def tokenized_bleu(
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    tokenize: str = PAPER_TOKENIZER,
) -> BleuResult:
    """The paper-comparable BLEU: tokenized, compounds split, multi-bleu.perl's arithmetic."""
    _check_lengths(hypotheses, references)
    hyps = [paper_tokenize(line, tokenize) for line in hypotheses]
    refs = [[paper_tokenize(line, tokenize) for line in stream] for stream in references]
    # force=True: the text is tokenized on purpose; sacreBLEU would otherwise warn about it.
    metric = BLEU(tokenize="none", smooth_method="none", force=True)
    score = metric.corpus_score(hyps, refs)
    signature = f"{metric.get_signature()}|pretok:{tokenize}+compound-split"
    return BleuResult(score, signature)


def bleu_files(
    translation: str, references: Sequence[str], tokenize: str = "13a"
) -> tuple[BleuResult, BleuResult]:
    """(sacre_bleu, tokenized_bleu) of a translation file against reference files (`read_files`
    says what is refused)."""
    hypotheses, streams = read_files(translation, references)
    return sacre_bleu(hypotheses, streams, tokenize), tokenized_bleu(hypotheses, streams)


def read_files(translation: str, references: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """(hypotheses, reference streams) of a translation file and reference files.

    Raises:
      ValueError: when a reference has a different number of lines (naming both files and both
        counts), or a file is not clean UTF-8 text (naming file and line).
    """
    hypotheses = read_lines(translation)
    streams = []
    for path in references:
        lines = read_lines(path)
        if len(lines) != len(hypotheses):
            raise ValueError(
                f"{translation} has {len(hypotheses)} lines but {path} has {len(lines)}; "
                "BLEU needs one reference line per translation line"
            )
        streams.append(lines)
    return hypotheses, streams


def format_bleu(sacre: BleuResult, tokenized: BleuResult) -> str:
    """Both scores side by side, each with its signature."""
    return (
        f"sacreBLEU      {sacre.score}\n"
        f"  signature    {sacre.signature}\n"
        f"tokenized BLEU {tokenized.score}\n"
        f"  signature    {tokenized.signature}\n"
        "  (13a tokens, hyphenated compounds split as ##AT##-##AT##: comparable with the "
        "paper's Table 2)\n"
    )
