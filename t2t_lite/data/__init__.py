"""Data: lines of text, in-graph tokenizers (tensorflow-text), vocabulary training, trees, the
shards and the tf.data pipeline that reads them."""

from t2t_lite.data.lines import (
    LineError,
    LineStats,
    check_parallel,
    count_lines,
    iter_raw_lines,
    read_lines,
    read_parallel,
)
from t2t_lite.data.tokenizers import (
    RESERVED_TOKENS,
    UNK_ID,
    VOCAB_FILES,
    SentencePieceTokenizer,
    Tokenizer,
    WordPieceTokenizer,
    WordTokenizer,
    load_tokenizer,
    trim_ids,
    vocab_path,
)
from t2t_lite.data.vocab_builders import adopt_sentencepiece, auto_vocab_size, build_vocab

__all__ = [
    "LineError",
    "LineStats",
    "RESERVED_TOKENS",
    "SentencePieceTokenizer",
    "Tokenizer",
    "UNK_ID",
    "VOCAB_FILES",
    "WordPieceTokenizer",
    "WordTokenizer",
    "adopt_sentencepiece",
    "auto_vocab_size",
    "build_vocab",
    "check_parallel",
    "count_lines",
    "iter_raw_lines",
    "load_tokenizer",
    "read_lines",
    "read_parallel",
    "trim_ids",
    "vocab_path",
]
