"""The inline marks of a paragraph's text, found for `t2t_lite.document.markup` to take out:

- tags: `<b>`, `</b>`, `<br/>`, `<a href="x.html" title="a > b">` (a quoted attribute may hold
  `>`), and autolinks `<https://x.org>`, `<name@x.org>` (points);
- Markdown's code spans (`` `x` ``, a point: kept as it is), links and images (`[text](url)`,
  `![alt](src "title")`: `[` and `](url)` a pair around the text, which is translated), strong
  emphasis (`**x**`, `__x__`) and emphasis (`*x*`, `_x_`), paired as CommonMark pairs them: by
  left- and right-flanking delimiter runs (so `2 * 3 * 4` and `snake_case_name` hold none) and
  its rule of 3;
- placeholders: `{name}`, `%s`, `%(count)d`, `%1$s`, URLs, e-mail addresses, and numbers the
  tokenizer would break.

Every search is a scan from left to right, with no recursion and no backtracking over the text
before it, so any text is read in about linear time. Markdown's marks are found here rather than
by a Markdown parser: markdown-it-py's inline tokens carry no offsets into their source, and the
marks must come back byte for byte.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence

_ATTRIBUTE = r"""\s+[^\s"'<>/=]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+))?"""
TAG = re.compile(rf"<(/?)([A-Za-z][\w:.-]*)((?:{_ATTRIBUTE})*)\s*(/?)>")
_AUTOLINK = re.compile(r"<(?:(?:https?|ftp|mailto):[^\s<>]+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+)>")
PLACEHOLDER = re.compile(
    r"\{[\w.]*\}"  # {name}, {0}
    r"|%\(\w+\)[-+ #0]*\d*(?:\.\d+)?[sdifxXeEgGr]"  # %(count)d
    r"|%\d+\$[sdif]"  # %1$s
    r"|%[-+#0]*\d*(?:\.\d+)?[sdifxX](?![\w])"  # %s, %d, %.2f
    r"|(?:https?://|www\.)[^\s<>\"']*[^\s<>\"'.,;:!?)\]]"  # URLs, without trailing punctuation
    r"|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"  # e-mail addresses
)
NUMBER = re.compile(r"\d+(?:[.,\u00a0\u202f]\d+)+")  # 1,234.56  3.14  10 000 (with NBSP)
_DESTINATION = re.compile(
    r"""\(\s*(?:<[^<>\n]*>|[^\s()<>]*(?:\([^\s()]*\)[^\s()<>]*)*)"""
    r"""(?:\s+(?:"[^"]*"|'[^']*'|\([^()]*\)))?\s*\)"""
)
Found = tuple[int, int, str, str]  # (start, end, kind, name); kind "open", "close", "empty",
# "point"; a pair's open and close share a name (a tag's, lower-cased; "[3" or "*3" for Markdown)


def find(text: str, breaks: Callable[[str], bool] | None = None) -> list[Found]:
    """The marks of `text` in order; `breaks(number)` says whether the tokenizer breaks a
    number (None: numbers are text)."""
    found = _code_and_tags(text)
    found += _links(text, _Spans(found))
    found += _placeholders(text, _Spans(found), breaks)
    found += _emphasis(text, _Spans(found))
    return sorted(found)


class _Spans:
    """Disjoint (start, end) ranges of the text already taken, for overlap tests by bisection."""

    def __init__(self, found: Sequence[Found]):
        ranges = sorted((s, e) for s, e, _, _ in found)
        self.starts = [s for s, _ in ranges]
        self.ends = [e for _, e in ranges]

    def overlaps(self, start: int, end: int) -> bool:
        k = bisect.bisect_right(self.starts, start) - 1
        if k >= 0 and self.ends[k] > start:
            return True
        return k + 1 < len(self.starts) and self.starts[k + 1] < end


def _code_and_tags(text: str) -> list[Found]:
    """Code spans, tags and autolinks, the first to start winning (CommonMark's precedence)."""
    runs: dict[int, list[int]] = {}  # a backtick run's length --> where such runs start
    for m in re.finditer(r"`+", text):
        runs.setdefault(len(m.group()), []).append(m.start())
    found: list[Found] = []
    at = 0
    for m in re.finditer(r"`+|<", text):
        if m.start() < at:
            continue
        if m.group() == "<":
            tag = TAG.match(text, m.start())
            if tag:
                kind = "close" if tag.group(1) else ("empty" if tag.group(4) else "open")
                found.append((tag.start(), tag.end(), kind, tag.group(2).lower()))
                at = tag.end()
            elif link := _AUTOLINK.match(text, m.start()):
                found.append((link.start(), link.end(), "point", ""))
                at = link.end()
            continue
        starts = runs[len(m.group())]
        k = bisect.bisect_left(starts, m.end())  # the next run of as many backticks closes it
        if k < len(starts):
            end = starts[k] + len(m.group())
            found.append((m.start(), end, "point", ""))
            at = end
    return found


def _links(text: str, taken: _Spans) -> list[Found]:
    """`[text](url)` and `![alt](src)`: the opening bracket and `](url)` as a pair; brackets
    pair as a stack does; a link holds no link (an image may)."""
    found: list[Found] = []
    openers: list[int] = []
    at = dead = 0  # `[` openers before `dead` are inside a link's text: no link of their own
    for m in re.finditer(r"!?\[|\]", text):
        bracket = m.end() - 1
        if (
            m.start() < at
            or taken.overlaps(m.start(), m.end())
            or text[bracket - 1 : bracket] == "\\"
        ):
            continue
        if m.group() != "]":
            openers.append(m.start())
            continue
        if not openers:
            continue
        opener = openers.pop()
        image = text[opener] == "!"
        destination = _DESTINATION.match(text, m.end())
        if (opener < dead and not image) or destination is None:
            continue
        if taken.overlaps(m.start(), destination.end()):
            continue
        name = f"[{len(found)}"
        found += [(opener, opener + 1 + image, "open", name),
                  (m.start(), destination.end(), "close", name)]  # fmt: skip
        at = destination.end()
        if not image:
            dead = opener
    return found


def _placeholders(text: str, taken: _Spans, breaks: Callable[[str], bool] | None) -> list[Found]:
    pattern = PLACEHOLDER.pattern + (f"|{NUMBER.pattern}" if breaks else "")
    found: list[Found] = []
    for m in re.finditer(pattern, text):
        if taken.overlaps(m.start(), m.end()):
            continue  # inside a tag (an href's URL), a link's destination or a code span
        if breaks and NUMBER.fullmatch(m.group()) and not breaks(m.group()):
            continue
        found.append((m.start(), m.end(), "point", ""))
    return found


def _flanking(text: str, start: int, end: int) -> tuple[bool, bool]:
    """(can open, can close) of the delimiter run text[start:end] (CommonMark 6.2)."""
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "

    def punct(c: str) -> bool:
        return not c.isalnum() and not c.isspace()

    left = not after.isspace() and (not punct(after) or before.isspace() or punct(before))
    right = not before.isspace() and (not punct(before) or after.isspace() or punct(after))
    if text[start] == "*":
        return left, right
    return left and (not right or punct(before)), right and (not left or punct(after))


def _emphasis(text: str, taken: _Spans) -> list[Found]:
    """`**x**`, `__x__`, `*x*`, `_x_` as pairs, by CommonMark's delimiter stack: each closer
    takes the nearest opener of its character (2 at a time where both have 2), the delimiters
    between them are dropped, and a closer that finds none marks how far down none is."""
    found: list[Found] = []
    stack: list[list] = []  # openers: [character, first unused, unused count, length, closes]
    bottom: dict[tuple, int] = {}  # (character, opens, length % 3) --> no opener below this
    for m in re.finditer(r"\*+|_+", text):
        start, end = m.start(), m.end()
        if start and text[start - 1] == "\\":
            start += 1  # an escaped delimiter is text
        if start == end or taken.overlaps(start, end):
            continue
        char, length = text[start], end - start
        opens, closes = _flanking(text, start, end)
        count = length
        while closes and count:
            key = (char, opens, length % 3)
            k = len(stack) - 1
            while k >= bottom.get(key, 0):
                o = stack[k]
                odd = (o[4] or opens) and (o[3] + length) % 3 == 0 and (o[3] % 3 or length % 3)
                if o[0] == char and not odd:
                    break
                k -= 1
            if k < bottom.get(key, 0):
                bottom[key] = len(stack)
                break
            o = stack[k]
            use = 2 if o[2] >= 2 and count >= 2 else 1
            name = f"*{len(found)}"
            o[2] -= use
            found += [(o[1] + o[2], o[1] + o[2] + use, "open", name),
                      (start, start + use, "close", name)]  # fmt: skip
            start, count = start + use, count - use
            del stack[k + (1 if o[2] else 0) :]
            bottom = {key: min(v, len(stack)) for key, v in bottom.items()}
        if opens and count:
            stack.append([char, start, count, length, closes])
    return found
