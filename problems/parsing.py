"""Constituency parsing problems: WSJ (section 6.3), WSJ + a silver corpus, any treebank files.

Source: the sentence's words joined by spaces; target: the linearized tree of "Grammar as a
Foreign Language" (`t2t_lite.problems.parsing_trees.linearize`), e.g.

    John has a dog .  ->  (S (NP NNP )NP (VP VBZ (NP DT NN )NP )VP . )S

The vocabulary is a "words" vocabulary shared by both sides: every target token of the training
trees (tags, `(X`, `)X`) first, so that no tag or bracket is ever unknown, then the signatures of
unknown words (`t2t_lite.data.word_signatures`: `<unk:C>`, `<unk:c_ing>`, ...), then the most
frequent source words up to the vocabulary size; a rarer word is read as its signature. Each
target token is one id and each source word one id, so the i-th tag of the output belongs to the
i-th word.

Decoding is repaired by `postprocess` (`delinearize` with the source words): every output is a
well-formed tree over exactly the sentence's words, which `t2t-evalb` scores against the gold
trees that datagen writes beside the shards (`dev.gold.trees`, `test.gold.trees`, with their
sources `dev.source.txt`, `test.source.txt`).
"""

from __future__ import annotations

import collections
import json
import os
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

import numpy as np
from absl import logging

from t2t_lite import data
from t2t_lite.data.word_signatures import word_signatures_py
from t2t_lite.extras import lazy_import
from t2t_lite.hparams import SearchSettings
from t2t_lite.problems import tree_strings
from t2t_lite.problems.base import Problem
from t2t_lite.problems.parsing_trees import (
    delinearize,
    file_pairs,
    fix_punctuation_tags,
    glob_files,
    gum_files,
    normalized_trees,
    tree_to_string,
    write_trees,
    wsj_files,
)
from t2t_lite.problems.registry import register_problem
from t2t_lite.problems.tree_constraint import TreeConstraint
from t2t_lite.runtime import atomic_io
from t2t_lite.vocabulary import RESERVED_TOKENS

tf = lazy_import("tensorflow")

# The paper's inference settings for parsing (section 6.3), searching well-formed trees only.
PARSING_DECODE_DEFAULTS = SearchSettings(
    beam_size=21, alpha=0.3, extra_length=300, constrained=True
)
EVAL_SPLITS = ("dev", "test")
# `tree_statistics` of the training trees, beside the vocabulary.
TAGS_FILE = "tags.json"
# Words seen at least this often take only their seen tags in constrained decoding (1 and 5
# were alike on GUM: 65.3 and 65.6 F1; none at all: 52.5).
TAG_MIN_COUNT = 5
# With no vocab_size, training words seen at least this often get an id of their own; rarer ones
# share the signatures of unknown words (`parsing_vocab`, docs/parsing.md, "Vocabulary").
MIN_WORD_COUNT = 3
# The share of training trees whose unary chains constrained decoding allows (`tree_statistics`).
OPENS_COVERAGE = 0.99


def source_file(split: str) -> str:
    """Name of a split's source sentences (one per line) in the data_dir."""
    return f"{split}.source.txt"


def gold_file(split: str) -> str:
    """Name of a split's normalized gold trees (one per line) in the data_dir."""
    return f"{split}.gold.trees"


class TreebankProblem(Problem):
    """A parsing problem over bracketed tree files; subclasses say which files (`tree_files`).

    Options common to all: `vocab_size` (0: the class's size; a class size of 0 sizes the
    vocabulary from the training trees, `parsing_vocab`).
    """

    vocab_type: ClassVar[str] = "words"
    vocab_size: ClassVar[int] = 0
    metric: ClassVar[str] = "parse_f1"
    decode_defaults: ClassVar[SearchSettings] = PARSING_DECODE_DEFAULTS
    # On GUM's dev documents the length penalty hardly mattered at beam 21 (alpha 0.0 / 0.3 /
    # 0.6 / 1.0: F1 within 0.1) and beam 48 beat 21 by 0.7 while 8 lost 1.7 (docs/parsing.md,
    # "Beam size and length penalty"): two alphas around the paper's 0.3, and the wider beam.
    tune_alphas: ClassVar[tuple[float, ...]] = (0.0, 0.6)
    tune_beams: ClassVar[tuple[int, ...]] = (48,)
    # One rung: the parsing demo's set; no narrower or wider parser is measured against it yet.
    budget_ladder: ClassVar[tuple[str, ...]] = ("transformer_parsing_small",)
    # Linearized trees are about three times as long as their sentences.
    max_input_length: ClassVar[int] = 256
    max_target_length: ClassVar[int] = 768
    option_help: ClassVar[dict[str, str]] = {
        "vocab_size": "Vocabulary size (words, tags, brackets, reserved ids); 0: the problem's "
        f"(parsing_trees: every word seen at least {MIN_WORD_COUNT} times in training).",
    }

    def tree_files(self, split: str, options: dict[str, Any]) -> list[str]:
        """The bracketed files of a split, in order."""
        raise NotImplementedError

    def train_files(self, options: dict[str, Any]) -> list[str]:
        """The files whose trees train the model (the vocabulary is counted on them too)."""
        return self.tree_files("train", options)

    def prepare(self, data_dir: str, options: dict[str, Any]) -> None:
        # Resolve every split's files first, so a bad flag fails before anything is written.
        for split in self.splits(options):
            self.raw_counts[f"{split}_files"] = len(self._split_files(split, options))

    def _split_files(self, split: str, options: dict[str, Any]) -> list[str]:
        return self.train_files(options) if split == "train" else self.tree_files(split, options)

    def text_pairs(self, split: str, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        return file_pairs(self._split_files(split, options))

    def vocab_settings(self, options: dict[str, Any]) -> tuple[str, int]:
        return "words", options.get("vocab_size") or self.vocab_size

    def vocab_texts(self, options: dict[str, Any]) -> Iterator[str]:
        return iter(())  # `vocab_words` reads the trees itself

    def vocab_words(self, options: dict[str, Any]) -> list[str]:
        _, size = self.vocab_settings(options)
        if not size:  # the size follows; `Problem._vocabulary` logs it
            logging.info("%s: no vocab_size: words seen %d+ times", self.name, MIN_WORD_COUNT)
        return parsing_vocab(self.text_pairs("train", options), size)

    def output_vocab_size(self, tokenizer: Any, options: dict[str, Any]) -> int:
        """The reserved ids and the training trees' tags and brackets, which the vocabulary
        lists first: a parser's softmax and search need only these, not the source words."""
        targets = {
            token for _, target in self.text_pairs("train", options) for token in target.split()
        }
        tokens = data.tokenizers.read_vocab_list(tokenizer.path)
        count = len(RESERVED_TOKENS)
        while count < len(tokens) and tokens[count] in targets:
            count += 1
        return count

    def decode_constraint(self, data_dir: str, tokenizer: Any) -> TreeConstraint:
        """Decoding emits only well-formed linearized trees with one tag per source word, each
        word's tag one seen with it in training (`t2t_lite.problems.tree_constraint`;
        `tags.json`, which datagen writes; without it any tag)."""
        tokens = data.tokenizers.read_vocab_list(tokenizer.path)
        path = os.path.join(data_dir, TAGS_FILE)
        if not os.path.isfile(path):
            logging.warning("%s not found: decoding without the tag dictionary", path)
            return TreeConstraint(tokens, len(RESERVED_TOKENS))
        with open(path) as f:
            stats = json.load(f)
        return TreeConstraint(
            tokens,
            len(RESERVED_TOKENS),
            max_depth=stats["max_depth"],
            max_opens=stats["max_opens"],
            tag_table=tag_table(stats["tags"], tokens),
        )

    def postprocess(self, source: str, output: str) -> str:
        """The decoded target as a one-line tree over exactly the words of `source`
        (`delinearize`, then `fix_punctuation_tags`)."""
        return tree_to_string(fix_punctuation_tags(delinearize(output, source.split())))

    def graph_postprocess(self, sources: tf.Tensor, outputs: tf.Tensor) -> tf.Tensor:
        """`postprocess` in TensorFlow ops for well-formed outputs with one tag per word, which
        constrained decoding guarantees (`t2t_lite.problems.tree_strings`)."""
        return tree_strings.graph_postprocess(sources, outputs)

    def export_refusal(self, settings: SearchSettings) -> str | None:
        if not settings.constrained:
            return (
                "unconstrained outputs need the Python tree repair of postprocess; export with "
                "the constraint on (drop --noconstrained)"
            )
        return None

    def generate_data(self, data_dir: str, **options: Any) -> dict:
        """Datagen as every problem, plus `{dev,test}.source.txt` and `{dev,test}.gold.trees`:
        the inputs for `t2t-decode` and the references for `t2t-evalb`, in the same order."""
        metadata = super().generate_data(data_dir, **options)
        resolved = self.resolve_options(options)
        tags = os.path.join(data_dir, TAGS_FILE)
        if not os.path.isfile(tags):
            stats = tree_statistics(self.text_pairs("train", resolved))
            atomic_io.write_text(tags, json.dumps(stats, ensure_ascii=False, sort_keys=True))
        for split in EVAL_SPLITS:
            if split in self.splits(resolved):
                self.write_eval_files(data_dir, split, resolved)
        return metadata

    def write_eval_files(self, data_dir: str, split: str, options: dict[str, Any]) -> None:
        """Writes a split's sources and gold trees (skipped when both exist)."""
        sources = os.path.join(data_dir, source_file(split))
        gold = os.path.join(data_dir, gold_file(split))
        if os.path.isfile(sources) and os.path.isfile(gold):
            return
        trees = list(normalized_trees(self.tree_files(split, options)))
        atomic_io.write_text(sources, "".join(" ".join(t.leaves()) + "\n" for t in trees))
        write_trees(trees, gold)


def tree_statistics(
    pairs: Iterable[tuple[str, str]], coverage: float = OPENS_COVERAGE
) -> dict[str, Any]:
    """What constrained decoding takes from (source, linearized target) training pairs:
    `tags`, {word: {tag: count}} (the i-th tag of a target belongs to the i-th source word);
    `max_depth`, the deepest phrase nesting; `max_opens`, the fewest phrases opened in a row
    that a `coverage` share of the trees never exceeds (the longest unary chains are rare, and
    a bound at the very longest let searches wander into such chains: 0.5 F1 on GUM)."""
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    longest: collections.Counter[int] = collections.Counter()  # most opens in a row, per tree
    max_depth = 0
    for source, target in pairs:
        tokens = target.split()
        tags = [t for t in tokens if t[0] not in "()"]
        for word, tag in zip(source.split(), tags, strict=True):
            counts[word][tag] += 1
        depth = opens = most = 0
        for token in tokens:
            depth += (token[0] == "(") - (token[0] == ")")
            opens = opens + 1 if token[0] == "(" else 0
            max_depth, most = max(max_depth, depth), max(most, opens)
        longest[most] += 1
    covered, max_opens = 0, 0
    for max_opens in sorted(longest):
        covered += longest[max_opens]
        if covered >= coverage * sum(longest.values()):
            break
    return {
        "tags": {word: dict(tags) for word, tags in counts.items()},
        "max_depth": max_depth,
        "max_opens": max_opens,
    }


def tag_table(
    counts: dict[str, dict[str, int]], tokens: list[str], min_count: int = TAG_MIN_COUNT
) -> np.ndarray:
    """Bool [len(tokens), 1 + the largest tag id] for `TreeConstraint`: row w marks the tags
    word w may take.

    A word seen at least `min_count` times takes only the tags it was seen with; other words
    (rarer ones, `<unk>`, the reserved ids) take every tag of `counts`.
    """
    index = {token: i for i, token in enumerate(tokens)}
    tag_ids = sorted({index[t] for tags in counts.values() for t in tags if t in index})
    table = np.zeros([len(tokens), max(tag_ids, default=-1) + 1], bool)
    table[:, tag_ids] = True
    for word, tags in counts.items():
        if word in index and sum(tags.values()) >= min_count:
            row = table[index[word]]
            row[:] = False
            row[[index[t] for t in tags if t in index]] = True
    return table


def parsing_vocab(
    pairs: Iterable[tuple[str, str]], vocab_size: int = 0, min_count: int = MIN_WORD_COUNT
) -> list[str]:
    """The word list of a parsing vocabulary of `vocab_size` ids (reserved tokens included), or
    with `vocab_size` 0 one sized from the corpus: every source word seen at least `min_count`
    times gets an id, and the signatures of all rarer words do.

    All target tokens (tags and brackets) come first, most frequent first; then the signatures
    (`t2t_lite.data.word_signatures`) of the training words that do not fit, by how often their
    words occur, so that rare words train the signatures that unknown words get at decoding;
    then source words by frequency (ties alphabetically, so the list is deterministic).

    Raises:
      ValueError: when `vocab_size` cannot hold the reserved and target tokens.
    """
    targets: collections.Counter[str] = collections.Counter()
    sources: collections.Counter[str] = collections.Counter()
    for source, target in pairs:
        sources.update(source.split())
        targets.update(target.split())
    words = _by_count(targets)
    seen = set(words)
    candidates = [w for w in _by_count(sources) if w not in seen]
    shape_of = word_signatures_py(candidates)

    def signatures_of_the_rest(keep: int) -> list[str]:
        shapes: collections.Counter[str] = collections.Counter()
        for word, signature in zip(candidates[keep:], shape_of[keep:], strict=True):
            shapes[signature] += sources[word]
        return _by_count(shapes)

    if not vocab_size:
        keep = sum(1 for w in candidates if sources[w] >= min_count)
        return words + signatures_of_the_rest(keep) + candidates[:keep]
    room = vocab_size - len(RESERVED_TOKENS) - len(words)
    if room < 0:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: the training trees have {len(words)} distinct "
            f"tags and brackets, plus {len(RESERVED_TOKENS)} reserved ids"
        )
    keep = room
    while True:  # each round keeps fewer words, so more shapes need a signature; at most room
        signatures = signatures_of_the_rest(keep)[:room]
        if keep + len(signatures) <= room:
            break
        keep = room - len(signatures)
    return words + signatures + candidates[:keep]


def _by_count(counter: collections.Counter[str]) -> list[str]:
    """The keys, most frequent first, ties alphabetically (so lists are deterministic)."""
    return [w for w, _ in sorted(counter.items(), key=lambda item: (-item[1], item[0]))]


@register_problem("wsj_parsing")
class WsjParsing(TreebankProblem):
    """WSJ of the Penn Treebank: `--ptb_dir` with sections 02-21 train, 22 dev, 23 test; the
    paper's 16K vocabulary (section 6.3)."""

    vocab_size: ClassVar[int] = 16000
    default_options: ClassVar[dict[str, Any]] = {"ptb_dir": None, "vocab_size": 0}
    option_help: ClassVar[dict[str, str]] = {
        "ptb_dir": "WSJ section folders 00..24 of .mrg files (02-21 train, 22 dev, 23 test).",
    }

    def tree_files(self, split: str, options: dict[str, Any]) -> list[str]:
        if not options["ptb_dir"]:
            raise ValueError(f"problem {self.name} needs --ptb_dir (the WSJ section folders)")
        return wsj_files(os.path.expanduser(options["ptb_dir"]), split)


@register_problem("wsj_parsing_semi")
class WsjParsingSemi(WsjParsing):
    """WSJ plus a silver corpus of parsed sentences for training (`--silver_trees`, a glob of
    bracketed files, read as a stream); 32K vocabulary as in section 6.3."""

    vocab_size: ClassVar[int] = 32000
    default_options: ClassVar[dict[str, Any]] = {
        "ptb_dir": None,
        "silver_trees": None,
        "vocab_size": 0,
    }
    option_help: ClassVar[dict[str, str]] = {
        "silver_trees": "Glob of bracketed silver trees added to the training split.",
    }

    def train_files(self, options: dict[str, Any]) -> list[str]:
        if not options["silver_trees"]:
            raise ValueError(f"problem {self.name} needs --silver_trees (a glob of tree files)")
        silver = glob_files(os.path.expanduser(options["silver_trees"]), "--silver_trees")
        return self.tree_files("train", options) + silver


@register_problem("parsing_trees")
class ParsingTrees(TreebankProblem):
    """Any bracketed treebank: `--train_trees/--dev_trees/--test_trees` globs, or `gum_dir`
    with GUM's deterministic document split (`dev_percent`, `test_percent`)."""

    default_options: ClassVar[dict[str, Any]] = {
        "train_trees": None,
        "dev_trees": None,
        "test_trees": None,
        "gum_dir": None,
        "dev_percent": 5,
        "test_percent": 5,
        "vocab_size": 0,
    }
    option_help: ClassVar[dict[str, str]] = {
        **{
            f"{split}_trees": f"Glob(s), comma-separated, of the {split} bracketed tree files."
            for split in ("train", "dev", "test")
        },
        "gum_dir": "GUM's .ptb folder, split by document name (instead of the *_trees globs).",
        "dev_percent": "With gum_dir: percent of the documents in the dev split.",
        "test_percent": "With gum_dir: percent of the documents in the test split.",
    }

    def splits(self, options: dict[str, Any]) -> tuple[str, ...]:
        if options["gum_dir"]:
            return ("train", "dev", "test")
        return tuple(s for s in ("train", "dev", "test") if options[f"{s}_trees"])

    def tree_files(self, split: str, options: dict[str, Any]) -> list[str]:
        globs = {s: options[f"{s}_trees"] for s in ("train", "dev", "test")}
        if options["gum_dir"]:
            given = [f"--{s}_trees" for s, g in globs.items() if g]
            if given:
                raise ValueError(f"problem {self.name}: give gum_dir or {given}, not both")
            return gum_files(
                os.path.expanduser(options["gum_dir"]),
                split,
                dev_percent=options["dev_percent"],
                test_percent=options["test_percent"],
            )
        if not globs["train"] or not (globs["dev"] or globs["test"]):
            raise ValueError(
                f"problem {self.name} needs --train_trees and --dev_trees (or --test_trees), "
                "globs of bracketed tree files; or --problem_options=gum_dir=FOLDER"
            )
        if not globs[split]:
            raise ValueError(f"problem {self.name}: no --{split}_trees given")
        return glob_files(globs[split], f"--{split}_trees")
