"""t2t-distill's progress over the train split: sentences done, rates, time left, memory."""

from __future__ import annotations

import datetime

from absl import logging

from t2t_lite.runtime.progress import RateMeter, resident_memory


class DistillProgress:
    """The progress of the train split, earlier runs' shards included, logged about every
    `every` seconds and at each shard's end, with this run's rates and the time left, e.g.
    `train-00003.tfrecord (shard 4 of 14): 8,000/27,000 sentences, 38.2 sentences/s, 1,020
    tokens/s, ETA 0:08:17, rss 1.10 GB (peak 1.20)`."""

    def __init__(self, shards: int, total: int, every: float = 30.0):
        self.shards, self.total, self.every = shards, total, every
        self.meter = RateMeter()  # this run's translations
        self.done = 0  # sentences of the split done, earlier runs' included
        self.name, self.index = "", 0

    def kept(self, name: str, examples: int) -> None:
        self.done += examples
        logging.info("%s: written by an earlier run, kept", name)

    def start(self, name: str, index: int) -> None:
        self.name, self.index = name, index

    def update(self, sentences: int, tokens: int) -> None:
        self.meter.add(sentences, tokens)
        self.done += sentences
        if self.meter.seconds_since_mark() >= self.every:
            self.meter.mark()
            self._log("")

    def finished(self, kept: int) -> None:
        self._log(f", done ({kept} empty translations kept their references)" if kept else ", done")

    def _log(self, suffix: str) -> None:
        sentences_per_second, tokens_per_second = self.meter.rates_since_start()
        seconds = (self.total - self.done) / max(sentences_per_second, 1e-9)
        rss, peak = resident_memory()
        logging.info(
            "%s (shard %d of %d)%s: %s/%s sentences, %.1f sentences/s, %s tokens/s, ETA %s, "
            "rss %.2f GB (peak %.2f)",
            self.name,
            self.index + 1,
            self.shards,
            suffix,
            f"{self.done:,}",
            f"{self.total:,}",
            sentences_per_second,
            f"{tokens_per_second:,.0f}",
            datetime.timedelta(seconds=round(min(max(seconds, 0.0), 1e9))),
            rss / 1e9,
            peak / 1e9,
        )
