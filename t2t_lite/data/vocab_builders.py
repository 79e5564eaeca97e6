"""Trains a vocabulary once and writes it atomically into the data directory.

BPE is trained by the `sentencepiece` package; WordPiece by tensorflow-text's learner
(`tensorflow_text.tools.wordpiece_vocab`, the library under `bert_vocab_from_dataset`), fed with
whitespace-separated word counts so that pieces never cross a space.
"""

from __future__ import annotations

import collections
import io
import math
import os
from collections.abc import Iterable, Sequence

import sentencepiece
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib

from t2t_lite.data.tokenizers import RESERVED_TOKENS, UNK_ID, vocab_path
from t2t_lite.runtime import atomic_io

# SentencePiece samples this many sentences to train on; enough for a 37k vocabulary.
BPE_SAMPLE_SENTENCES = 2_000_000
# WordPiece learns from this many most frequent words.
WORDPIECE_MAX_WORDS = 200_000


# auto_vocab_size: AUTO_VOCAB_BASE pieces at AUTO_VOCAB_PAIRS training pairs, growing with the
# square root of the corpus, rounded to AUTO_VOCAB_STEP, within [AUTO_VOCAB_MIN, AUTO_VOCAB_MAX].
AUTO_VOCAB_BASE, AUTO_VOCAB_PAIRS = 4000, 27_000
AUTO_VOCAB_STEP, AUTO_VOCAB_MIN, AUTO_VOCAB_MAX = 1000, 2000, 37000


def auto_vocab_size(train_pairs: int) -> int:
    """The subword vocabulary size for a corpus of `train_pairs` sentence pairs, when the user
    gives none: 4000 * sqrt(pairs / 27000), rounded to a thousand, within [2000, 37000].

    Evidence (docs/data.md): on lohelp en-de (27k pairs, 6-minute CPU trials) 4000 pieces gave
    11.5 dev BLEU against 8.7 for 2000 and 8.2 for 8000; the paper's shared vocabulary for WMT
    en-de (4.5M pairs) is 37000, the cap. A small corpus gives each piece too few examples to
    learn from a large vocabulary, and its softmax costs time a short run does not have.
    """
    size = AUTO_VOCAB_BASE * math.sqrt(max(train_pairs, 1) / AUTO_VOCAB_PAIRS)
    size = AUTO_VOCAB_STEP * round(size / AUTO_VOCAB_STEP)
    return int(min(AUTO_VOCAB_MAX, max(AUTO_VOCAB_MIN, size)))


def build_bpe(path: str, texts: Iterable[str], vocab_size: int) -> None:
    """Trains a SentencePiece BPE model with ids pad=0, EOS=1, unk=2 and no BOS."""
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="bpe",
        pad_id=0,
        eos_id=1,
        unk_id=UNK_ID,
        bos_id=-1,
        pad_piece=RESERVED_TOKENS[0],
        eos_piece=RESERVED_TOKENS[1],
        unk_piece=RESERVED_TOKENS[UNK_ID],
        # European languages: keep every character rather than mapping rare ones to <unk>.
        character_coverage=1.0,
        input_sentence_size=BPE_SAMPLE_SENTENCES,
        shuffle_input_sentence=True,
        # Small corpora (tests, a user's few thousand lines) cannot reach a large size.
        hard_vocab_limit=False,
        num_threads=os.cpu_count() or 1,
        minloglevel=2,
    )
    atomic_io.write_bytes(path, model.getvalue())


def word_counts(texts: Iterable[str]) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for text in texts:
        counts.update(text.split())
    return counts


def learn_wordpiece(counts: collections.Counter, vocab_size: int) -> list[str]:
    """WordPiece tokens (reserved first) for whitespace-word counts, at most `vocab_size`.

    Uses the learner of `tensorflow_text.tools.wordpiece_vocab` one threshold at a time
    (`learn_with_thresh`: a token is kept if it covers at least `thresh` word occurrences). Its
    own `learn` bisects that threshold linearly from the largest count, about 15 slow passes of
    pure Python; bisecting geometrically and keeping only the most frequent words (rare words
    barely move the counts) finds the same kind of vocabulary in about half the passes.
    """
    params = wordpiece_tokenizer_learner_lib.Params(
        upper_thresh=None,
        lower_thresh=1,
        num_iterations=4,
        max_input_tokens=WORDPIECE_MAX_WORDS,
        max_token_length=50,
        max_unique_chars=1000,
        vocab_size=vocab_size,
        slack_ratio=0.05,
        include_joiner_token=True,
        joiner="##",
        reserved_tokens=list(RESERVED_TOKENS),
    )
    lib = wordpiece_tokenizer_learner_lib
    words = lib.get_input_words(list(counts.items()), params.reserved_tokens, 50)
    words = lib.filter_input_words(words, lib.get_allowed_chars(words, 1000), WORDPIECE_MAX_WORDS)
    low, high = 1, max((count for _, count in words), default=1)
    best: list[str] = []
    while low <= high:
        thresh = max(low, min(high, round(math.sqrt(low * high))))
        vocab = lib.learn_with_thresh(words, thresh, params)
        if len(vocab) > vocab_size:
            low = thresh + 1
            continue
        best = vocab if len(vocab) > len(best) else best
        if vocab_size - len(vocab) <= params.slack_ratio * vocab_size:
            break
        high = thresh - 1
    if not best:
        raise ValueError(
            f"WordPiece: even the characters of the text need more than {vocab_size} tokens"
        )
    return best


def build_wordpiece(path: str, texts: Iterable[str], vocab_size: int) -> None:
    """Learns a WordPiece vocabulary ("##" marks pieces inside a word) from whitespace words."""
    tokens = learn_wordpiece(word_counts(texts), vocab_size)
    atomic_io.write_text(path, "".join(t + "\n" for t in tokens))


def build_words(path: str, tokens: Sequence[str]) -> None:
    """Writes a fixed word list after the reserved tokens."""
    bad = [t for t in tokens if not t or t != t.strip() or len(t.split()) != 1]
    if bad or len(set(tokens)) != len(tokens):
        raise ValueError(f"word vocabulary needs unique tokens without whitespace, got {bad[:5]}")
    atomic_io.write_text(path, "".join(t + "\n" for t in (*RESERVED_TOKENS, *tokens)))


def adopt_sentencepiece(model_path: str, data_dir: str) -> str:
    """Copies an existing SentencePiece model into `data_dir` as its BPE vocabulary (to tokenize
    a fine-tuning corpus with a parent run's vocabulary); returns the copy's path.

    The model must reserve ids as t2t_lite does (pad 0, EOS 1, unk 2, no BOS); otherwise a
    ValueError names the file and its ids.
    """
    if not os.path.isfile(model_path):
        raise FileNotFoundError(f"--vocab_model: file not found: {model_path}")
    try:
        processor = sentencepiece.SentencePieceProcessor(model_file=model_path)
    except (OSError, RuntimeError) as e:
        raise ValueError(f"{model_path}: not a SentencePiece model ({e})") from None
    ids = (processor.pad_id(), processor.eos_id(), processor.unk_id(), processor.bos_id())
    if ids != (0, 1, UNK_ID, -1):
        raise ValueError(
            f"{model_path}: reserved ids pad/eos/unk/bos are {ids}; t2t_lite needs (0, 1, 2, -1) "
            "(a model written by t2t-datagen has them)"
        )
    path = vocab_path(data_dir, "bpe")
    with open(model_path, "rb") as f:
        atomic_io.write_bytes(path, f.read())
    return path


def build_vocab(
    data_dir: str,
    vocab_type: str,
    texts: Iterable[str],
    vocab_size: int,
    words: Sequence[str] | None = None,
) -> str:
    """Trains the vocabulary of `vocab_type` ("bpe", "wordpiece", "words") and returns its path.

    For "words", `words` is the fixed list (after the reserved tokens); if None the most
    frequent `vocab_size - 3` whitespace words of `texts` are used.
    """
    path = vocab_path(data_dir, vocab_type)
    if vocab_type == "bpe":
        build_bpe(path, texts, vocab_size)
    elif vocab_type == "wordpiece":
        build_wordpiece(path, texts, vocab_size)
    else:
        if words is None:
            counted = word_counts(texts).most_common(vocab_size - len(RESERVED_TOKENS))
            words = [w for w, _ in counted]
        build_words(path, words)
    return path
