"""Parse trees for the page: a bracketed tree as JSON the browser draws, and one sentence's EVALB.

A node is {"label": "NP", "children": [...]}; a pre-terminal is {"label": "NN", "word": "dog"}.
Trees are read with `t2t_lite.data.trees.parse_tree` and scored with
`t2t_lite.metrics.evalb.score_sentence` (COLLINS.prm), what `t2t-evalb` prints for the sentence.
"""

from __future__ import annotations

from typing import Any

from t2t_lite.data.trees import Tree, TreeParseError, parse_tree
from t2t_lite.metrics import evalb

# Deeper trees are not sent as JSON (each level nests two JSON values and encoders recurse);
# the page shows their bracketed text instead. Well-formed parses are far shallower.
MAX_DEPTH = 150
STATUS = {evalb.OK: "ok", evalb.ERROR: "error", evalb.SKIP: "skip"}


def tree_json(tree: Tree) -> dict[str, Any] | None:
    """A `Tree` --> nested dicts (see the module's docstring), or None when deeper than
    MAX_DEPTH. Iterative, so any depth is safe to walk."""
    root: dict[str, Any] = {}
    stack: list[tuple[Tree, dict[str, Any], int]] = [(tree, root, 1)]
    while stack:
        node, out, depth = stack.pop()
        if depth > MAX_DEPTH:
            return None
        out["label"] = node.label
        if node.is_preterminal:
            out["word"] = node.children[0]
            continue
        out["children"] = [{} for _ in node.children]
        for child, child_out in zip(node.children, out["children"], strict=True):
            if isinstance(child, str):  # a word directly under a phrase: drawn as a leaf
                child_out.update(label="", word=child)
            else:
                stack.append((child, child_out, depth + 1))
    return root


def text_tree_json(text: str) -> dict[str, Any] | None:
    """A model's output --> `tree_json`, or None when it is not one well-formed tree."""
    try:
        return tree_json(parse_tree(text))
    except TreeParseError:
        return None


def sentence_evalb(gold: Tree, test: Tree) -> dict[str, Any]:
    """EVALB (COLLINS.prm) of one test tree against its gold tree: recall, precision and F1
    in percent, bracket counts, tagging accuracy, status ("ok", or "error"/"skip" with
    EVALB's message, e.g. different words) and the gold tree as JSON."""
    row = evalb.score_sentence(gold, test)
    p, r = row.precision, row.recall
    return {
        "status": STATUS[row.status],
        "message": row.message,
        "f1": 2 * p * r / (p + r) if p + r else 0.0,
        "precision": p,
        "recall": r,
        "matched": row.matched,
        "gold_brackets": row.gold_brackets,
        "test_brackets": row.test_brackets,
        "crossing": row.crossing,
        "tagging_accuracy": 100.0 * row.correct_tags / row.words if row.words else 0.0,
        "gold_tree": tree_json(gold),
    }
