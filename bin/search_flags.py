"""The search flags that t2t-decode, t2t-export, t2t-serve and t2t-visualize share, and
--quantize.

Each flag is a `SearchSettings` field, read into a `RunFlags` (`run_flags.from_flags`); left
unset, it takes the problem's `decode_defaults`. Defining them once keeps the commands' names,
bounds and help alike.
"""

from __future__ import annotations

from absl import flags

from t2t_lite.hparams.search_settings import QUANTIZE_MODES


def define_search_flags() -> None:
    """Defines --beam_size, --alpha, --patience, --extra_length, --constrained (default: the
    problem's), --sampling, --shortlist and the repetition and length controls."""
    flags.DEFINE_integer("beam_size", None, "Beam width (default: the problem's).", lower_bound=1)
    flags.DEFINE_float(
        "alpha", None, "Length-penalty exponent (default: the problem's).", lower_bound=0.0
    )
    flags.DEFINE_float(
        "patience",
        None,
        "0: beam search stops a sentence when no live hypothesis can beat its best (the exact "
        "bound, the default); P > 0: also once P * beam_size hypotheses have finished, as "
        "fairseq and CTranslate2 (P = 1): faster, at times a worse translation "
        "(docs/decoding.md).",
        lower_bound=0.0,
    )
    flags.DEFINE_integer(
        "extra_length",
        None,
        "Max output length = input length + this (default: the problem's).",
        lower_bound=0,
    )
    flags.DEFINE_boolean(
        "constrained",
        None,
        "Search only outputs the problem's constraint allows, e.g. well-formed trees over the "
        "sentence's words for parsing (default: the problem's; --noconstrained turns it off).",
    )
    flags.DEFINE_string(
        "sampling",
        None,
        "Sample instead of beam search: comma-separated name:value of temperature (default 1; "
        "0 is greedy), top_k (0: all), top_p (1: all) and seed, e.g. temperature:0.8,top_k:40.",
    )
    flags.DEFINE_string(
        "shortlist",
        None,
        "FREQUENT,PER_SOURCE, e.g. 100,50: search each batch over the most frequent target "
        "tokens and the best translations of its source tokens (a table built once from the "
        "training data) instead of the whole vocabulary; faster output layer (docs/decoding.md).",
    )
    define_control_flags()


def define_control_flags() -> None:
    """Defines --no_repeat_ngram_size, --repetition_penalty, --min_length and --disable_unk
    (`t2t_lite.search.controls`; docs/control.md)."""
    flags.DEFINE_integer(
        "no_repeat_ngram_size",
        None,
        "No N-gram of this size twice in an output: a token that would repeat one is banned "
        "(0: off, the default).",
        lower_bound=0,
    )
    flags.DEFINE_float(
        "repetition_penalty",
        None,
        "Logits of tokens already in the output divided by this where positive, multiplied "
        "where negative, as CTranslate2 (1: off, the default; 1.2 is a usual value).",
    )
    flags.DEFINE_integer(
        "min_length",
        None,
        "EOS banned until the output holds this many tokens, EOS not counted (0: off).",
        lower_bound=0,
    )
    flags.DEFINE_boolean(
        "disable_unk", None, "Never generate the unknown piece <unk> (default: allowed)."
    )


def define_quantize_flag() -> None:
    """Defines --quantize (t2t-decode, t2t-export, t2t-serve, t2t-visualize): int8 weights
    after restoring."""
    flags.DEFINE_enum(
        "quantize",
        "none",
        QUANTIZE_MODES,
        "int8: decode with int8 weights (attention, feed-forward, embeddings and logits), "
        "quantized from the float checkpoint after restoring it.",
    )


def define_jit_compile_flag() -> None:
    """Defines --jit_compile (t2t-decode, t2t-serve): XLA compiles the search (`Translator`)."""
    flags.DEFINE_boolean(
        "jit_compile",
        False,
        "Compile the search with XLA, once per batch shape (a few seconds each; shapes rounded "
        "to buckets). Pays where shapes come back (long input files, a server): greedy search "
        "1.1-1.9x faster on a CPU (docs/decoding.md).",
    )


def define_inter_threads_flag() -> None:
    """Defines --inter_threads (t2t-decode, t2t-distill): batches searched at once, each op on
    a share of the CPUs (`t2t_lite.runtime.threads`)."""
    flags.DEFINE_integer(
        "inter_threads",
        1,
        "Batches searched at once, each op on CPUs / this many threads (CTranslate2's "
        "inter_threads): more sentences/s on files of many batches (docs/decoding.md).",
        lower_bound=1,
    )


def define_guidance_flags() -> None:
    """Defines t2t-decode's --prefix_file, --constraints_file, --terminology (what a line asks
    of its translation: `t2t_lite.decode.guidance`), --alignment and --output_format."""
    flags.DEFINE_string(
        "prefix_file", None, "A target prefix per input line: each translation starts with it."
    )
    flags.DEFINE_string(
        "constraints_file",
        None,
        "Per input line, tab-separated target phrases that its translation must contain.",
    )
    flags.DEFINE_string(
        "terminology",
        None,
        "A UTF-8 TSV of source term<TAB>target term: the target term must appear in the "
        "translation of every line where the source term occurs (whole words, any case).",
    )
    flags.DEFINE_boolean(
        "alignment", False, "Append ' ||| ' and each translation's word alignment (Pharaoh i-j)."
    )
    flags.DEFINE_enum(
        "output_format",
        "text",
        ["text", "jsonl"],
        "jsonl: a JSON object per input line with each hypothesis's text, scores, confidence, "
        "token probabilities and alignment (with --score_file: those of the given target).",
    )
