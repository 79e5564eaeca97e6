"""`Translator`: a restored model, its tokenizer and search settings, translating and scoring
lines in batches.

Lines are tokenized with the run's own vocabulary (`problem.tokenizer(data_dir)`), sorted by
length, batched by source tokens, searched inside one `tf.function` (beam search or sampling,
`t2t_lite.decode.transformer_step.search_function`), and returned in input order. An empty or
whitespace-only line gives no hypothesis; a line longer than the model's positions is truncated
with a warning.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from t2t_lite.data.shortlist import Shortlist
from t2t_lite.decode.batches import bucket_rows, bucket_width, pad_batch, token_batches
from t2t_lite.decode.confidence import Calibration
from t2t_lite.decode.details import Details, describe, forced_pass
from t2t_lite.decode.exported import ExportedTranslator, is_export, shape_translations
from t2t_lite.decode.guidance import (
    EncodedGuides,
    Guide,
    Terminology,
    encode_guides,
    report_unplaced,
)
from t2t_lite.decode.replicas import split_rows
from t2t_lite.decode.source_ids import encode_lines, report_unknown_pieces
from t2t_lite.decode.streaming import TokenStepper, translate_stream
from t2t_lite.decode.transformer_step import output_lengths, score_ids, search_function
from t2t_lite.hparams import SearchSettings
from t2t_lite.model.quantize import multiplies_in_8_bits
from t2t_lite.run.run import Run
from t2t_lite.runtime.progress import DecodeProgress
from t2t_lite.runtime.threads import map_batches, warn_if_unsplit
from t2t_lite.search.contract import SearchResult


class Hypothesis(NamedTuple):
    text: str
    score: float  # log-prob / lp(length), what the beam ranks by
    log_prob: float
    details: Details | None = None  # tokens, their probabilities, alignment, confidence


def keep_output(source: str, output: str) -> str:
    """The postprocessing of a problem without any: the decoded output as it is."""
    return output


class Translator:
    """A restored model, its tokenizer and search settings; translates and scores lines.

    `translate(lines)` returns a translation per line, `hypotheses(lines)` the search's
    `nbest` Hypothesis per line (none for an empty line);
    `score(sources, targets)` returns log p(target | source) per pair (None if either is empty).
    With a `strategy` (whose scope made the model), each batch is split across its replicas.
    With `jit_compile`, XLA compiles the search, once per batch shape (`t2t_lite.decode.batches`
    holds the shapes to a few buckets); it finds the same hypotheses. With `inter_threads` > 1,
    as many batches are searched at once (`t2t_lite.runtime.threads`: `split_cpus` first).
    """

    def __init__(
        self,
        model,
        tokenizer,
        settings: SearchSettings,
        batch_tokens: int = 4096,
        postprocess: Callable[[str, str], str] | None = None,
        constraint: Any = None,
        strategy: tf.distribute.Strategy | None = None,
        jit_compile: bool = False,
        calibration: Calibration | None = None,
        source_language: str = "en",
        shortlist: Shortlist | None = None,
        inter_threads: int = 1,
    ):
        if tokenizer.vocab_size != model.vocab_size:
            raise ValueError(
                f"the tokenizer has {tokenizer.vocab_size} ids but the model {model.vocab_size}; "
                "--data_dir must hold the vocabulary the model was trained with"
            )
        settings.check(model.max_positions)
        self.model, self.tokenizer, self.settings = model, tokenizer, settings
        # (source line, decoded text) -> output text; a problem's `postprocess` (trees repaired
        # over the source words for parsing).
        self.postprocess = postprocess or keep_output
        self.batch_tokens = batch_tokens
        self.max_positions = settings.input_limit(model.max_positions)
        if jit_compile and strategy is not None and strategy.num_replicas_in_sync > 1:
            raise ValueError(
                f"--jit_compile decodes on one device, but --strategy has "
                f"{strategy.num_replicas_in_sync} replicas; use --strategy=default"
            )
        if jit_compile and multiplies_in_8_bits(model):
            raise ValueError(
                "--jit_compile with --quantize=int8 on a float32 model: its 8-bit products are "
                "a oneDNN op that XLA cannot compile; drop one of the two flags (the int8 "
                "weights of a bfloat16 model compile)"
            )
        if jit_compile and shortlist is not None:
            raise ValueError(
                "--jit_compile with --shortlist: a shortlist's size changes from batch to "
                "batch, which XLA cannot compile; drop one of the two flags"
            )
        self.jit_compile = jit_compile
        self.inter_threads = inter_threads  # batches searched at once (`runtime.threads`)
        warn_if_unsplit(inter_threads)
        spec = tf.TensorSpec([None, None], tf.int32)
        self._strategy, self._constraint, self._shortlist = strategy, constraint, shortlist
        # The traced searches by (guided, settings but alpha), shared with the translators
        # that `with_alpha` and `translate(nbest=N)` make from this one.
        self._traced: dict[tuple[bool, SearchSettings], Callable[..., SearchResult]] = {}
        self._search = self._traced_search()
        self._forced = tf.function(
            lambda x, y: forced_pass(model, x, y), input_signature=[spec, spec], autograph=False
        )
        self.calibration = calibration or Calibration()
        self.source_language = source_language  # sentence splitting of documents
        self._joins_table = None
        self._stepper: TokenStepper | None = None  # `translate_stream`'s step, made on use
        score = split_rows(strategy, lambda x, y: score_ids(model, x, y))
        self._score = tf.function(score, input_signature=[spec] * 2, autograph=False)

    @classmethod
    def from_run(
        cls,
        run: Run | str,
        batch_tokens: int = 4096,
        jit_compile: bool = False,
        checkpoint: str | None = None,
        quantize: str | None = None,
        inter_threads: int = 1,
        **search: Any,
    ) -> Translator | ExportedTranslator:
        """A translator that searches as the run says, with the problem's constraint and
        postprocessing, over the replicas of `run.strategy`.

        `run` is a restored `Run`, or a path: a run folder of t2t-train (restored with
        `checkpoint` and `quantize` as t2t-decode's flags, and `search` settings such as
        beam_size=4, alpha=0.6, nbest=4 over the problem's), or a SavedModel of t2t-export (or
        its folder of versions), which gives an `ExportedTranslator` with the same `translate`.
        """
        if isinstance(run, str):
            if is_export(run):
                if checkpoint or quantize or search or inter_threads != 1:
                    raise ValueError(f"{run} is an export: its checkpoint and search are fixed")
                return ExportedTranslator(run)
            run = Run.restore(run, checkpoint, search=search, quantize=quantize)
        elif checkpoint or quantize or search:
            raise ValueError("a restored Run has its checkpoint and search settings already")
        return cls(
            run.model,
            run.tokenizer,
            run.search,
            batch_tokens,
            run.problem.postprocess,
            run.constraint,
            run.strategy,
            jit_compile,
            Calibration.load(run.output_dir),
            getattr(run.problem, "source_language", "") or "en",
            run.shortlist,
            inter_threads,
        )

    def translate_document(
        self, text: str, language: str | None = None, terminology: Terminology | None = None
    ) -> str:
        """A whole document (plain text, Markdown or HTML-like text) translated in the same
        layout, its markup and placeholders kept (`t2t_lite.document.document`); `language`:
        the source's, for sentence splitting (default: the problem's source language);
        `terminology`: a term table whose target terms each sentence's translation must
        contain where the sentence has the source term."""
        from t2t_lite.decode.document_engine import translator_engine
        from t2t_lite.document.document import translate_document

        engine = translator_engine(self, terminology)
        return translate_document(text, engine, language or self.source_language)

    def _traced_search(self, guided: bool = False) -> Callable[..., SearchResult]:
        """The search of these settings over the replicas, alpha its last input: a function
        of (source ids, alpha), or with `guided` of (source ids, prefix, terms, alpha), the
        latter without XLA (its extra inputs change shape from batch to batch). Made on first
        use, traced on its first call, and kept for every alpha."""
        key = (guided, self.settings.without_alpha())
        if key not in self._traced:
            specs = [tf.TensorSpec([None, None], tf.int32)]
            specs += [specs[0], tf.TensorSpec([None, None, None], tf.int32)] if guided else []

            def search(*inputs: tf.Tensor) -> SearchResult:
                *inputs, alpha = inputs
                found = search_function(
                    self.model,
                    self.settings,
                    self._constraint,
                    fixed_shapes=self.jit_compile and not guided,
                    guided=guided,
                    continuations=self._word_continuations if guided else None,
                    shortlist=self._shortlist,
                    alpha=alpha,
                )
                return split_rows(self._strategy, found)(*inputs)

            self._traced[key] = tf.function(
                search,
                input_signature=[*specs, tf.TensorSpec([], tf.float32)],
                jit_compile=self.jit_compile and not guided,
                autograph=False,  # core ops and tf.while_loop only: nothing to convert
            )
        return self._traced[key]

    def _sibling(self, settings: SearchSettings) -> Translator:
        """This translator under other search settings: model, tokenizer and the traced
        searches shared (a search is traced anew only where the settings differ in more than
        alpha)."""
        other = copy.copy(self)
        other.settings = settings
        other._search = other._traced_search()
        return other

    def with_alpha(self, alpha: float) -> Translator:
        """This translator with the length penalty `alpha`; alpha is an input of the traced
        search, so the search is not traced again (a search tuning or a server trying
        several alphas traces once per beam size)."""
        settings = self.settings.override(alpha=alpha)
        settings.check()
        return self._sibling(settings)

    def _with_nbest(self, nbest: int) -> Translator:
        """This translator, or one searching `nbest` hypotheses in a beam of at least `nbest`
        (its search traced on first use and kept for the next call)."""
        if not isinstance(nbest, (int, np.integer)) or nbest < 1:
            raise ValueError(f"nbest={nbest!r} must be a whole number >= 1")
        if nbest <= self.settings.nbest:
            return self
        if self.settings.sampling:
            raise ValueError(f"sampling draws one hypothesis per line; got nbest={nbest}")
        beam = max(nbest, self.settings.beam_size)
        return self._sibling(self.settings.override(nbest=nbest, beam_size=beam))

    def translate(
        self,
        lines: Sequence[str],
        nbest: int = 1,
        scores: bool = False,
        prefixes: Sequence[str] | None = None,
        constraints: Sequence[Sequence[str]] | None = None,
    ) -> list:
        """Translates text: a string per line (an empty line gives ""); with nbest > 1 a list
        of `nbest` strings per line, best first (beyond the search's nbest, this call searches
        `nbest` hypotheses in a beam of max(beam_size, nbest)); with `scores` (text, score)
        pairs instead, the score being what the search ranks by. `prefixes`: a target prefix
        per line ("" for none) that each translation starts with; `constraints`: per line,
        target phrases that each translation must contain."""
        translator = self._with_nbest(nbest)
        guides = None
        if prefixes is not None or constraints is not None:
            prefixes = prefixes if prefixes is not None else [""] * len(lines)
            constraints = constraints if constraints is not None else [()] * len(lines)
            if not len(prefixes) == len(constraints) == len(lines):
                raise ValueError("prefixes and constraints need one entry per line")
            guides = [Guide(p, tuple(c)) for p, c in zip(prefixes, constraints, strict=True)]
        found = translator.hypotheses(lines, log_progress=False, guides=guides)
        texts = [[h.text for h in hyps] for hyps in found]
        values = [[h.score for h in hyps] for hyps in found]
        return shape_translations(lines, texts, values, nbest, scores)

    def translate_stream(self, line: str) -> Iterator[str]:
        """`line`'s translation in pieces as they are found, joining to `translate([line])[0]`:
        a piece per token under greedy settings (beam_size 1 at any alpha, or sampling at
        temperature 0), else the whole translation when the search ends (a beam's best
        hypothesis can change until then). See `t2t_lite.decode.streaming`."""
        return translate_stream(self, line)

    def token_stepper(self) -> TokenStepper:
        """The compiled one-token step that streaming loops over, made on first use."""
        if self._stepper is None:
            self._stepper = TokenStepper(self.model)
        return self._stepper

    def search_ids(self, sources: Sequence[Sequence[int]]) -> SearchResult:
        """Source id lists (each ending in EOS) --> the search's result, ids [batch, nbest,
        length], in one batch; under `jit_compile` padded to its bucket's shape first."""
        if not self.jit_compile:
            return self._search(pad_batch(sources), self.settings.alpha)
        width = self._bucket_width(max(len(s) for s in sources))
        count = bucket_rows(len(sources), width, self.batch_tokens)
        found = self._search(pad_batch(sources, width, count), self.settings.alpha)
        return SearchResult(*(value[: len(sources)] for value in found))

    def _bucket_width(self, length: int) -> int:
        """The padded width of a batch under `jit_compile`, within the model's positions."""
        return min(bucket_width(length), self.max_positions)

    def encode(self, lines: Sequence[str], names: Sequence[str]) -> list[list[int] | None]:
        """`source_ids.encode_lines` with this run's tokenizer and the model's positions."""
        return encode_lines(self.tokenizer, lines, names, self.max_positions)

    def _word_continuations(self) -> np.ndarray:
        """`Tokenizer.word_continuations`, computed eagerly (also while a search is traced)."""
        return self._joins()[1]

    def _joins(self) -> tuple[np.ndarray, np.ndarray]:
        """`Tokenizer.joins_previous`, computed once, eagerly."""
        if self._joins_table is None:
            with tf.init_scope():
                self._joins_table = self.tokenizer.joins_previous()
        return self._joins_table

    def guided_search_ids(self, sources, guides, names) -> tuple[SearchResult, EncodedGuides]:
        """`search_ids` with a `Guide` per source (prefix and phrases; `guidance`)."""
        if self.settings.sampling and any(g.constraints for g in guides):
            raise ValueError("terminology constraints need beam search; drop --sampling")
        inputs = pad_batch(sources)
        limits = output_lengths(self.model, inputs, self.settings.extra_length).numpy().tolist()
        encoded = encode_guides(self.tokenizer, guides, limits, names)
        search = self._traced_search(guided=True)
        found = search(inputs, encoded.prefix, encoded.terms, self.settings.alpha)
        return found, encoded

    def hypotheses(
        self,
        lines: Sequence[str],
        names: Sequence[str] | None = None,
        log_progress: bool = True,
        guides: Sequence[Guide] | None = None,
        details: bool = False,
    ) -> list[list[Hypothesis]]:
        """Per line, the search's `nbest` Hypothesis (none for an empty line); `names` (e.g.
        "in.txt:7") name the lines in warnings, by default "line N". `guides`: a `Guide` per
        line (target prefix, terminology constraints), or None. `details`: each Hypothesis
        gets its token probabilities, word alignment and confidence (`t2t_lite.decode.details`)."""
        names = names or [f"line {i + 1}" for i in range(len(lines))]
        sources = self.encode(lines, names)
        results: list[list[Hypothesis]] = [[] for _ in lines]
        todo = [i for i, s in enumerate(sources) if s is not None]
        progress = DecodeProgress(len(todo), "decoded", enabled=log_progress)
        width = self._bucket_width if self.jit_compile else None
        batches = token_batches([len(sources[i]) for i in todo], self.batch_tokens, width)
        batches = [[todo[j] for j in batch] for batch in batches]
        if guides:
            self._traced_search(guided=True)  # made once, before the batches' threads start

        def search(rows):
            row_guides = [guides[i] for i in rows] if guides else None
            return self._search_rows(
                [sources[i] for i in rows], row_guides, [names[i] for i in rows]
            )

        for rows, found in map_batches(search, batches, self.inter_threads):
            ids = found.ids.numpy()  # [rows, nbest, length]
            flat = ids.reshape(-1, ids.shape[-1])  # --> [rows * nbest, length]
            texts = self.tokenizer.decode(flat).numpy().reshape(ids.shape[:2])  # [rows, nbest]
            scores, log_probs = found.scores.numpy(), found.log_probs.numpy()  # [rows, nbest]
            about = self._describe([sources[i] for i in rows], ids) if details else None
            for r, i in enumerate(rows):
                results[i] = [
                    Hypothesis(
                        self.postprocess(lines[i].strip(), texts[r, n].decode("utf-8")),
                        float(scores[r, n]),
                        float(log_probs[r, n]),
                        about[r * ids.shape[1] + n] if about else None,
                    )
                    for n in range(ids.shape[1])
                ]
            progress.update(len(rows), int((ids[:, 0] > 0).sum()))
        progress.finish()
        report_unknown_pieces(sources, names)
        return results

    def _search_rows(self, sources, guides, names) -> SearchResult:
        """One batch's search, guided (warning for the lines whose phrases were not placed)
        where any line has a guide."""
        if not guides or not any(guides):
            return self.search_ids(sources)
        found, encoded = self.guided_search_ids(sources, guides, names)
        report_unplaced(found.ids[:, 0].numpy(), encoded.phrases, names)
        return found

    def _describe(self, sources, ids: np.ndarray) -> list[Details]:
        """`details.describe` of every hypothesis in ids [rows, nbest, length], row-major."""
        nbest = ids.shape[1]
        repeated = [s for s in sources for _ in range(nbest)]
        outputs = ids.reshape(-1, ids.shape[-1])
        width = max(1, int((outputs > 0).sum(axis=1).max()))
        token_lp, attention = self._forced(pad_batch(repeated), outputs[:, :width])
        return describe(
            self.tokenizer,
            self._joins()[0],
            self.calibration,
            repeated,
            outputs,
            token_lp.numpy(),
            attention.numpy(),
        )

    def score(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        source_names: Sequence[str],
        target_names: Sequence[str],
        details: bool = False,
    ) -> list:
        """log p(target | source) per pair (None if either is empty); with `details`, a
        `Hypothesis` of the target per pair instead, with its tokens, token probabilities,
        alignment and confidence (a forced translation's quality estimate)."""
        source_ids = self.encode(sources, source_names)
        target_ids = self.encode(targets, target_names)
        todo = [i for i in range(len(sources)) if source_ids[i] and target_ids[i]]
        results: list = [None] * len(sources)
        progress = DecodeProgress(len(todo), "scored")
        lengths = [max(len(source_ids[i]), len(target_ids[i])) for i in todo]
        batches = [[todo[j] for j in b] for b in token_batches(lengths, self.batch_tokens)]

        def scored(rows):
            inputs = pad_batch([source_ids[i] for i in rows])
            expected = pad_batch([target_ids[i] for i in rows])
            return expected, self._score(inputs, expected).numpy()

        for rows, (expected, values) in map_batches(scored, batches, self.inter_threads):
            about = (
                self._describe([source_ids[i] for i in rows], expected[:, None])
                if details
                else None
            )
            for r, (i, value) in enumerate(zip(rows, values, strict=True)):
                value = float(value)
                results[i] = (
                    Hypothesis(targets[i].strip(), value, value, about[r]) if details else value
                )
            progress.update(len(rows), int((expected > 0).sum()))
        progress.finish()
        report_unknown_pieces(source_ids, source_names)
        report_unknown_pieces(target_ids, target_names, "--score_file lines")
        return results
