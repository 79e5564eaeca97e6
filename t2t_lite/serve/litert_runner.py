"""Translating with a LiteRT model of t2t-export --format=litert, without TensorFlow.

    from t2t_lite.serve.litert_runner import LiteRTTranslator
    translator = LiteRTTranslator("/srv/models/ende_litert/1")
    translator.translate(["Click the OK button."])  # --> ["Klicken Sie auf OK."]

or `python -m t2t_lite.serve.litert_runner FOLDER < input.txt > output.txt`.

This module imports NumPy, sentencepiece and `ai_edge_litert` only (and nothing of t2t_lite
that loads TensorFlow), so that a device with the `litert` extra translates. Before loading,
it checks the model and vocabulary files against the SHA-256 hashes t2t_export.json records,
and refuses a damaged copy, naming the file. Lines are
tokenized as t2t-decode tokenizes them (stripped, SentencePiece ids, EOS appended, longer inputs
truncated to the model's input length with a warning), sorted by length and padded into
batches of `batch_size` lines (or of the model's fixed batch size, padded with empty rows) as
wide as their longest line, and the ids it returns are cut at EOS and decoded.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from t2t_lite.extras import import_extra
from t2t_lite.runtime import atomic_io

EOS_ID = 1  # t2t_lite.vocabulary's reserved ids, repeated: that module is not needed here
EXPORT_INFO = "t2t_export.json"
SIGNATURE = "serving_default"
BATCH_SIZE = 16  # lines per call of a model whose batch is free

log = logging.getLogger(__name__)


def model_folder(path: str) -> str:
    """`path` itself when it holds a LiteRT export, else its largest numeric version folder."""
    if os.path.isfile(os.path.join(path, EXPORT_INFO)):
        return path
    versions = [int(n) for n in os.listdir(path) if n.isdigit()] if os.path.isdir(path) else []
    if not versions:
        raise FileNotFoundError(f"no {EXPORT_INFO} in {path} nor in a version folder below it")
    return os.path.join(path, str(max(versions)))


def check_files(folder: str, info: dict[str, Any]) -> None:
    """Refuses a model or vocabulary file of the export in `folder` whose SHA-256 is not the
    one t2t_export.json records (`model_sha256`, `vocabulary_sha256`; an export written before
    they were recorded is not checked), naming the file, before anything loads it."""
    for name_key, hash_key in (("model_file", "model_sha256"), ("vocabulary", "vocabulary_sha256")):
        if hash_key not in info:
            continue
        path = os.path.join(folder, info[name_key])
        found = atomic_io.file_sha256(path)
        if found != info[hash_key]:
            raise ValueError(
                f"{path} is damaged: its SHA-256 {found[:16]} is not the "
                f"{str(info[hash_key])[:16]} that {EXPORT_INFO} records; copy the export again, "
                "or export the run again (t2t-export --format=litert)"
            )


class LiteRTTranslator:
    """A `.tflite` greedy search (t2t-export --format=litert) and its SentencePiece model.

    `translate(lines)` returns a translation per line ("" for an empty line);
    `search_ids(sources)` the output ids of source id lists (each ending in EOS).
    """

    def __init__(self, path: str, num_threads: int | None = None, batch_size: int = BATCH_SIZE):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        folder = model_folder(path)
        with open(os.path.join(folder, EXPORT_INFO), encoding="utf-8") as f:
            self.info: dict[str, Any] = json.load(f)
        if self.info.get("format") != "litert":
            raise ValueError(f"{folder} holds a {self.info.get('format')!r} export, not litert")
        check_files(folder, self.info)
        interpreter = import_extra(
            "ai_edge_litert.interpreter", "ai-edge-litert", "litert", "LiteRTTranslator"
        )
        sentencepiece = import_extra("sentencepiece", "sentencepiece", "litert", "LiteRTTranslator")
        if "tensorflow" in sys.modules:
            log.warning(
                "TensorFlow is loaded in this process: ai-edge-litert beside it has returned "
                "wrong ids for a batch now and then; translate in a process without TensorFlow "
                "(docs/deploy.md)"
            )
        self.interpreter = interpreter.Interpreter(
            model_path=os.path.join(folder, self.info["model_file"]), num_threads=num_threads
        )
        self._run = self.interpreter.get_signature_runner(SIGNATURE)
        vocabulary = os.path.join(folder, self.info["vocabulary"])
        self.tokenizer = sentencepiece.SentencePieceProcessor(model_file=vocabulary)
        # A model of a fixed batch takes that many rows a call; else `batch_size` lines.
        self.fixed_batch = self.info["batch_size"]
        self.batch_size = self.fixed_batch or batch_size
        self.input_length = int(self.info["input_length"])

    def encode(self, lines: Sequence[str]) -> list[list[int] | None]:
        """Texts --> ids ending in EOS, truncated to the model's input length (with a warning
        naming the line); None for empty or whitespace-only lines."""
        encoded: list[list[int] | None] = []
        for number, line in enumerate(lines, 1):
            text = line.strip()
            if not text:
                encoded.append(None)
                continue
            ids = self.tokenizer.encode(text)
            if len(ids) + 1 > self.input_length:
                log.warning(
                    "line %d: %d tokens, truncated to the model's %d positions",
                    number,
                    len(ids) + 1,
                    self.input_length,
                )
                ids = ids[: self.input_length - 1]
            encoded.append([*ids, EOS_ID])
        return encoded

    def search_ids(self, sources: Sequence[Sequence[int]]) -> list[list[int]]:
        """Source id lists (each ending in EOS, at most input_length long) --> each one's output
        ids, EOS included when the search ended with it."""
        outputs: list[list[int]] = []
        for start in range(0, len(sources), self.batch_size):
            chunk = sources[start : start + self.batch_size]
            width = max(len(ids) for ids in chunk)  # the model computes this many positions
            rows = self.fixed_batch or len(chunk)
            inputs = np.zeros([rows, min(max(width, 1), self.input_length)], np.int32)
            for row, ids in enumerate(chunk):
                if not 1 <= len(ids) <= self.input_length:
                    raise ValueError(
                        f"a source of {len(ids)} ids; the model takes 1 to {self.input_length}"
                    )
                inputs[row, : len(ids)] = ids
            ids = self._run(inputs=inputs)["ids"]  # --> [rows, output_length]
            outputs += [_until_eos(row) for row in ids[: len(chunk)].tolist()]
        return outputs

    def translate(self, lines: Sequence[str]) -> list[str]:
        """A translation per line, in order; "" for an empty line."""
        encoded = self.encode(lines)
        # by length, so that a batch pads to little more than its sentences
        filled = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: len(encoded[i]))
        found = self.search_ids([encoded[i] for i in filled])
        texts = [""] * len(lines)
        for i, ids in zip(filled, found, strict=True):
            texts[i] = self.tokenizer.decode([t for t in ids if t != EOS_ID])
        return texts


def _until_eos(ids: list[int]) -> list[int]:
    """Output ids up to their first EOS (kept) or padding."""
    for i, token in enumerate(ids):
        if token == EOS_ID:
            return ids[: i + 1]
        if token == 0:
            return ids[:i]
    return ids


def main(argv: Sequence[str] | None = None) -> None:
    """Translates standard input line by line to standard output."""
    parser = argparse.ArgumentParser(
        prog="python -m t2t_lite.serve.litert_runner", description=__doc__.split("\n")[0]
    )
    parser.add_argument("folder", help="a t2t-export --format=litert folder (or its versions)")
    parser.add_argument("--num_threads", type=int, default=None)
    parser.add_argument(
        "--batch_size", type=int, default=BATCH_SIZE, help="lines per call (a free batch)"
    )
    parser.add_argument(
        "--batch_lines", type=int, default=256, help="lines read from standard input at a time"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        translator = LiteRTTranslator(args.folder, args.num_threads, args.batch_size)
    except (OSError, ValueError, KeyError, ImportError) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")  # one line, as the t2t-* commands
    lines = sys.stdin.read().splitlines()
    for start in range(0, len(lines), args.batch_lines):
        for text in translator.translate(lines[start : start + args.batch_lines]):
            print(text, flush=False)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
