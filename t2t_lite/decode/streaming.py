"""Greedy search one token at a time, each token's text handed out as soon as it is found.

`token_steps(translator, line)` encodes the line once and then runs a Python loop over a
compiled one-token step (`TokenStepper`: the Transformer's incremental decoder and its cache,
as `transformer_step.sentence_step_fn` builds them for the searches), yielding a `TokenStep`
per output token, EOS included: its id, its log-probability and the text it adds. The ids are
`sampling.greedy_search`'s, the output's length limit is the same (`output_lengths`: input
length + extra_length, at most the model's positions), and a long line is truncated as
`Translator.translate` truncates it. The texts are found by decoding the ids so far with the
run's tokenizer and handing out what was added (`TextIncrements`): a piece that starts a word
brings its space with it ("▁box" after "the" gives " box"), a piece inside a word none, and
text that may still change (trailing spaces, the first bytes of a character split over byte
pieces) waits for the next token. Joined, the texts are the translation `translate` gives.

Only greedy settings stream token by token (`unstreamable`): a beam's best hypothesis can
change until the search ends, a sample is drawn for its whole batch, and a problem's
postprocessing (parsing's tree repair), decoding constraint or a vocabulary shortlist work on
the whole output. `Translator.translate_stream` gives those the whole translation at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

import tensorflow as tf

from t2t_lite.decode.source_ids import report_unknown_pieces
from t2t_lite.decode.transformer_step import output_lengths
from t2t_lite.search.sampling import greedy_choice
from t2t_lite.vocabulary import EOS_ID, PAD_ID

if TYPE_CHECKING:
    from t2t_lite.decode.translator import Translator

# Text that may still change as tokens follow: its end is held back until then.
_UNSETTLED = " \t\n\ufffd"  # trailing spaces; U+FFFD, an incomplete UTF-8 character


class TokenStep(NamedTuple):
    """One output token: its id, the text it adds to the translation ("" while the text is
    held back, see the module's docstring), and its log-probability under the model."""

    token_id: int
    text: str
    log_prob: float


class TokenStepper:
    """A model's greedy step, compiled: `start` encodes a sentence [1, source] once, `step`
    feeds one id and gives the next (`greedy_choice`: the argmax of the log-probabilities,
    padding excluded, as `greedy_search` chooses) with the cache grown by a position. Each is
    traced once per model (shapes relaxed), not once per sentence or per step."""

    def __init__(self, model):
        self.model = model
        self.start = tf.function(self._start, reduce_retracing=True, autograph=False)
        self.step = tf.function(self._step, reduce_retracing=True, autograph=False)

    def _start(self, inputs: tf.Tensor, extra_length: tf.Tensor):
        """inputs [1, source] --> (the output's length limit, the empty cache, the sentence's
        encoder state, the pre-softmax matrix)."""
        memory, memory_mask = self.model.encode(inputs)
        state = self.model.project_memory(memory, memory_mask)
        limit = output_lengths(self.model, inputs, extra_length)[0]
        cache = self.model.init_cache(tf.shape(inputs)[0], limit)  # grows a position a step
        return limit, cache, state, self.model.output_kernel()

    def _step(self, ids: tf.Tensor, index: tf.Tensor, cache, state, kernel):
        """ids [1] at position `index` --> (next id [1], its log-prob [1], the cache)."""
        logits, cache = self.model.decode_step(ids, index, cache, state, None, kernel)
        token, log_prob = greedy_choice(logits, PAD_ID)  # --> [1], [1]
        return token, log_prob, cache


class TextIncrements:
    """The text each new id adds to a tokenizer's decoding of the ids before it."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.given = ""  # the text handed out so far: always a prefix of the final text

    def add(self, token_id: int) -> str:
        """The settled text that `token_id` adds (possibly "")."""
        self.ids.append(token_id)
        text = self._decode().decode("utf-8", "replace").rstrip(_UNSETTLED)
        if not text.startswith(self.given):  # changed behind what was given: wait
            return ""
        added, self.given = text[len(self.given) :], text
        return added

    def finish(self, token_id: int) -> str:
        """The last id's text and all that was held back: the given texts joined are then
        exactly the tokenizer's decoding of all the ids, as `Translator.translate` decodes."""
        self.ids.append(token_id)
        text = self._decode().decode("utf-8")
        if not text.startswith(self.given):
            raise RuntimeError(
                f"the streamed text {self.given!r} is not a prefix of the translation {text!r}"
            )
        added, self.given = text[len(self.given) :], text
        return added

    def _decode(self) -> bytes:
        return self.tokenizer.decode(tf.constant([self.ids], tf.int32))[0].numpy()


def unstreamable(translator: Translator) -> str | None:
    """Why `translator`'s search cannot stream token by token, or None when it can."""
    settings = translator.settings
    if settings.sampling and settings.temperature != 0:
        return "sampling draws each token for the whole batch at once"
    if not settings.sampling and settings.beam_size != 1:
        return "a beam's best hypothesis can change until the search ends"
    if _postprocesses(translator.postprocess):
        return "the problem's postprocessing rewrites the whole output"
    if translator._constraint is not None:
        return "the problem's decoding constraint follows the whole output"
    if translator._shortlist is not None:
        return "a vocabulary shortlist is chosen for a whole batch"
    return None


def _postprocesses(postprocess) -> bool:
    """Whether a translator's postprocessing may change the decoded text: not for none
    (`keep_output`) nor for a problem's own that does nothing (`Problem.has_postprocess`)."""
    from t2t_lite.decode.translator import keep_output  # (translator imports this module)

    owner = getattr(postprocess, "__self__", None)
    if hasattr(owner, "has_postprocess"):
        return owner.has_postprocess()
    return postprocess is not keep_output


def token_steps(translator: Translator, line: str, name: str = "line 1") -> Iterator[TokenStep]:
    """`line`'s greedy translation, a `TokenStep` per output token as it is found (EOS last,
    unless the output reaches its length limit first); nothing for an empty line. `name`
    names the line in the warning for a truncated input. A ValueError says why settings
    that are not greedy cannot stream (`unstreamable`)."""
    reason = unstreamable(translator)
    if reason is not None:
        raise ValueError(
            f"token_steps: {reason}; it needs greedy search (beam_size 1 at any alpha, or "
            "sampling at temperature 0) without postprocessing, a decoding constraint or a "
            "shortlist (Translator.translate_stream gives other searches' translations whole)"
        )
    (source,) = translator.encode([line], [name])
    if source is None:
        return
    report_unknown_pieces([source], [name])
    stepper = translator.token_stepper()
    extra = tf.constant(translator.settings.extra_length, tf.int32)
    limit, cache, state, kernel = stepper.start(tf.constant([source], tf.int32), extra)
    limit = int(limit)
    text = TextIncrements(translator.tokenizer)
    token = tf.zeros([1], tf.int32)  # the start id, 0, as greedy_search feeds it first
    for index in range(limit):
        token, log_prob, cache = stepper.step(token, tf.constant(index), cache, state, kernel)
        found = int(token[0])
        last = found == EOS_ID or index + 1 == limit
        added = text.finish(found) if last else text.add(found)
        yield TokenStep(found, added, float(log_prob[0]))
        if last:
            return


def translate_stream(translator: Translator, line: str) -> Iterator[str]:
    """`Translator.translate_stream`: the translation of `line` in pieces that join to
    `translator.translate([line])[0]`, token by token under greedy settings, else whole."""
    if unstreamable(translator) is not None:
        text = translator.translate([line])[0]
        if text:
            yield text
        return
    for step in token_steps(translator, line):
        if step.text:
            yield step.text
