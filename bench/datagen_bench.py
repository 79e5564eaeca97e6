"""t2t-datagen at WMT scale: wall time, peak memory and shards for N synthetic sentence pairs,
by the number of processes that encode and write the train shards (issue 52, item 5).

    python bench/datagen_bench.py --pairs=4500000 --processes=1,2

Writes a parallel corpus of `--pairs` synthetic pairs (and a 3,000-pair dev set, newstest2013's
size) into a temporary folder, then runs `t2t-datagen --problem=text2text` on it once per
process count, each into a fresh data_dir, as a subprocess. The corpus imitates WMT14 en-de's
length statistics: words per sentence log-normal with mean about 24 and a long tail (p99 about
75, clipped at 250), target lengths correlated with the source's, each side drawn from its own
Zipfian vocabulary of 50,000 word types (exponent 1.0, so the subword vocabulary meets rare words
as a real corpus does), with capitals, commas and a full stop. Seeded; nothing is committed.

Measured per run: wall time; CPU time (user + system of t2t-datagen and its workers, from
`resource.getrusage(RUSAGE_CHILDREN)`, which counts waited-for descendants; on a shared machine
it shows the work done where wall time shows the waiting); the time of each phase (prepare,
vocabulary, train shards) from t2t-datagen's log lines; the train shards written; and the memory
of the process tree, polled with psutil (resident sizes every `--poll_s` seconds, PSS every
tenth poll): the peak of the summed resident set sizes of t2t-datagen and all its descendants
(an upper bound: the libraries that every process maps are counted once per process), the peak
of the summed proportional set sizes (PSS: shared pages divided among their users; what the tree
costs the machine) and the largest single process. (The memory maximum of RUSAGE_CHILDREN is
that of the largest single process only.) A JSON record goes into bench/results/
(DATE_datagen_CPU.json) and a table is printed, with a linear projection to WMT14 en-fr's 36M
pairs.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import psutil
from absl import app, flags
from machine import cpu_name  # bench/machine.py, beside this script

FLAGS = flags.FLAGS
flags.DEFINE_integer("pairs", 200_000, "Synthetic training pairs.")
flags.DEFINE_list("processes", ["1", "2"], "Process counts to run datagen with (--num_processes).")
flags.DEFINE_integer("vocab_size", 37000, "BPE vocabulary size (WMT14 en-de's shared 37000).")
flags.DEFINE_integer("seed", 0, "Seed of the synthetic corpus.")
flags.DEFINE_string(
    "work_dir",
    None,
    "Where corpus and data_dirs go (default: a temporary folder, removed at the end); "
    "a corpus of the same --pairs and --seed found there is reused.",
)
flags.DEFINE_float("poll_s", 0.5, "Seconds between polls of resident memory (PSS: 10x).")
flags.DEFINE_string("record", None, "Where the JSON goes (default bench/results/...).")

DEV_PAIRS = 3000
WORD_TYPES = 50_000
ZIPF_EXPONENT = 1.0
BLOCK = 50_000  # pairs generated at a time, so the generator's memory stays small
# Words per source sentence: log-normal, mean exp(MU + SIGMA^2 / 2) = 24.
LENGTH_MU, LENGTH_SIGMA, MAX_WORDS = 3.0, 0.55, 250


def _word_list(rng: np.random.Generator) -> np.ndarray:
    """WORD_TYPES distinct lowercase words, 2-14 letters, shorter ones more frequent (object
    array, most frequent first)."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    weights = rng.dirichlet(np.ones(26) * 2)  # a language's own letter frequencies
    words: dict[str, None] = {}
    while len(words) < WORD_TYPES:
        length = int(np.clip(rng.poisson(5) + 2, 2, 14))
        words.setdefault("".join(rng.choice(letters, size=length, p=weights)), None)
    ordered = sorted(words, key=len)  # frequent words are short (Zipf's law of abbreviation)
    return np.array(ordered, dtype=object)


def _sentences(rng, words: np.ndarray, cumulative: np.ndarray, lengths: np.ndarray) -> list[str]:
    """One sentence of `n` Zipfian words for each n in `lengths`."""
    ids = np.searchsorted(cumulative, rng.random(int(lengths.sum())))
    tokens = words[np.minimum(ids, len(words) - 1)]
    commas = rng.random(len(tokens)) < 0.06
    tokens[commas] = tokens[commas] + ","
    out, start = [], 0
    for n in lengths.tolist():
        sentence = " ".join(tokens[start : start + n])
        out.append(sentence[:1].upper() + sentence[1:].rstrip(",") + " .")
        start += n
    return out


def write_corpus(folder: str, pairs: int, seed: int) -> dict[str, str]:
    """Writes train.{en,de} (`pairs` lines) and dev.{en,de} into `folder`; returns the
    text2text options naming them. Reused when already there (a `.done` file marks them)."""
    names = {
        f"{split}_{side}": os.path.join(folder, f"{split}.{lang}")
        for split in ("train", "dev")
        for side, lang in (("src", "en"), ("tgt", "de"))
    }
    done = os.path.join(folder, ".done")
    if os.path.isfile(done):
        return names
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    vocab = [_word_list(rng) for _ in range(2)]
    ranks = np.arange(1, WORD_TYPES + 1, dtype=np.float64)
    cumulative = np.cumsum(ranks**-ZIPF_EXPONENT)
    cumulative /= cumulative[-1]
    for split, count in (("train", pairs), ("dev", DEV_PAIRS)):
        with open(names[f"{split}_src"], "w") as src, open(names[f"{split}_tgt"], "w") as tgt:
            for start in range(0, count, BLOCK):
                n = min(BLOCK, count - start)
                src_len = rng.lognormal(LENGTH_MU, LENGTH_SIGMA, n)
                tgt_len = src_len * rng.lognormal(0.0, 0.2, n)  # correlated, a bit noisier
                src_len, tgt_len = (
                    np.clip(x.astype(int), 1, MAX_WORDS) for x in (src_len, tgt_len)
                )
                src.write("\n".join(_sentences(rng, vocab[0], cumulative, src_len)) + "\n")
                tgt.write("\n".join(_sentences(rng, vocab[1], cumulative, tgt_len)) + "\n")
    open(done, "w").close()
    return names


class TreeMemory:
    """Polls the memory of a process and all its descendants in a thread until `stop`: resident
    sizes every `every` seconds (cheap), proportional set sizes every `PSS_EVERY`-th poll
    (psutil reads /proc/PID/smaps_rollup, about 10 ms a TensorFlow process: polled as often as
    the resident sizes, it would take a tenth of a core from the run it measures)."""

    PSS_EVERY = 10

    def __init__(self, pid: int, every: float):
        self.root, self.every = psutil.Process(pid), every
        self.peak_rss = self.peak_pss = self.peak_single = 0
        self.most_processes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        polls = 0
        while not self._stop.wait(self.every):
            try:
                tree = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                return
            self.most_processes = max(self.most_processes, len(tree))
            rss = [self._read(p, "memory_info", "rss") for p in tree]
            self.peak_rss = max(self.peak_rss, sum(rss))
            self.peak_single = max(self.peak_single, *rss)
            if polls % self.PSS_EVERY == 0:
                pss = sum(self._read(p, "memory_full_info", "pss") for p in tree)
                self.peak_pss = max(self.peak_pss, pss)
            polls += 1

    @staticmethod
    def _read(process: psutil.Process, method: str, field: str) -> int:
        try:
            return getattr(getattr(process, method)(), field)
        except psutil.Error:  # ended meanwhile
            return 0

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


# Lines of t2t-datagen's log that end a phase: (phase, pattern). "prepare": starting Python
# and TensorFlow, checking the input files and fingerprinting them.
PHASES = (
    ("prepare", re.compile(r"training a \w+ vocabulary|vocabulary exists")),
    ("vocabulary", re.compile(r"writing split train")),
    ("train shards", re.compile(r"writing split dev")),
)


def run_datagen(corpus: dict[str, str], data_dir: str, processes: int) -> dict:
    """One t2t-datagen run as a subprocess; its wall time, memory, shards and phase times."""
    command = [
        *(sys.executable, "-m", "t2t_lite.bin.t2t_datagen", "--problem=text2text"),
        *(f"--data_dir={data_dir}", f"--num_processes={processes}"),
        f"--problem_options=vocab_size={FLAGS.vocab_size}",
        *(f"--{name}={path}" for name, path in corpus.items()),
    ]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    cpu_before = _children_cpu_seconds()
    start = time.monotonic()
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    memory = TreeMemory(process.pid, FLAGS.poll_s)
    marks, log = {}, []
    for line in process.stderr:  # progress lines, echoed
        log.append(line)
        sys.stderr.write(line)
        for phase, pattern in PHASES:
            if phase not in marks and pattern.search(line):
                marks[phase] = round(time.monotonic() - start, 1)
    process.wait()
    wall = time.monotonic() - start
    cpu = _children_cpu_seconds() - cpu_before  # waited-for descendants: workers included
    memory.stop()
    if process.returncode:
        raise RuntimeError(f"t2t-datagen failed ({process.returncode}): {''.join(log[-20:])}")
    with open(os.path.join(data_dir, "metadata.json")) as f:
        metadata = json.load(f)
    train = metadata["splits"]["train"]
    return {
        "processes": processes,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "phase_s": _phase_seconds(marks, wall),
        "peak_tree_rss_gb": round(memory.peak_rss / 1e9, 3),
        "peak_tree_pss_gb": round(memory.peak_pss / 1e9, 3),
        "peak_single_process_rss_gb": round(memory.peak_single / 1e9, 3),
        "most_processes": memory.most_processes,
        "train_shards": len(train["shards"]),
        "train_examples": train["examples"],
        "train_tokens": train["input_lengths"]["tokens"] + train["target_lengths"]["tokens"],
        "vocab_size": metadata["vocab"]["size"],
    }


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _phase_seconds(marks: dict[str, float], wall: float) -> dict[str, float]:
    """Seconds from one phase's end to the next one's; "rest": the dev split and metadata."""
    seconds, previous = {}, 0.0
    for phase, _ in PHASES:
        if phase in marks:
            seconds[phase], previous = round(marks[phase] - previous, 1), marks[phase]
    seconds["rest"] = round(wall - previous, 1)
    return seconds


def _corpus_stats(path: str) -> dict:
    """Words per line of a corpus file: mean, p50, p99 and max."""
    with open(path) as f:
        counts = np.array([line.count(" ") + 1 for line in f])
    return {
        "mean": round(float(counts.mean()), 1),
        **{f"p{p}": int(np.percentile(counts, p)) for p in (50, 99)},
        "max": int(counts.max()),
    }


def main(argv: list[str]) -> None:
    del argv
    processes = [int(p) for p in FLAGS.processes]
    if not processes or min(processes) < 1:
        raise app.UsageError(f"--processes={FLAGS.processes}: positive counts, e.g. 1,2")
    work = FLAGS.work_dir or tempfile.mkdtemp(prefix="datagen_bench_")
    try:
        start = time.monotonic()
        folder = os.path.join(work, f"corpus_{FLAGS.pairs}_{FLAGS.seed}")
        corpus = write_corpus(folder, FLAGS.pairs, FLAGS.seed)
        generated_s = time.monotonic() - start
        runs = []
        for count in processes:
            data_dir = os.path.join(work, f"data_{FLAGS.pairs}_{count}")
            shutil.rmtree(data_dir, ignore_errors=True)
            runs.append(run_datagen(corpus, data_dir, count))
            shutil.rmtree(data_dir, ignore_errors=True)
        words = {side: _corpus_stats(corpus[f"train_{side}"]) for side in ("src", "tgt")}
    finally:
        if not FLAGS.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    report(runs, words, generated_s)


def report(runs: list[dict], words: dict, generated_s: float) -> None:
    """Writes the JSON record and prints the table, with a linear projection to en-fr's 36M."""
    record = {
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_name(),
        "cpus": os.cpu_count(),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "pairs": FLAGS.pairs,
        "seed": FLAGS.seed,
        "vocab_size": FLAGS.vocab_size,
        "corpus_words_per_line": words,
        "corpus_generation_s": round(generated_s, 1),
        "runs": runs,
    }
    cpu = re.sub(r"\W+", "_", record["cpu"].lower()).strip("_")
    name = f"{record['date']}_datagen_{cpu}"
    path = FLAGS.record or os.path.join(os.path.dirname(__file__), "results", name + ".json")
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
    print(f"{record['cpu']}, {record['cpus']} CPUs; {FLAGS.pairs:,} pairs, words/line {words}")
    print(
        "| processes | wall | CPU (user+sys) | prepare / vocabulary / train shards (s) | "
        "train shards | "
        "peak RSS, tree (GB) | peak PSS, tree (GB) | largest process (GB) | 36M pairs, linear |"
    )
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in runs:
        phases = " / ".join(f"{r['phase_s'].get(p, 0):.0f}" for p, _ in PHASES)
        projected = r["wall_s"] * 36e6 / FLAGS.pairs
        print(
            f"| {r['processes']} | {r['wall_s'] / 60:.1f} min | {r['cpu_s'] / 60:.1f} min "
            f"| {phases} | {r['train_shards']} "
            f"| {r['peak_tree_rss_gb']:.2f} | {r['peak_tree_pss_gb']:.2f} "
            f"| {r['peak_single_process_rss_gb']:.2f} | {projected / 3600:.1f} h |"
        )
    print(f"record: {path}")


if __name__ == "__main__":
    app.run(main)
