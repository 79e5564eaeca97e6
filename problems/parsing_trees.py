"""Constituency trees as sequences: linearization, repair, and where the trees come from.

Linearization ("Grammar as a Foreign Language", Vinyals, Kaiser et al. 2014). After the
standard preprocessing (`t2t_lite.data.trees.normalize_tree`: no traces, no empty constituents, no
function tags or indices, no root wrapper) a tree becomes space-separated tokens:

  * a phrase with label X opens with `(X` and closes with `)X`;
  * a pre-terminal becomes its part-of-speech tag alone; the word itself is left out (the
    model reads the words on the source side).

    (S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))
    -> (S (NP NNP )NP (VP VBZ (NP DT NN )NP )VP . )S

Source strings are the words joined by single spaces, exactly as they stand in the treebank
(`-LRB-` stays `-LRB-`), so the i-th tag of a target belongs to the i-th source word.

`delinearize` is the inverse and also repairs what a model may emit, so that every output is a
well-formed tree with exactly the sentence's words in order (see its docstring).

Sources of trees: the WSJ sections of the Penn Treebank (`wsj_files`), any files by glob
(`glob_files`), and a deterministic document-level split of the GUM corpus (`gum_files`).
"""

from __future__ import annotations

import glob
import hashlib
import os
from collections.abc import Iterable, Iterator, Sequence

from t2t_lite.data.trees import (
    Tree,
    TreeParseError,
    normalize_tree,
    parse_tree,
    read_trees,
    tree_to_string,
    write_trees,
)
from t2t_lite.metrics.evalb import COLLINS

__all__ = [
    "SPLITS",
    "Tree",
    "TreeParseError",
    "WSJ_SECTIONS",
    "delinearize",
    "file_pairs",
    "glob_files",
    "glob_pairs",
    "gum_files",
    "gum_pairs",
    "gum_split",
    "guess_tag",
    "linearize",
    "normalize_tree",
    "normalized_trees",
    "parse_tree",
    "read_trees",
    "tree_pairs",
    "tree_to_string",
    "write_trees",
    "wsj_files",
    "wsj_pairs",
]

SPLITS = ("train", "dev", "test")
# The usual WSJ layout: sections 02-21 train, 22 development, 23 test.
WSJ_SECTIONS = {"train": tuple(range(2, 22)), "dev": (22,), "test": (23,)}
DEFAULT_TAG = "XX"
DEFAULT_ROOT = "S"
# Tags for words a repaired tree must add: punctuation keeps its Penn tag so EVALB deletes it
# on both sides (a "." tagged XX would make EVALB reject the sentence for a length mismatch).
# Ambiguous ones ("-" is HYPH or ":", '"' opens or closes) get the default tag.
PUNCTUATION_TAGS = {
    ".": ".", "?": ".", "!": ".",
    ",": ",",
    ":": ":", ";": ":", "--": ":", "\u2014": ":", "...": ":",
    "``": "``", "''": "''",
    "-LRB-": "-LRB-", "-RRB-": "-RRB-",
}  # fmt: skip
# Pre-terminal tags EVALB deletes together with their words.
DELETED_TAGS = COLLINS.delete_labels - {"TOP", "-NONE-"}
# Marks always tagged as quotes or `:` (whichever, EVALB deletes them), beyond `guess_tag`'s.
MORE_PUNCTUATION = {'"': "''", "\u201c": "``", "\u201d": "''", "\u2018": "``", "\u2026": ":"}


def linearize(tree: Tree) -> str:
    """The target string of a normalized tree, e.g. `(S (NP NNP )NP (VP VBZ )VP . )S`."""
    tokens: list[str] = []
    _linearize_into(tree, tokens)
    return " ".join(tokens)


def _linearize_into(node: Tree, tokens: list[str]) -> None:
    if node.is_preterminal:
        tokens.append(node.label)
        return
    tokens.append("(" + node.label)
    for child in node.children:
        _linearize_into(child, tokens)
    tokens.append(")" + node.label)


def guess_tag(word: str, default: str = DEFAULT_TAG) -> str:
    """The tag given to a word a repair has to add: its Penn punctuation tag, else `default`."""
    return PUNCTUATION_TAGS.get(word, default)


def delinearize(
    sequence: str | Sequence[str],
    words: Sequence[str],
    default_tag: str = DEFAULT_TAG,
    root_label: str = DEFAULT_ROOT,
) -> Tree:
    """Turns a (possibly broken) linearized tree back into a tree over `words`.

    Tokens starting with `(` open a phrase (a bare `(` opens `root_label`), tokens starting with
    `)` close the innermost open phrase whatever label they carry (the opening label wins), and
    any other token is a part-of-speech tag that takes the next word. Repairs:

      * closing brackets with nothing open are ignored; phrases still open at the end are closed;
      * tags beyond the last word are dropped; words left over after the last tag are appended,
        in order, to the root phrase with `guess_tag(word, default_tag)`;
      * phrases that end up with no word are removed;
      * several top-level pieces (or none) are wrapped in one `root_label` phrase, so an empty
        or tag-only output gives the flat tree `(S (XX w1) (XX w2) ...)`.

    Args:
      sequence: the model's output, a string of space-separated tokens or a token list.
      words: the sentence, [n] words.

    Returns:
      A tree whose `leaves()` equal `list(words)`; a childless `root_label` node if `words` is
      empty.
    """
    tokens = sequence.split() if isinstance(sequence, str) else list(sequence)
    top = Tree(root_label, [])
    stack = [top]
    next_word = 0
    for token in tokens:
        if token.startswith("("):
            node = Tree(token[1:] or root_label, [])
            stack[-1].children.append(node)
            stack.append(node)
        elif token.startswith(")"):
            if len(stack) > 1:
                _close(stack)
        elif next_word < len(words):
            stack[-1].children.append(Tree(token, [words[next_word]]))
            next_word += 1
    while len(stack) > 1:
        _close(stack)
    if len(top.children) == 1 and not top.children[0].is_preterminal:
        top = top.children[0]
    top.children.extend(Tree(guess_tag(w, default_tag), [w]) for w in words[next_word:])
    return top


def _close(stack: list[Tree]) -> None:
    # A phrase closed without any word is removed from its parent, where it is the last child;
    # closing children before parents makes emptiness propagate upwards without recursion.
    node = stack.pop()
    if not node.children:
        stack[-1].children.pop()


def tree_pairs(trees: Iterable[Tree]) -> Iterator[tuple[str, str]]:
    """(words_string, linearized_target_string) for each tree; trees left empty are skipped."""
    for tree in trees:
        normalized = normalize_tree(tree)
        if normalized is not None:
            yield " ".join(normalized.leaves()), linearize(normalized)


def file_pairs(paths: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(words_string, linearized_target_string) for every tree of the files, in order."""
    return tree_pairs(tree for path in paths for tree in read_trees(path))


def wsj_pairs(ptb_dir: str, split: str) -> Iterator[tuple[str, str]]:
    """The pairs of a WSJ split: 02-21 train, 22 dev, 23 test (see `wsj_files`)."""
    return file_pairs(wsj_files(ptb_dir, split))


def glob_pairs(pattern: str, flag: str = "--train_trees") -> Iterator[tuple[str, str]]:
    """The pairs of the files matching a glob (`--train_trees/--dev_trees/--test_trees`)."""
    return file_pairs(glob_files(pattern, flag))


def gum_pairs(gum_dir: str, split: str, **split_options: int) -> Iterator[tuple[str, str]]:
    """The pairs of a GUM split (see `gum_split`; `dev_percent`, `test_percent` may be given)."""
    return file_pairs(gum_files(gum_dir, split, **split_options))


def normalized_trees(paths: Iterable[str]) -> Iterator[Tree]:
    """The normalized trees of the files in order (the gold trees EVALB compares against)."""
    for path in paths:
        for tree in read_trees(path):
            normalized = normalize_tree(tree)
            if normalized is not None:
                yield normalized


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")


def wsj_files(ptb_dir: str, split: str, flag: str = "--ptb_dir") -> list[str]:
    """The `.mrg` files of a split of the WSJ treebank, in section and file order.

    `ptb_dir` is the folder holding the two-digit section folders `00` ... `24` (in the LDC
    release: `treebank_3/parsed/mrg/wsj`); that release's root folder is also accepted.

    Raises:
      FileNotFoundError / NotADirectoryError / PermissionError: naming `flag` and the folder.
    """
    _check_split(split)
    root = _wsj_root(ptb_dir, flag)
    files: list[str] = []
    for section in WSJ_SECTIONS[split]:
        section_dir = os.path.join(root, f"{section:02d}")
        if not os.path.isdir(section_dir):
            raise FileNotFoundError(
                f"{flag}={ptb_dir}: WSJ section folder {section_dir} is missing (the {split} "
                f"split needs sections {_section_range(split)})"
            )
        if not os.access(section_dir, os.R_OK | os.X_OK):
            raise PermissionError(f"{flag}={ptb_dir}: cannot read {section_dir}")
        names = sorted(n for n in os.listdir(section_dir) if n.lower().endswith(".mrg"))
        if not names:
            raise FileNotFoundError(f"{flag}={ptb_dir}: no .mrg files in {section_dir}")
        files.extend(os.path.join(section_dir, n) for n in names)
    return files


def _wsj_root(ptb_dir: str, flag: str) -> str:
    if not os.path.exists(ptb_dir):
        raise FileNotFoundError(f"{flag}={ptb_dir}: no such folder")
    if not os.path.isdir(ptb_dir):
        raise NotADirectoryError(f"{flag}={ptb_dir}: not a folder")
    if not os.access(ptb_dir, os.R_OK | os.X_OK):
        raise PermissionError(f"{flag}={ptb_dir}: folder is not readable")
    for candidate in (ptb_dir, os.path.join(ptb_dir, "parsed", "mrg", "wsj")):
        if os.path.isdir(os.path.join(candidate, "23")):
            return candidate
    raise FileNotFoundError(
        f"{flag}={ptb_dir}: expected WSJ section folders 00..24 (e.g. {ptb_dir}/23/wsj_2300.mrg) "
        "or the LDC layout parsed/mrg/wsj/ below it"
    )


def _section_range(split: str) -> str:
    sections = WSJ_SECTIONS[split]
    return f"{sections[0]:02d}-{sections[-1]:02d}" if len(sections) > 1 else f"{sections[0]:02d}"


def glob_files(pattern: str, flag: str = "--train_trees") -> list[str]:
    """The sorted files matching a glob (comma-separated globs allowed); an error if none."""
    files: list[str] = []
    for part in (p.strip() for p in pattern.split(",")):
        if not part:
            continue
        matches = sorted(m for m in glob.glob(os.path.expanduser(part)) if os.path.isfile(m))
        if not matches:
            raise FileNotFoundError(f"{flag}={pattern}: no file matches {part!r}")
        files.extend(matches)
    if not files:
        raise FileNotFoundError(f"{flag} is empty: give a glob such as 'trees/train/*.mrg'")
    return files


def gum_split(document: str, dev_percent: int = 5, test_percent: int = 5) -> str:
    """The split of one GUM document, decided by its name alone.

    The document name is the file name without folder and extension (`GUM_academic_art`). Its
    SHA-256, read as a number modulo 100, puts it in test below `test_percent`, in dev below
    `test_percent + dev_percent`, and in train otherwise: deterministic, independent of the
    file system's order and of which other files are present, and whole documents stay together.
    """
    name = os.path.splitext(os.path.basename(document))[0]
    bucket = int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big") % 100
    if bucket < test_percent:
        return "test"
    if bucket < test_percent + dev_percent:
        return "dev"
    return "train"


def gum_files(
    gum_dir: str, split: str, dev_percent: int = 5, test_percent: int = 5, flag: str = "--gum_dir"
) -> list[str]:
    """The sorted `.ptb` files of `gum_dir` that `gum_split` puts in `split`."""
    _check_split(split)
    if not os.path.isdir(gum_dir):
        raise FileNotFoundError(f"{flag}={gum_dir}: no such folder")
    names = sorted(n for n in os.listdir(gum_dir) if n.endswith(".ptb"))
    if not names:
        raise FileNotFoundError(f"{flag}={gum_dir}: no .ptb files")
    return [
        os.path.join(gum_dir, n)
        for n in names
        if gum_split(n, dev_percent=dev_percent, test_percent=test_percent) == split
    ]


def fix_punctuation_tags(tree: Tree) -> Tree:
    """Makes punctuation tags agree with the words, in place; returns `tree`.

    EVALB (COLLINS.prm) deletes words tagged `,` `:` `` `` `''` `.` before counting, so a
    predicted tree whose punctuation tags differ from the gold's has another length and EVALB
    rejects the whole sentence. Unambiguous punctuation words get their Penn tag
    (`guess_tag`), and a word with a letter or digit never keeps a punctuation tag (it becomes
    `XX`); ambiguous marks such as `-` or `'` keep the model's tag.
    """
    stack = [tree]
    while stack:
        node = stack.pop()
        if not node.is_preterminal:
            stack.extend(node.children)
            continue
        word = node.children[0]
        guess = MORE_PUNCTUATION.get(word) or guess_tag(word)
        if guess in DELETED_TAGS:
            node.label = guess
        elif node.label in DELETED_TAGS and any(c.isalnum() for c in word):
            node.label = DEFAULT_TAG
    return tree
