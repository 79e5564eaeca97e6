"""Data: lines of text, in-graph tokenizers (tensorflow-text), vocabulary training, trees, the
shards and the tf.data pipeline that reads them.

The tokenizers and vocabulary builders load TensorFlow; their names are imported when first
read (PEP 562), so that a problem registry built on this package costs no TensorFlow until a
tokenizer is used (t2t-datagen answers `--help` without it).
"""

import importlib

from t2t_lite.data.lines import (
    LineError,
    LineStats,
    check_parallel,
    count_lines,
    iter_raw_lines,
    read_lines,
    read_parallel,
)
from t2t_lite.vocabulary import RESERVED_TOKENS, UNK_ID

# name --> the module of this package that defines it, imported on first use.
_LAZY = {
    "VOCAB_FILES": "tokenizers",
    "SentencePieceTokenizer": "tokenizers",
    "Tokenizer": "tokenizers",
    "WordPieceTokenizer": "tokenizers",
    "WordTokenizer": "tokenizers",
    "load_tokenizer": "tokenizers",
    "trim_ids": "tokenizers",
    "vocab_path": "tokenizers",
    "adopt_sentencepiece": "vocab_builders",
    "auto_vocab_size": "vocab_builders",
    "build_vocab": "vocab_builders",
}


_SUBMODULES = ("pipeline", "shard_check", "shards", "tokenizers", "vocab_builders")


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY:
        module = importlib.import_module(f"{__name__}.{_LAZY[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "LineError",
    "LineStats",
    "RESERVED_TOKENS",
    "UNK_ID",
    "check_parallel",
    "count_lines",
    "iter_raw_lines",
    "read_lines",
    "read_parallel",
    *_LAZY,
]
