"""Text: the definition of a line, in-graph tokenizers (tensorflow-text) and vocabulary training."""

from t2t_lite.text.lines import (
    LineError,
    LineStats,
    check_parallel,
    count_lines,
    iter_raw_lines,
    read_lines,
    read_parallel,
)
from t2t_lite.text.tokenizers import (
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
from t2t_lite.text.vocab_builders import build_vocab

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
