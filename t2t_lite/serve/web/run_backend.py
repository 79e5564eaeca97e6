"""`t2t-serve --output_dir=RUN`: a training run restored as `t2t-decode` restores it.

Translations come from `t2t_lite.decode.translator.Translator`, so the page shows what t2t-decode
writes for the same checkpoint and settings (the problem's decoding constraint and
postprocessing included), and attention from `t2t_lite.decode.visualize.sentence_attention`, the
data t2t-visualize draws. A `Translator` compiles one search per settings; a small cache keeps
the most recently used ones, so a page that switches between a few beam sizes does not compile
again each time.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import tensorflow as tf

from t2t_lite.decode.confidence import Calibration
from t2t_lite.decode.document_engine import translator_engine
from t2t_lite.decode.translator import Translator
from t2t_lite.decode.visualize import sentence_attention
from t2t_lite.document.document import Engine
from t2t_lite.hparams import SearchSettings
from t2t_lite.model.ensemble import Ensemble
from t2t_lite.run.run import Run
from t2t_lite.serve.facts import run_facts
from t2t_lite.serve.web.backend import (
    PARSING_METRIC,
    Capabilities,
    attention_json,
    details_json,
    translation,
)
from t2t_lite.serve.web.token_stream import sentence_events


class TranslatorCache:
    """Translators of one run by search settings, the `size` most recently used kept; one
    translator serves every alpha (`Translator.with_alpha`: its search is traced once)."""

    def __init__(
        self, run: Run, batch_tokens: int = 4096, size: int = 8, jit_compile: bool = False
    ):
        if size < 1:
            raise ValueError(f"the translator cache needs a size of at least 1, got {size}")
        self.run, self.batch_tokens, self.size = run, batch_tokens, size
        self.jit_compile = jit_compile
        self.calibration = Calibration.load(run.output_dir)  # the run's confidence.json
        self._translators: collections.OrderedDict[SearchSettings, Translator] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()

    def get(self, settings: SearchSettings) -> Translator:
        """The run's translator for `settings` (made on first use; the problem's constraint
        and postprocessing as `Translator.from_run`)."""
        key = settings.without_alpha()
        with self._lock:
            translator = self._translators.pop(key, None)
            if translator is None:
                run = self.run
                translator = Translator(
                    run.model,
                    run.tokenizer,
                    settings,
                    self.batch_tokens,
                    run.problem.postprocess,
                    run.constraint,
                    jit_compile=self.jit_compile,
                    calibration=self.calibration,
                    shortlist=run.shortlist if settings.shortlisted else None,
                )
            self._translators[key] = translator  # now the most recent
            while len(self._translators) > self.size:
                self._translators.popitem(last=False)
        if translator.settings.alpha == settings.alpha:
            return translator
        return translator.with_alpha(settings.alpha)

    def __len__(self) -> int:
        return len(self._translators)


class RunBackend:
    """A restored run (`Run.restore`) behind `t2t-serve`; see `Backend`."""

    def __init__(
        self, run: Run, batch_tokens: int = 4096, cache_size: int = 8, jit_compile: bool = False
    ):
        self.run = run
        self.translators = TranslatorCache(run, batch_tokens, cache_size, jit_compile)
        # The defaults' translator now, not at the first request: its refusals (--jit_compile
        # with --shortlist) come at start-up, and a shortlist's table is read or built.
        defaults = run.search.override(nbest=1)
        self.translators.get(defaults)
        # LoRA adapters over this run, by name (t2t_lite.serve.web.adapters)
        self.adapters: dict[str, RunBackend] = {}
        self._facts = {**run.describe(), **run_facts(run), "source": "run"}
        self.source_language = getattr(run.problem, "source_language", "") or "en"
        for key in ("output_dir", "checkpoint", "data_dir"):
            self._facts[key] = os.path.abspath(self._facts[key])
        self.capabilities = Capabilities(
            defaults=defaults,
            search_fixed=False,
            max_nbest=None,
            attention=not isinstance(run.model, Ensemble),  # an ensemble has no attention maps
            parsing=run.problem.metric == PARSING_METRIC,
            guided_nbest=0 if isinstance(run.model, Ensemble) else None,
            streams=True,
        )

    def facts(self) -> dict[str, Any]:
        if self.adapters:
            adapters = {name: b.run.output_dir for name, b in self.adapters.items()}
            return {**self._facts, "adapters": adapters}
        return dict(self._facts)

    def translate(
        self,
        sentences: Sequence[str],
        settings: SearchSettings,
        guides: Sequence[Any] | None = None,
        details: bool = False,
    ) -> list[dict]:
        translator = self.translators.get(settings)
        names = [f"sentences[{i}]" for i in range(len(sentences))]
        found = translator.hypotheses(
            sentences, names, log_progress=False, guides=guides, details=details
        )
        stripped = [s.strip() for s in sentences]
        lengths = translator.tokenizer.encode(tf.constant(stripped)).row_lengths().numpy()
        return [
            translation(
                source,
                bool(source) and length + 1 > translator.max_positions,
                [(h.text, h.score, details_json(*h.details) if h.details else {}) for h in hyps],
            )
            for source, length, hyps in zip(stripped, lengths, found, strict=True)
        ]

    def translate_stream(self, sentence: str, settings: SearchSettings) -> Iterator[dict]:
        """/api/translate_stream's events for `sentence` (`token_stream.sentence_events`),
        its translator chosen in the worker thread that asks for the first."""
        yield from sentence_events(self.translators.get(settings), sentence, settings)

    def document_engine(self, settings: SearchSettings, terminology=None) -> Engine:
        """What a document needs of this run's translator for `settings` (`/api/document`),
        with a request's `Terminology` or None."""
        return translator_engine(self.translators.get(settings), terminology)

    def attention(self, sentence: str, settings: SearchSettings) -> dict:
        maps = sentence_attention(self.translators.get(settings), sentence)
        return attention_json(maps["source"], maps["target"], maps["translation"], maps)
