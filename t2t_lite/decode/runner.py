"""What `t2t-decode` does: restore a trained model, translate or score lines with its
`Translator` (`t2t_lite.decode.translator`), write them in order.

N lines in give N lines out: an empty or whitespace-only line gives an empty line. With
`nbest > 1` each input line gives `nbest` lines in the Moses n-best format
`index ||| hypothesis ||| score` (index from 0).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterable, Iterator, Sequence

from t2t_lite.data import iter_raw_lines
from t2t_lite.decode.guidance import Terminology, read_guides
from t2t_lite.decode.translator import Hypothesis, Translator
from t2t_lite.document.document import check
from t2t_lite.run.run_flags import RunFlags
from t2t_lite.runtime import atomic_io
from t2t_lite.runtime.threads import split_cpus

STDIN = "<stdin>"


def format_translations(
    results: Sequence[list[Hypothesis]], nbest: int, alignment: bool = False
) -> Iterator[str]:
    """Output lines: one text per input when nbest == 1, else `nbest` lines
    `index ||| text ||| score` per input (an empty input: empty texts scored 0). With
    `alignment`, each line ends in ` ||| ` and the hypothesis's Pharaoh alignment."""
    for index, hyps in enumerate(results):
        hyps = hyps or [Hypothesis("", 0.0, 0.0)] * nbest
        for hyp in hyps[: 1 if nbest == 1 else nbest]:
            line = hyp.text if nbest == 1 else f"{index} ||| {hyp.text} ||| {hyp.score:.6f}"
            if alignment:
                line += f" ||| {hyp.details.alignment if hyp.details else ''}"
            yield line


def format_json_lines(results: Sequence[list[Hypothesis]]) -> Iterator[str]:
    """One JSON object per input line (`--output_format=jsonl`): {"hypotheses": [{"text",
    "score", "log_prob", "confidence", "tokens", "token_probs", "alignment"}, ...]}, best
    first; an empty input line has no hypotheses."""
    for hyps in results:
        found = []
        for hyp in hyps:
            about = hyp.details._asdict() if hyp.details else {}
            found.append({"text": hyp.text, "score": hyp.score, "log_prob": hyp.log_prob, **about})
        yield json.dumps({"hypotheses": found}, ensure_ascii=False)


def format_scores(scores: Iterable[float | None]) -> Iterator[str]:
    """One log-prob per line; an empty line where the source or the target was empty."""
    for value in scores:
        yield "" if value is None else f"{value:.6f}"


def write_lines(lines: Iterable[str], path: str | None) -> int:
    """Writes lines to `path` atomically (temporary file, then rename), or to stdout."""
    count = 0
    if not path:
        for line in lines:
            sys.stdout.write(line + "\n")
            count += 1
        sys.stdout.flush()
        return count
    with atomic_io.open_atomic(path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line + "\n")
            count += 1
    return count


def _stdin_lines() -> Iterator[tuple[int, str]]:
    """(line number, stripped text) of stdin; invalid UTF-8 names the line."""
    for number, raw in enumerate(sys.stdin.buffer, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{STDIN}:{number}: invalid UTF-8 at byte {e.start + 1}") from None
        text = text.removesuffix("\n").removesuffix("\r")
        if "\r" in text:  # the same rule as files (t2t_lite.data.lines)
            raise ValueError(f"{STDIN}:{number}: carriage return inside a line (CR-only endings?)")
        yield number, (text.removeprefix("\ufeff") if number == 1 else text).strip()


def read_input(path: str | None, what: str = "--decode_from_file") -> tuple[list[str], list[str]]:
    """All lines of `path` (or stdin when None), empty ones included, and their names
    ("file:line") for messages."""
    numbered = iter_raw_lines(path, what) if path else _stdin_lines()
    lines, names = [], []
    for number, text in numbered:
        lines.append(text)
        names.append(f"{path or STDIN}:{number}")
    return lines, names


@dataclasses.dataclass(frozen=True)
class DecodeConfig:
    """What t2t-decode does with a restored run: its flags of input, output and batching (the
    run and its search settings are `RunFlags`')."""

    decode_from_file: str | None = None
    decode_to_file: str | None = None
    score_file: str | None = None
    batch_tokens: int = 4096
    jit_compile: bool = False  # XLA compiles the search (Translator)
    inter_threads: int = 1  # batches searched at once (t2t_lite.runtime.threads.split_cpus first)
    prefix_file: str | None = None  # a target prefix per input line (guidance.read_guides)
    constraints_file: str | None = None  # tab-separated target phrases per input line
    terminology: str | None = None  # source term <TAB> target term
    alignment: bool = False  # append each hypothesis's Pharaoh word alignment
    output_format: str = "text"  # or "jsonl": text, scores, confidence, tokens, alignment
    input_format: str = "lines"  # or "document": one text, its layout and markup kept
    source_language: str | None = None  # a document's, for sentence splitting; None: problem's


def interactive(translator: Translator) -> None:
    """Reads a line at a prompt, prints its translation(s); Ctrl-D ends."""
    number = 0
    while True:
        try:
            line = input("> ")
        except EOFError:
            print()
            return
        number += 1
        results = translator.hypotheses([line], [f"{STDIN}:{number}"], log_progress=False)
        for out in format_translations(results, translator.settings.nbest):
            print(out, flush=True)


def run_decode(config: DecodeConfig, run: RunFlags) -> int:
    """Decodes (or scores) with the run that `run` restores, as `config` says; returns the
    number of lines written (or 0 after the interactive prompt)."""
    split_cpus(config.inter_threads)  # before TensorFlow runs an op: the model is not loaded
    if config.input_format == "document":
        return _decode_document(config, run)
    # An input file is read and checked before the model loads (a bad one fails at once);
    # stdin once the model is ready.
    inputs = read_decode_inputs(config) if config.decode_from_file else None
    guides = _read_guides(config, inputs[0]) if inputs else None
    translator = Translator.from_run(
        run.restore(), config.batch_tokens, config.jit_compile, inter_threads=config.inter_threads
    )
    if not config.decode_from_file and not config.score_file and sys.stdin.isatty():
        interactive(translator)
        return 0
    lines, names, targets, target_names = inputs or read_decode_inputs(config)
    if targets is not None:
        if config.output_format == "jsonl":  # each target described: a quality estimate
            scored = translator.score(lines, targets, names, target_names, details=True)
            out = format_json_lines([[h] if h else [] for h in scored])
        else:
            out = format_scores(translator.score(lines, targets, names, target_names))
        return write_lines(out, config.decode_to_file)
    guides = guides if inputs else _read_guides(config, lines)
    details = config.alignment or config.output_format == "jsonl"
    found = translator.hypotheses(lines, names, guides=guides, details=details)
    if config.output_format == "jsonl":
        out = format_json_lines(found)
    else:
        out = format_translations(found, translator.settings.nbest, config.alignment)
    return write_lines(out, config.decode_to_file)


def _read_guides(config: DecodeConfig, lines: list[str]):
    """The guides of --prefix_file, --constraints_file and --terminology (None without them)."""
    return read_guides(
        len(lines), lines, config.prefix_file, config.constraints_file, config.terminology
    )


def read_decode_inputs(
    config: DecodeConfig,
) -> tuple[list[str], list[str], list[str] | None, list[str] | None]:
    """(lines, their names, --score_file lines or None, their names): every input read and
    checked (encoding, line endings, equal line counts) before any model is loaded."""
    lines, names = read_input(config.decode_from_file)
    if not config.score_file:
        return lines, names, None, None
    targets, target_names = read_input(config.score_file, "--score_file")
    if len(targets) != len(lines):
        raise ValueError(
            f"--score_file {config.score_file} has {len(targets)} lines but the input "
            f"{config.decode_from_file or STDIN} has {len(lines)}"
        )
    return lines, names, targets, target_names


# Flags that make no sense for a document (N lines in, N lines out), with why.
_LINE_FLAGS = {
    "score_file": "scores lines",
    "prefix_file": "guides lines",
    "constraints_file": "guides lines",
    "alignment": "aligns lines",
}


def read_document(path: str | None) -> str:
    """A whole document from `path` (or stdin) as UTF-8; invalid bytes name the line."""
    name = path or STDIN
    if path:
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise ValueError(f"--decode_from_file={path}: {e.strerror}") from None
    else:
        raw = sys.stdin.buffer.read()
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ValueError(f"{name}:{line}: invalid UTF-8 at byte {e.start + 1}") from None


def _decode_document(config: DecodeConfig, run: RunFlags) -> int:
    """`--input_format=document`: the input as one document, written out in its layout;
    returns the number of lines written."""
    for flag, what in _LINE_FLAGS.items():
        if getattr(config, flag):
            raise ValueError(f"--{flag} {what}; it does not go with --input_format=document")
    if (run.nbest or 1) > 1 or config.output_format != "text":
        raise ValueError("--input_format=document writes one translation: use --nbest=1 and "
                         "--output_format=text")  # fmt: skip
    name = config.decode_from_file or STDIN
    text = read_document(config.decode_from_file) if config.decode_from_file else None
    if text is not None:
        check(text, name)  # markup nested too deep: refused before the model is restored
    terms = Terminology.read(config.terminology) if config.terminology else None
    translator = Translator.from_run(run.restore(), config.batch_tokens, config.jit_compile)
    if text is None:
        text = read_document(None)
        check(text, name)
    translated = translator.translate_document(text, config.source_language, terms)
    lines = translated.split("\n")
    if lines[-1] == "":  # write_lines ends every line
        lines.pop()
    return write_lines(lines, config.decode_to_file)
