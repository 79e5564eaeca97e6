"""Whole documents with markup through `translate_document` at growing sizes: whether the
document path (reading the markup, splitting sentences, putting the tags back by alignment)
stays linear in the document's size. The engine reverses each sentence's words and says so in
its alignment, so the model's cost is left out.

    python bench/markup_bench.py [--megabytes=0.5,1,2,5] [--reps=3]

Printed: for each size, the median seconds of `reps` calls and the seconds per megabyte, and
the largest document's seconds per megabyte against the smallest's (1.0 when linear).
`tests/document/test_document_markup.py` checks a 5 MB document's output, not its time.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from machine import cpu_name  # bench/machine.py, beside this script

from t2t_lite.document.document import Engine, translate_document

WORDS = ["configuration", "spreadsheet", "documents.", "alignment,", "translation", "cells"]
TAGS = ["b", "i", "span", "a", "emph"]


def reversing_engine() -> Engine:
    """Each sentence's words reversed, with the alignment that says so."""

    def translate(sentences):
        found = []
        for sentence in sentences:
            words = sentence.split()
            n = len(words)
            found.append((" ".join(reversed(words)), [(i, n - 1 - i) for i in range(n)]))
        return found

    return Engine(translate)


def paragraph(rng: random.Random) -> str:
    """30 words, a few of them wrapped in nested tags."""
    words = rng.choices(WORDS, k=30)
    for _ in range(4):
        start = rng.randrange(len(words))
        end = min(len(words), start + rng.randint(1, 5))
        tag = rng.choice(TAGS)
        words[start] = f"<{tag}>" + words[start]
        words[end - 1] = words[end - 1] + f"</{tag}>"
    return " ".join(words)


def document(megabytes: float, seed: int = 0) -> str:
    rng = random.Random(seed)
    paragraphs, size = [], 0
    while size < megabytes * 1e6:
        paragraphs.append(paragraph(rng))
        size += len(paragraphs[-1]) + 2
    return "\n\n".join(paragraphs) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", default="0.5,1,2,5")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    engine, per_megabyte = reversing_engine(), []
    print(f"{cpu_name()}; medians of {args.reps} calls\n")
    print("| document | seconds | seconds per MB |")
    print("|---|---:|---:|")
    for megabytes in [float(m) for m in args.megabytes.split(",")]:
        text, seconds = document(megabytes), []
        for _ in range(args.reps):
            started = time.perf_counter()
            translate_document(text, engine)
            seconds.append(time.perf_counter() - started)
        median = statistics.median(seconds)
        per_megabyte.append(median / (len(text) / 1e6))
        print(f"| {len(text) / 1e6:.2f} MB | {median:.2f} | {per_megabyte[-1]:.2f} |")
    print(f"\nlargest against smallest, per MB: {per_megabyte[-1] / per_megabyte[0]:.2f}x")


if __name__ == "__main__":
    main()
