"""Terminology constraints and target prefixes on a trained run's test set: term use, BLEU and
speed against the unguided search, in one process.

    python bench/control_bench.py --output_dir=demo_out/train --source=demo_out/test.en \
        --reference=demo_out/test.de --repeats=3

Terms (as in Dinu et al., 2019): a source/target word dictionary is made from the run's training
split (Dice coefficient of the words' co-occurrence in sentence pairs, words of 4 or more letters;
a source word's best target word at Dice >= 0.3 and 5 or more joint sentences). A test sentence's
terms are its source words whose dictionary word occurs in the reference (up to 3), written as
the reference writes them. Prefixes: the reference's first two words. Each search is traced
once untimed; then the unguided and guided searches are timed back to back `repeats` times, and
the median of each is reported with their ratio. Writes a JSON record beside the printed table.
"""

from __future__ import annotations

import collections
import json
import os
import re
import statistics
import time

from absl import app, flags
from machine import run_header  # bench/machine.py, beside this script

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "A trained run.", required=True)
flags.DEFINE_string("source", None, "Test sources, one per line.", required=True)
flags.DEFINE_string("reference", None, "Their references.", required=True)
flags.DEFINE_integer("beam_size", 4, "Beam width (alpha is the problem's).")
flags.DEFINE_integer("repeats", 3, "Timed runs of each search.")
flags.DEFINE_string("record", None, "Where the JSON goes (default bench/results/...).")

WORD = re.compile(r"[^\W\d_]{4,}")


def dictionary(pairs) -> dict[str, str]:
    """Source word (lowercase) --> its best target word (lowercase) by Dice coefficient."""
    source_count, target_count, joint = collections.Counter(), collections.Counter(), {}
    for source, target in pairs:
        s_words = set(w.lower() for w in WORD.findall(source))
        t_words = set(w.lower() for w in WORD.findall(target))
        source_count.update(s_words)
        target_count.update(t_words)
        for s in s_words:
            joint.setdefault(s, collections.Counter()).update(t_words)
    best = {}
    for s, counts in joint.items():

        def dice(item, s=s):
            return 2 * item[1] / (source_count[s] + target_count[item[0]])

        t, both = max(counts.items(), key=dice)
        if dice((t, both)) >= 0.3 and both >= 5:
            best[s] = t
    return best


def terms_of(source: str, reference: str, table: dict[str, str]) -> list[str]:
    """Up to 3 target words of the source's dictionary words found in the reference, as there."""
    in_reference = {w.lower(): w for w in WORD.findall(reference)}
    found = []
    for word in WORD.findall(source):
        target = table.get(word.lower())
        if target in in_reference and in_reference[target] not in found:
            found.append(in_reference[target])
    return found[:3]


def used(text: str, term: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text) is not None


def timed(function, repeats: int) -> tuple[list, list[float]]:
    out, seconds = None, []
    for _ in range(repeats):
        start = time.perf_counter()
        out = function()
        seconds.append(time.perf_counter() - start)
    return out, seconds


def main(argv) -> None:
    import sacrebleu

    from t2t_lite.decode.translator import Translator
    from t2t_lite.run.run import Run

    run = Run.restore(FLAGS.output_dir, search={"beam_size": FLAGS.beam_size})
    with open(os.path.join(run.data_dir, "datagen.json")) as f:
        options = run.problem.resolve_options(json.load(f)["options"])
    run.problem.prepare(run.data_dir, options)
    table = dictionary(run.problem.text_pairs("train", options))
    with open(FLAGS.source, encoding="utf-8") as f:
        sources = f.read().splitlines()
    with open(FLAGS.reference, encoding="utf-8") as f:
        references = f.read().splitlines()
    terms = [terms_of(s, r, table) for s, r in zip(sources, references, strict=True)]
    prefixes = [" ".join(r.split()[:2]) for r in references]
    translator = Translator.from_run(run)
    searches = {
        "unguided": lambda: translator.translate(sources),
        "terms": lambda: translator.translate(sources, constraints=terms),
        "prefix": lambda: translator.translate(sources, prefixes=prefixes),
    }
    # Each search traced once, on a few lines.
    translator.translate(sources[:16])
    translator.translate(sources[:16], constraints=terms[:16])
    translator.translate(sources[:16], prefixes=prefixes[:16])
    seconds = {name: [] for name in searches}
    outputs = {}
    for _ in range(FLAGS.repeats):  # alternating, so that a busier minute hits all alike
        for name, search in searches.items():
            outputs[name], spent = timed(search, 1)
            seconds[name] += spent
    bleu = {n: sacrebleu.corpus_bleu(o, [references]).score for n, o in outputs.items()}
    all_terms = sum(len(t) for t in terms)
    use = {}
    for name, out in outputs.items():
        hits = sum(used(text, t) for text, row in zip(out, terms, strict=True) for t in row)
        use[name] = hits / all_terms
    kept = sum(o.startswith(p) for o, p in zip(outputs["prefix"], prefixes, strict=True))
    median = {n: statistics.median(s) for n, s in seconds.items()}
    record = {
        **run_header(run),
        "sentences": len(sources),
        "sentences_with_terms": sum(bool(t) for t in terms),
        "terms": all_terms,
        "dictionary_words": len(table),
        "beam_size": FLAGS.beam_size,
        "repeats": FLAGS.repeats,
        "bleu": bleu,
        "term_use": use,
        "prefix_kept": kept / len(sources),
        "seconds_median": median,
        "speed_vs_unguided": {n: median["unguided"] / median[n] for n in median},
    }
    path = FLAGS.record or os.path.join(
        os.path.dirname(__file__), "results", time.strftime("%Y-%m-%d") + "_control.json"
    )
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
    print(f"{record['cpu']}; {len(sources)} sentences, {all_terms} terms; beam {FLAGS.beam_size}")
    print(f"| search | BLEU | term use | seconds (median of {FLAGS.repeats}) | speed |")
    print("|---|---:|---:|---:|---:|")
    for n in searches:
        print(
            f"| {n} | {bleu[n]:.2f} | {100 * use[n]:.1f} % | {median[n]:.1f} | "
            f"{record['speed_vs_unguided'][n]:.2f}x |"
        )
    print(f"prefix kept: {100 * record['prefix_kept']:.1f} %; record: {path}")


if __name__ == "__main__":
    app.run(main)
