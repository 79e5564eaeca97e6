"""Linearized trees to bracketed strings in TensorFlow ops: the parsing postprocess in a graph.

`graph_postprocess(sources, outputs)` computes with core string, ragged and math ops (no
`tf.py_function`, so a SavedModel holding it runs in TF Serving) what
`TreebankProblem.postprocess(source, output)` computes in Python,

    tree_to_string(fix_punctuation_tags(delinearize(output, source.split())))

for the outputs that `is_exact` accepts, which are all that constrained decoding
(`tree_constraint.TreeConstraint`) returns:

  * well formed: one phrase `(X ... )Y` around everything, every bracket closing an open one,
    no phrase without a tag, and exactly one tag per source word. Closing labels are not
    compared: `delinearize` ignores them (the opening label wins), and so does this module;
  * empty (a search slot no hypothesis filled): the flat tree `(S (XX w1) (, ,) ...)` with each
    word's guessed tag (`guess_tag`), `(S)` for an empty source.

Any other output (unconstrained decoding) is NOT repaired as `delinearize` repairs it: it gets
the flat tree of an empty output, so the string differs from the one t2t-decode writes. Export
parsing models with the constraint only.

A well-formed output renders token by token, as `tree_to_string` writes the tree: `(X` stays
(a bare `(` is `(S`), a closing bracket is `)`, the i-th tag `T` is `(T' w_i)` with `T'` the tag
`fix_punctuation_tags` makes of it, the parts are joined by spaces and every " )" becomes ")".
Words are not escaped: a word beginning with `)` loses the space before it, there as here.
Words and tokens are split on Python's whitespace (`str.split()`), and "has a letter or digit"
is Python's `str.isalnum`, both as RE2 classes built from the running Python's Unicode tables.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from t2t_lite.extras import lazy_import
from t2t_lite.problems import parsing_trees
from t2t_lite.problems.parsing_trees import DEFAULT_ROOT, DEFAULT_TAG, guess_tag

tf = lazy_import("tensorflow")


@functools.cache
def _char_class(test: Callable[[str], bool]) -> str:
    """An RE2 class of every code point `test` accepts, e.g. `[\\x{9}-\\x{d}\\x{20}...]`."""
    ranges, start = [], None
    for code in range(0x110001):
        inside = code < 0x110000 and test(chr(code))
        if inside and start is None:
            start = code
        elif not inside and start is not None:
            ranges.append(rf"\x{{{start:x}}}-\x{{{code - 1:x}}}")
            start = None
    return "[" + "".join(ranges) + "]"


@functools.cache
def _tag_tables() -> tuple[tuple[str, ...], ...]:
    """(punctuation words, their `guess_tag`, the tag `fix_punctuation_tags` forces on them or
    "", the tags EVALB deletes), read from `fix_punctuation_tags`'s own tables."""
    # `fix_punctuation_tags` forces the tag `MORE_PUNCTUATION.get(w) or guess_tag(w)` when
    # that is one of `DELETED_TAGS`.
    more = parsing_trees.MORE_PUNCTUATION
    deleted = sorted(parsing_trees.DELETED_TAGS)
    words = sorted(set(parsing_trees.PUNCTUATION_TAGS) | set(more))
    forced = [more.get(w) or guess_tag(w) for w in words]
    forced = [tag if tag in deleted else "" for tag in forced]
    return tuple(words), tuple(guess_tag(w) for w in words), tuple(forced), tuple(deleted)


def _lookup(
    keys: tf.Tensor, table: tuple[str, ...], values: tuple[str, ...], default: str
) -> tf.Tensor:
    """values[table.index(key)] for every key, `default` for keys not in `table`."""
    hits = tf.equal(keys[:, None], tf.constant(table)[None, :])  # --> [keys, table]
    found = tf.gather(tf.constant(values), tf.argmax(tf.cast(hits, tf.int32), axis=1))
    return tf.where(tf.reduce_any(hits, axis=1), found, default)  # --> [keys]


def _fixed_tags(words: tf.Tensor, tags: tf.Tensor) -> tf.Tensor:
    """`fix_punctuation_tags` on leaves (word, tag), both [leaves]: a punctuation word takes
    its forced Penn tag; a word with a letter or digit drops a deleted (punctuation) tag."""
    table, _, forced, deleted = _tag_tables()
    forced = _lookup(words, table, forced, "")
    deleted_tag = tf.reduce_any(tf.equal(tags[:, None], tf.constant(deleted)[None, :]), axis=1)
    alnum = tf.strings.regex_full_match(words, "(?s).*" + _char_class(str.isalnum) + ".*")
    return tf.where(forced != "", forced, tf.where(deleted_tag & alnum, DEFAULT_TAG, tags))


def _leaves(words: tf.Tensor, tags: tf.Tensor) -> tf.Tensor:
    """`(TAG word)` for every leaf, the tag fixed; words and tags [leaves]."""
    return tf.strings.join(["(", _fixed_tags(words, tags), " ", words, ")"])


def _split(lines: tf.Tensor) -> tf.RaggedTensor:
    """`str.split()` of every line: [lines] --> [lines, (words)]."""
    spaced = tf.strings.regex_replace(lines, _char_class(str.isspace) + "+", " ")
    return tf.strings.split(spaced)


def _bracketed(parts: tf.RaggedTensor) -> tf.Tensor:
    """`tree_to_string`'s last step: [rows, (parts)] joined by spaces, " )" --> ")"."""
    joined = tf.strings.reduce_join(parts, axis=-1, separator=" ")  # --> [rows]
    return tf.strings.regex_replace(joined, r" \)", ")")


def _flat_trees(words: tf.RaggedTensor) -> tf.Tensor:
    """What `postprocess` makes of an empty output: [batch, (words)] --> [batch]."""
    table, guessed, _, _ = _tag_tables()
    leaves = _leaves(words.flat_values, _lookup(words.flat_values, table, guessed, DEFAULT_TAG))
    return _bracketed(
        tf.concat(
            [
                tf.fill([words.nrows(), 1], "(" + DEFAULT_ROOT),
                words.with_flat_values(leaves),
                tf.fill([words.nrows(), 1], ")"),
            ],
            axis=1,
        )
    )


def _in_row(values: tf.Tensor, tokens: tf.RaggedTensor) -> tf.Tensor:
    """Inclusive cumulative sums of int64 [tokens] `values` within each row of `tokens`."""
    total = tf.cumsum(values)  # --> [tokens]
    before = tf.concat([tf.zeros([1], values.dtype), total], axis=0)  # --> [tokens + 1]
    return total - tf.gather(before, tf.gather(tokens.row_starts(), tokens.value_rowids()))


def _parts(
    words: tf.RaggedTensor, tokens: tf.RaggedTensor, token_batch: tf.Tensor, is_tag: tf.Tensor
) -> tf.Tensor:
    """`tree_to_string`'s part of every token [tokens]: `(X`, `)`, or `(TAG word)` with the
    tag fixed and the tag's word ("" once the row has run out of words: not well formed)."""
    values = tokens.flat_values  # --> [tokens]
    tag_count = tf.cast(is_tag, tf.int64)
    ordinal = _in_row(tag_count, tokens) - tag_count  # tags before it in its row
    has_word = is_tag & (ordinal < tf.gather(words.row_lengths(), token_batch))
    padding = tf.size(words.flat_values, out_type=tf.int64)  # the index of "" below
    index = tf.where(has_word, tf.gather(words.row_starts(), token_batch) + ordinal, padding)
    word = tf.gather(tf.concat([words.flat_values, [""]], axis=0), index)  # --> [tokens]
    first = tf.strings.substr(values, 0, 1)
    opened = tf.where(tf.equal(values, "("), "(" + DEFAULT_ROOT, values)
    closed_or_open = tf.where(tf.equal(first, ")"), ")", opened)
    return tf.where(is_tag, _leaves(word, values), closed_or_open)


def _well_formed(
    tokens: tf.RaggedTensor, is_open: tf.Tensor, is_close: tf.Tensor, words: tf.Tensor
) -> tf.Tensor:
    """bool [rows]: the row of `tokens` starts with "(", its depth is >= 1 before the last
    token and 0 after it, no "(" comes right before a ")" (a phrase without a tag), and it has
    `words` [rows] tags. (Kinds [tokens].)"""
    depth = _in_row(tf.cast(is_open, tf.int64) - tf.cast(is_close, tf.int64), tokens)
    row = tokens.value_rowids()  # --> [tokens]
    position = tf.range(tf.size(row, out_type=tf.int64)) - tf.gather(tokens.row_starts(), row)
    last = tf.equal(position, tf.gather(tokens.row_lengths(), row) - 1)
    next_close = tf.concat([is_close[1:], [False]], axis=0) & ~last
    bad = tf.where(last, depth != 0, depth <= 0) | (is_open & next_close)
    bad |= tf.equal(position, 0) & ~is_open
    is_tag = tf.cast(~is_open & ~is_close, tf.int64)
    tags = tf.reduce_sum(tokens.with_flat_values(is_tag), axis=1)  # --> [rows]
    return (
        ~tf.reduce_any(tokens.with_flat_values(bad), axis=1)
        & (tokens.row_lengths() > 0)
        & tf.equal(tags, words)
    )


def _analyse(
    sources: tf.Tensor, outputs: tf.Tensor
) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.Tensor, tf.Tensor]:
    """(words [batch, (words)], parts [batch * n, (tokens)] of every output rendered as if
    well formed, well_formed [batch * n], the batch index [batch * n] of each output)."""
    sources.shape.assert_has_rank(1)
    outputs.shape.assert_has_rank(2)
    shape = tf.shape(outputs)
    words = _split(sources)  # --> [batch, (words)]
    tokens = _split(tf.reshape(outputs, [-1]))  # [batch, n] --> [batch * n, (tokens)]
    row_batch = tf.repeat(tf.range(shape[0]), shape[1])  # --> [batch * n]
    token_batch = tf.gather(row_batch, tokens.value_rowids())  # --> [tokens]
    first = tf.strings.substr(tokens.flat_values, 0, 1)
    is_open, is_close = tf.equal(first, "("), tf.equal(first, ")")  # --> [tokens]
    parts = _parts(words, tokens, token_batch, ~is_open & ~is_close)
    word_counts = tf.gather(words.row_lengths(), row_batch)  # --> [batch * n]
    well_formed = _well_formed(tokens, is_open, is_close, word_counts)
    return words, tokens.with_flat_values(parts), well_formed, row_batch


def graph_postprocess(sources: tf.Tensor, outputs: tf.Tensor) -> tf.Tensor:
    """`TreebankProblem.postprocess` in TensorFlow ops, for well-formed and empty outputs.

    Args:
      sources: string [batch], the stripped source lines (words separated by whitespace).
      outputs: string [batch, n], n detokenized linearized trees per source.

    Returns:
      string [batch, n]: element [b, i] is `postprocess(sources[b], outputs[b, i])` wherever
      `is_exact` holds (every constrained output; see the module docstring). Other outputs are
      not repaired as in Python: they get the flat tree of an empty output.
    """
    words, parts, well_formed, row_batch = _analyse(sources, outputs)
    flat = tf.gather(_flat_trees(words), row_batch)  # --> [batch * n]
    trees = tf.where(well_formed, _bracketed(parts), flat)  # --> [batch * n]
    return tf.reshape(trees, tf.shape(outputs))  # --> [batch, n]


def is_exact(sources: tf.Tensor, outputs: tf.Tensor) -> tf.Tensor:
    """bool [batch, n]: where `graph_postprocess` equals the Python `postprocess` by contract,
    the well-formed outputs and the empty ones (shapes as in `graph_postprocess`)."""
    _, parts, well_formed, _ = _analyse(sources, outputs)
    exact = well_formed | tf.equal(parts.row_lengths(), 0)  # --> [batch * n]
    return tf.reshape(exact, tf.shape(outputs))  # --> [batch, n]
