"""Labelled bracket scoring of constituency trees, following EVALB with COLLINS.prm.

The conventions are those of Sekine & Collins' EVALB run with its COLLINS.prm parameter file,
the standard for WSJ section 23 numbers (and the F1 of the paper's Table 4):

  * words tagged with a DELETE_LABEL (`,` `:` `` `` `''` `.` and `-NONE-`) are removed together
    with their pre-terminal before anything is counted, so bracket spans skip punctuation;
  * a phrase covering no remaining word is ignored; a phrase label is cut at its first `-` or `=`
    (`NP-SBJ-1` -> `NP`); phrases labelled TOP are ignored; ADVP and PRT count as the same label;
  * brackets (start, end, label) are matched as multisets: a gold bracket matches at most one
    test bracket;
  * a test bracket is crossing when it overlaps some gold bracket without either containing the
    other; a sentence is a complete match when gold, test and matched counts are all equal;
  * sentence length (for the `len<=40` summary) counts every word except `-NONE-`
    (DELETE_LABEL_FOR_LENGTH);
  * a test tree with no word left is a *skip* sentence (status 2); different word counts or
    different words after deletion make an *error* sentence (status 1); neither enters the
    totals, and more than `max_errors` errors stop the evaluation (MAX_ERROR 10).

One deliberate extension, so trees read from the WSJ (`( (S ...) )`), GUM (`(ROOT ...)`) and
our own decoder (`(TOP ...)`) score the same: the outermost bracket is dropped when its label is
empty, ROOT or TOP (EVALB itself drops only TOP). Where EVALB reports a file-length mismatch and
scores the common prefix, `evaluate` raises an error instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from t2t_lite.data.trees import ROOT_LABELS, Tree, read_trees
from t2t_lite.data.trees import TreeParseError as TreeParseError  # t2t-evalb catches it

OK, ERROR, SKIP = 0, 1, 2  # EVALB's status column.


class EvalbError(ValueError):
    """The evaluation cannot go on: tree counts differ or too many error sentences."""


@dataclass(frozen=True)
class EvalbParams:
    """EVALB's parameter file; the defaults are COLLINS.prm."""

    delete_labels: frozenset[str] = frozenset({"TOP", "-NONE-", ",", ":", "``", "''", "."})
    delete_labels_for_length: frozenset[str] = frozenset({"-NONE-"})
    equivalent_labels: tuple[tuple[str, str], ...] = (("ADVP", "PRT"),)
    labeled: bool = True
    cutoff_length: int = 40
    max_errors: int | None = 10

    def canonical(self, label: str) -> str:
        for first, second in self.equivalent_labels:
            if label == second:
                return first
        return label


COLLINS = EvalbParams()


class _BracketScores:
    """Labelled recall and precision in percent, of `matched` brackets among the gold and the
    test ones (0 where there are none)."""

    matched: int
    gold_brackets: int
    test_brackets: int

    @property
    def recall(self) -> float:
        return 100.0 * self.matched / self.gold_brackets if self.gold_brackets else 0.0

    @property
    def precision(self) -> float:
        return 100.0 * self.matched / self.test_brackets if self.test_brackets else 0.0


@dataclass(frozen=True)
class SentenceResult(_BracketScores):
    """One row of EVALB's table (counts after deletion)."""

    index: int
    length: int
    status: int  # OK, ERROR or SKIP (EVALB's status column)
    # Brackets: matched, in the gold tree, in the test tree, and test brackets crossing gold.
    matched: int = 0
    gold_brackets: int = 0
    test_brackets: int = 0
    crossing: int = 0
    # Tagging: words after deletion, and how many of them got the gold tag.
    words: int = 0
    correct_tags: int = 0
    message: str = ""


@dataclass
class Totals(_BracketScores):
    """Sums over sentences; only OK sentences add brackets, words and crossings."""

    # Sentences read, and how many of them had the status ERROR or SKIP.
    sentences: int = 0
    errors: int = 0
    skips: int = 0
    # Brackets, summed as in `SentenceResult`; complete: sentences with every bracket right.
    matched: int = 0
    gold_brackets: int = 0
    test_brackets: int = 0
    complete: int = 0
    # Crossing brackets: their sum, and the sentences with none and with at most two.
    crossing: int = 0
    no_crossing: int = 0
    two_or_less_crossing: int = 0
    words: int = 0
    correct_tags: int = 0

    def add(self, row: SentenceResult) -> None:
        self.sentences += 1
        if row.status == ERROR:
            self.errors += 1
            return
        if row.status == SKIP:
            self.skips += 1
            return
        self.matched += row.matched
        self.gold_brackets += row.gold_brackets
        self.test_brackets += row.test_brackets
        self.complete += row.gold_brackets == row.test_brackets == row.matched
        self.crossing += row.crossing
        self.no_crossing += row.crossing == 0
        self.two_or_less_crossing += row.crossing <= 2
        self.words += row.words
        self.correct_tags += row.correct_tags

    @property
    def valid(self) -> int:
        return self.sentences - self.errors - self.skips

    @property
    def f1(self) -> float:
        # EVALB prints "nan" when precision and recall are both 0; 0 is the useful number.
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def percent_of_valid(self, count: int) -> float:
        return 100.0 * count / self.valid if self.valid else 0.0

    @property
    def tagging_accuracy(self) -> float:
        return 100.0 * self.correct_tags / self.words if self.words else 0.0


@dataclass
class EvalbResult:
    """Per-sentence rows and the two summaries (all sentences, and length <= cutoff)."""

    rows: list[SentenceResult] = field(default_factory=list)
    all: Totals = field(default_factory=Totals)
    short: Totals = field(default_factory=Totals)
    cutoff_length: int = 40

    @property
    def f1(self) -> float:
        return self.all.f1


@dataclass
class _Sentence:
    tagged: list[tuple[str, str]]  # (word, tag) of the words kept, in order
    brackets: list[tuple[int, int, str]]  # (start, end) over kept words; end exclusive
    length: int  # words but -NONE-


def _evalb_label(label: str) -> str:
    # EVALB's modify_label: everything from the first '-' or '=' on is dropped.
    for position, char in enumerate(label):
        if char in "-=":
            return label[:position]
    return label


def _read_sentence(tree: Tree, params: EvalbParams) -> _Sentence:
    sentence = _Sentence([], [], 0)
    drop_root = tree.label in ROOT_LABELS and not tree.is_preterminal
    _collect(tree, params, sentence, is_root=drop_root)
    sentence.brackets = [
        (start, end, label)
        for start, end, label in sentence.brackets
        if start < end and label not in params.delete_labels
    ]
    return sentence


def _collect(tree: Tree, params: EvalbParams, sentence: _Sentence, is_root: bool) -> None:
    """Appends the tree's tagged words and its brackets (span over the kept words, label) to
    `sentence`, in EVALB's order: a bracket after the brackets inside it. Iterative, so a tree
    of any depth (a broken model output can nest thousands deep) is read without Python's
    recursion limit."""
    # (node, the word index where it starts, or None before its children are visited)
    stack: list[tuple[Tree, int | None]] = [(tree, None)]
    while stack:
        node, start = stack.pop()
        if node.is_preterminal:
            tag = node.label
            sentence.length += tag not in params.delete_labels_for_length
            if tag not in params.delete_labels:
                sentence.tagged.append((node.children[0], tag))
        elif start is None:  # first visit: come back after the children, left to right
            stack.append((node, len(sentence.tagged)))
            stack.extend((child, None) for child in reversed(node.children))
        elif node is not tree or not is_root:
            sentence.brackets.append((start, len(sentence.tagged), _evalb_label(node.label)))


def _crosses(a: tuple[int, int, str], b: tuple[int, int, str]) -> bool:
    return a[0] < b[0] < a[1] < b[1] or b[0] < a[0] < b[1] < a[1]


def score_sentence(
    gold: Tree, test: Tree, index: int = 1, params: EvalbParams = COLLINS
) -> SentenceResult:
    """Scores one test tree against its gold tree; `index` is the 1-based sentence number."""
    g, t = _read_sentence(gold, params), _read_sentence(test, params)
    if not t.tagged:
        return SentenceResult(index, g.length, SKIP, message="test tree has no words")
    if len(g.tagged) != len(t.tagged):
        return SentenceResult(
            index, g.length, ERROR, message=f"Length unmatch ({len(g.tagged)}|{len(t.tagged)})"
        )
    for (gold_word, _), (test_word, _) in zip(g.tagged, t.tagged, strict=True):
        if gold_word != test_word:
            return SentenceResult(
                index, g.length, ERROR, message=f"Words unmatch ({gold_word}|{test_word})"
            )

    def key(bracket: tuple[int, int, str]) -> tuple:
        start, end, label = bracket
        return (start, end, params.canonical(label)) if params.labeled else (start, end)

    matched = sum((Counter(map(key, g.brackets)) & Counter(map(key, t.brackets))).values())
    crossing = sum(any(_crosses(gb, tb) for gb in g.brackets) for tb in t.brackets)
    correct_tags = sum(
        params.canonical(gold_tag) == params.canonical(test_tag)
        for (_, gold_tag), (_, test_tag) in zip(g.tagged, t.tagged, strict=True)
    )
    return SentenceResult(
        index,
        g.length,
        OK,
        matched=matched,
        gold_brackets=len(g.brackets),
        test_brackets=len(t.brackets),
        crossing=crossing,
        words=len(g.tagged),
        correct_tags=correct_tags,
    )


def evaluate(
    gold_trees: Iterable[Tree],
    test_trees: Iterable[Tree],
    params: EvalbParams = COLLINS,
    gold_name: str = "gold",
    test_name: str = "test",
) -> EvalbResult:
    """Scores test trees against gold trees, sentence by sentence, in order.

    Raises:
      EvalbError: when the numbers of trees differ (naming both sources and counts), or when
        more than `params.max_errors` sentences are errors.
    """
    gold, test = list(gold_trees), list(test_trees)
    if len(gold) != len(test):
        raise EvalbError(
            f"{gold_name} has {len(gold)} trees but {test_name} has {len(test)}; "
            "EVALB compares them one to one"
        )
    result = EvalbResult(cutoff_length=params.cutoff_length)
    for index, (gold_tree, test_tree) in enumerate(zip(gold, test, strict=True), start=1):
        row = score_sentence(gold_tree, test_tree, index, params)
        result.rows.append(row)
        result.all.add(row)
        if row.length <= params.cutoff_length:
            result.short.add(row)
        if params.max_errors is not None and result.all.errors > params.max_errors:
            raise EvalbError(
                f"more than {params.max_errors} error sentences (MAX_ERROR); sentence {index} "
                f"of {test_name}: {row.message}"
            )
    return result


def evaluate_files(gold_path: str, test_path: str, params: EvalbParams = COLLINS) -> EvalbResult:
    """`evaluate` on two files of bracketed trees (any layout `read_trees` accepts)."""
    return evaluate(
        read_trees(gold_path), read_trees(test_path), params, gold_name=gold_path,
        test_name=test_path,
    )  # fmt: skip


_RULE = "=" * 76


def format_rows(rows: Sequence[SentenceResult]) -> str:
    """EVALB's per-sentence table."""
    lines = [
        "  Sent.                        Matched  Bracket   Cross        Correct Tag",
        " ID  Len.  Stat. Recal  Prec.  Bracket gold test Bracket Words  Tags Accracy",
        _RULE,
    ]
    for r in rows:
        accuracy = 100.0 * r.correct_tags / r.words if r.words else 0.0
        lines.append(
            f"{r.index:4d}  {r.length:3d}    {r.status:d}  {r.recall:6.2f} {r.precision:6.2f}   "
            f"{r.matched:3d}    {r.gold_brackets:3d}  {r.test_brackets:3d}    {r.crossing:3d}   "
            f"{r.words:4d}  {r.correct_tags:4d}   {accuracy:6.2f}"
        )
    return "\n".join(lines)


def format_summary(result: EvalbResult) -> str:
    """EVALB's closing totals line and `=== Summary ===` block."""
    a = result.all
    lines = [
        _RULE,
        f"                {a.recall:6.2f} {a.precision:6.2f} {a.matched:6d} {a.gold_brackets:5d} "
        f"{a.test_brackets:5d}  {a.crossing:5d}  {a.words:5d} {a.correct_tags:5d}   "
        f"{a.tagging_accuracy:6.2f}",
        "=== Summary ===",
    ]
    for title, totals in (("All", a), (f"len<={result.cutoff_length}", result.short)):
        valid = totals.valid
        average_crossing = totals.crossing / valid if valid else 0.0
        lines += [
            "",
            f"-- {title} --",
            f"Number of sentence        = {totals.sentences:6d}",
            f"Number of Error sentence  = {totals.errors:6d}",
            f"Number of Skip  sentence  = {totals.skips:6d}",
            f"Number of Valid sentence  = {valid:6d}",
            f"Bracketing Recall         = {totals.recall:6.2f}",
            f"Bracketing Precision      = {totals.precision:6.2f}",
            f"Bracketing FMeasure       = {totals.f1:6.2f}",
            f"Complete match            = {totals.percent_of_valid(totals.complete):6.2f}",
            f"Average crossing          = {average_crossing:6.2f}",
            f"No crossing               = {totals.percent_of_valid(totals.no_crossing):6.2f}",
            f"2 or less crossing        = "
            f"{totals.percent_of_valid(totals.two_or_less_crossing):6.2f}",
            f"Tagging accuracy          = {totals.tagging_accuracy:6.2f}",
        ]
    return "\n".join(lines)


def format_report(result: EvalbResult, rows: bool = True) -> str:
    """The whole EVALB-style report: rows (optional) then the summary."""
    body = [format_rows(result.rows)] if rows else []
    return "\n".join(body + [format_summary(result)]) + "\n"
