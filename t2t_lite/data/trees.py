"""Penn-Treebank bracketed trees: reading, writing and the standard preprocessing.

A tree is a `Tree(label, children)`. A pre-terminal (part-of-speech node) has exactly one child,
the word, as a `str`; every other node has only `Tree` children. Files may hold any number of
trees, each spread over any number of lines, as the WSJ `.mrg` files and the GUM `.ptb` files do.
Both root conventions are read: the empty wrapper `( (S ...) )` of the WSJ files and
`(ROOT (S ...))` / `(TOP (S ...))`.

Used by the parsing problems (`t2t_lite.problems.parsing_trees`) and by EVALB
(`t2t_lite.metrics.evalb`), so both see a file the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from t2t_lite.runtime import atomic_io

# Labels of a root wrapper that carries no constituent of its own.
ROOT_LABELS = frozenset({"", "ROOT", "TOP"})
TRACE_TAG = "-NONE-"

# "(LABEL" (label possibly empty), ")", or a bare word. "( NP" is an empty label then a word,
# as EVALB reads it.
_TOKEN = re.compile(r"\(([^\s()]*)|(\))|([^\s()]+)")


class TreeParseError(ValueError):
    """A bracketed tree that does not parse; the message names the file and line."""


@dataclass(eq=True)
class Tree:
    """A constituency tree node.

    Attributes:
      label: the node's label ("NP", "NN", "" for an unlabelled root wrapper).
      children: `[word]` for a pre-terminal, otherwise a list of `Tree`s.
    """

    label: str
    children: list[Tree | str] = field(default_factory=list)

    @property
    def is_preterminal(self) -> bool:
        return len(self.children) == 1 and isinstance(self.children[0], str)

    def leaves(self) -> list[str]:
        """The words, left to right."""
        return [word for word, _ in self.tagged_words()]

    def tagged_words(self) -> list[tuple[str, str]]:
        """(word, part-of-speech tag) pairs, left to right."""
        out: list[tuple[str, str]] = []
        stack: list[Tree] = [self]
        while stack:
            node = stack.pop()
            if node.is_preterminal:
                out.append((node.children[0], node.label))
            else:
                stack.extend(reversed(node.children))
        return out

    def __str__(self) -> str:
        return tree_to_string(self)


def tree_to_string(tree: Tree) -> str:
    """One-line bracketed form, e.g. `(S (NP (DT the) (NN dog)) (VP (VBZ barks)))`."""
    # Iterative, so that the deep trees a broken model output can make never hit the recursion
    # limit. ")" marks a phrase's end; words never contain brackets, so " )" -> ")" is safe.
    parts: list[str] = []
    stack: list[Tree | str] = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item)
        elif item.is_preterminal:
            parts.append(f"({item.label} {item.children[0]})")
        else:
            parts.append(f"({item.label}")
            stack.append(")")
            stack.extend(reversed(item.children))
    return " ".join(parts).replace(" )", ")")


def parse_trees(lines: Iterable[str], source: str = "<string>") -> Iterator[Tree]:
    """Reads every tree in `lines` (an open file or a list of strings, one line each).

    Raises:
      TreeParseError: naming `source` and the line, for unbalanced brackets, text outside any
        bracket, a node with more than one word, or words mixed with subtrees.
    """
    stack: list[Tree] = []
    opened_at: list[int] = []
    for line_number, line in enumerate(lines, start=1):
        for match in _TOKEN.finditer(line):
            label, close, word = match.groups()
            if label is not None:
                node = Tree(label, [])
                if stack:
                    stack[-1].children.append(node)
                stack.append(node)
                opened_at.append(line_number)
            elif close is not None:
                if not stack:
                    raise TreeParseError(f"{source}:{line_number}: unexpected ')' outside a tree")
                node = stack.pop()
                opened_at.pop()
                _check_node(node, source, line_number)
                if not stack:
                    yield node
            else:
                if not stack:
                    raise TreeParseError(
                        f"{source}:{line_number}: text {word!r} outside any bracket"
                    )
                stack[-1].children.append(word)
    if stack:
        raise TreeParseError(
            f"{source}:{opened_at[0]}: unbalanced brackets: the tree opened on this line "
            f"is missing {len(stack)} closing bracket(s) at the end of the file"
        )


def _check_node(node: Tree, source: str, line_number: int) -> None:
    words = [c for c in node.children if isinstance(c, str)]
    if not words:
        return
    if len(words) > 1:
        raise TreeParseError(
            f"{source}:{line_number}: node ({node.label} ...) has {len(words)} words "
            f"{words[:3]}; a pre-terminal holds exactly one word"
        )
    if len(node.children) > 1:
        raise TreeParseError(
            f"{source}:{line_number}: node ({node.label} ...) mixes the word {words[0]!r} "
            "with subtrees"
        )


def parse_tree(text: str) -> Tree:
    """Parses exactly one tree from a string."""
    trees = list(parse_trees(text.splitlines(), source="<string>"))
    if len(trees) != 1:
        raise TreeParseError(f"<string>: expected one tree, found {len(trees)}: {text[:80]!r}")
    return trees[0]


def read_trees(path: str) -> Iterator[Tree]:
    """Yields the trees of a file (UTF-8, an optional BOM, any line endings), streaming.

    Raises:
      OSError: naming the file, when it cannot be opened.
      TreeParseError: naming the file and line of a tree that does not parse or of invalid UTF-8.
    """
    with open(path, "rb") as handle:
        yield from parse_trees(_decoded_lines(handle, path), source=path)


def _decoded_lines(handle, path: str) -> Iterator[str]:
    # Decoding line by line (not in the text layer's 8 KiB chunks) pins an error to its line.
    for line_number, raw in enumerate(handle, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise TreeParseError(
                f"{path}:{line_number}: invalid UTF-8 at byte {error.start} ({error.reason})"
            ) from None
        if line_number == 1 and line.startswith("\ufeff"):
            line = line[1:]
        yield line


def write_trees(trees: Iterable[Tree], path: str) -> int:
    """Writes one tree per line, atomically (temporary file, then rename). Returns the count."""
    count = 0
    with atomic_io.open_atomic(path, "w", encoding="utf-8") as handle:
        for tree in trees:
            handle.write(tree_to_string(tree) + "\n")
            count += 1
    return count


def strip_function_tags(label: str) -> str:
    """`NP-SBJ-1` -> `NP`, `NP=2` -> `NP`, `S-NOM-SBJ` -> `S`; `-LRB-`, `-NONE-` stay intact."""
    if len(label) > 1 and label.startswith("-") and label.endswith("-"):
        return label
    cut = len(label)
    for sep in "-=":
        position = label.find(sep, 1)
        if position != -1:
            cut = min(cut, position)
    return label[:cut]


def normalize_tree(tree: Tree) -> Tree | None:
    """The standard parsing preprocessing; returns a new tree, or None if nothing is left.

    Drops `-NONE-` pre-terminals (traces, null elements) and every constituent left without
    words, strips function tags and indices from every label, and removes a root wrapper
    (label "", ROOT or TOP) around a single phrase. A wrapper around several children or around
    a lone pre-terminal stays, relabelled TOP, so the root is always a bracket. Unary chains and
    everything else are kept as they are.
    """
    pruned = _drop_traces(tree)
    if pruned is None:
        return None
    if pruned.label in ROOT_LABELS:
        if len(pruned.children) == 1 and not pruned.children[0].is_preterminal:
            return pruned.children[0]
        pruned.label = "TOP"
    return pruned


def _drop_traces(tree: Tree) -> Tree | None:
    """A copy of `tree` without trace pre-terminals, constituents left without words, function
    tags and indices (root labels kept); None if nothing is left. Iterative: any depth."""
    built: dict[int, Tree | None] = {}  # id(node) --> its copy, once its children are built
    stack: list[tuple[Tree, bool]] = [(tree, False)]
    while stack:
        node, children_done = stack.pop()
        if node.is_preterminal:
            keep = node.label != TRACE_TAG
            built[id(node)] = (
                Tree(strip_function_tags(node.label), [node.children[0]]) if keep else None
            )
        elif not children_done:
            stack.append((node, True))
            stack.extend((child, False) for child in node.children)
        else:
            children = [built.pop(id(c)) for c in node.children]
            children = [c for c in children if c is not None]
            label = node.label if node.label in ROOT_LABELS else strip_function_tags(node.label)
            built[id(node)] = Tree(label, children) if children else None
    return built[id(tree)]
