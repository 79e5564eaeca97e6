"""A real parallel corpus that works offline: the LibreOffice help (MPL-2.0) in Debian packages.

`libreoffice-help-en-us`, `-de` and `-fr` install the same tree of HTML pages per language under
/usr/share/libreoffice/help/<lang>/, and every translatable paragraph carries the same `id`
("par_id…", "hd_id…") in each, so sentence pairs align by (page, id). Datagen reads an installed
help tree or fetches the packages with `apt-get download` into a cache folder and unpacks them with
`dpkg-deb`; it then filters the pairs and holds out dev and test by a hash of the English side.
"""

from __future__ import annotations

import hashlib
import html.parser
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from absl import logging

from t2t_lite.problems.base import Problem
from t2t_lite.problems.registry import register_problem

INSTALLED_HELP = "/usr/share/libreoffice/help"
ENGLISH = "en-US"
_ID = re.compile(r"^(par|hd)_id")
_VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}
_SKIP = {"script", "style"}
# Hash buckets of the English side, out of 1000: about 3% dev and 3% test.
DEV_BUCKETS, TEST_BUCKETS = range(0, 30), range(30, 60)
# The help's modules, the folders of text/ (LibreOffice 7.4).
HELP_MODULES = (
    "sbasic", "scalc", "schart", "sdatabase", "sdraw", "shared", "simpress", "smath", "swriter",
)  # fmt: skip


class _ParagraphParser(html.parser.HTMLParser):
    """Collects the text of every element whose id starts with par_id / hd_id."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[tuple[str, str]] = []  # (id, text) in document order
        self._open: list[tuple[str, str | None, list[str]]] = []  # (tag, id, text pieces)
        self._skipping = 0

    def handle_starttag(self, tag, attrs):
        if tag in _VOID:
            return
        if tag in _SKIP:
            self._skipping += 1
        element_id = dict(attrs).get("id") or ""
        self._open.append((tag, element_id if _ID.match(element_id) else None, []))

    def handle_endtag(self, tag):
        # Close up to the matching open tag; HTML allows omitted end tags (e.g. </p>).
        if not any(open_tag == tag for open_tag, _, _ in self._open):
            return
        while self._open:
            open_tag, element_id, pieces = self._open.pop()
            if open_tag in _SKIP:
                self._skipping -= 1
            if element_id:
                self.paragraphs.append((element_id, " ".join("".join(pieces).split())))
            if open_tag == tag:
                return

    def handle_data(self, data):
        if self._skipping:
            return
        # Text belongs to every enclosing captured element (ids rarely nest).
        for _, element_id, pieces in self._open:
            if element_id:
                pieces.append(data)


def extract_paragraphs(page: str) -> dict[str, str]:
    """HTML text --> {id: text} of its par_id/hd_id elements; ids seen twice are dropped."""
    parser = _ParagraphParser()
    parser.feed(page)
    parser.close()
    seen: dict[str, str] = {}
    duplicated = set()
    for element_id, text in parser.paragraphs:
        if element_id in seen:
            duplicated.add(element_id)
        seen[element_id] = text
    return {k: v for k, v in seen.items() if k not in duplicated and v}


def _pages(root: str) -> list[str]:
    pages = []
    for folder, _, names in os.walk(root):
        pages += [
            os.path.relpath(os.path.join(folder, n), root) for n in names if n.endswith(".html")
        ]
    return sorted(pages)


def module_filter(modules: str) -> Callable[[str], bool]:
    """Which help pages (paths like text/scalc/01/func.html) the `modules` option keeps: ""
    keeps all, "scalc+swriter" only those modules, "-scalc" all but that one."""
    names = [m for m in modules.lstrip("-").split("+") if m]
    if not names:
        return lambda page: True
    unknown = [m for m in names if m not in HELP_MODULES]
    if unknown:
        raise ValueError(
            f"option modules={modules!r}: unknown module(s) {unknown}; the help has "
            f"{', '.join(HELP_MODULES)} (join with '+', prefix '-' to exclude)"
        )
    exclude = modules.startswith("-")

    def keep(page: str) -> bool:
        parts = page.split("/")  # text/MODULE/..., or a page outside the modules
        return (len(parts) > 2 and parts[0] == "text" and parts[1] in names) != exclude

    return keep


def align_help(help_root: str, language: str, modules: str = "") -> Iterator[tuple[str, str, str]]:
    """Yields (page/id, English text, translated text) for ids present in both languages, on
    the pages of the help `modules` (see `module_filter`)."""
    english_root, other_root = os.path.join(help_root, ENGLISH), os.path.join(help_root, language)
    for root in (english_root, other_root):
        if not os.path.isdir(root):
            raise FileNotFoundError(f"LibreOffice help folder {root} not found")
    keep = module_filter(modules)
    for page in filter(keep, _pages(english_root)):
        other_path = os.path.join(other_root, page)
        if not os.path.isfile(other_path):
            continue
        with open(os.path.join(english_root, page), encoding="utf-8") as f:
            english = extract_paragraphs(f.read())
        with open(other_path, encoding="utf-8") as f:
            other = extract_paragraphs(f.read())
        for element_id, text in english.items():
            if element_id in other:
                yield f"{page}#{element_id}", text, other[element_id]


def keep_pair(english: str, other: str) -> bool:
    """Sentence-like pairs: 3..80 words, character ratio within 0.5..2, mostly letters,
    translated (the two sides differ), no formulas or code."""
    words = len(english.split()), len(other.split())
    if not (3 <= words[0] <= 80 and 1 <= words[1] <= 120):
        return False
    if not 0.5 <= len(other) / len(english) <= 2.0:
        return False
    if english == other or english.lstrip().startswith("="):
        return False
    letters = sum(c.isalpha() for c in english)
    return letters >= 0.6 * len(english.replace(" ", ""))


def split_of(english: str) -> str:
    """Deterministic split from a hash of the English sentence."""
    bucket = int.from_bytes(hashlib.sha256(english.encode("utf-8")).digest()[:4], "big") % 1000
    return "dev" if bucket in DEV_BUCKETS else "test" if bucket in TEST_BUCKETS else "train"


def filtered_pairs(aligned: Iterator[tuple[str, str, str]]) -> tuple[list[tuple[str, str]], dict]:
    """Filters aligned pairs, keeping the first pair of each English sentence; returns counts."""
    pairs, seen, counts = [], set(), {"aligned": 0, "filtered": 0, "duplicate_english": 0}
    for _, english, other in aligned:
        counts["aligned"] += 1
        if not keep_pair(english, other):
            counts["filtered"] += 1
        elif english in seen:
            counts["duplicate_english"] += 1
        else:
            seen.add(english)
            pairs.append((english, other))
    counts["kept"] = len(pairs)
    return pairs, counts


class HelpFetchError(OSError):
    """The help packages could not be downloaded or unpacked."""


def _run(command: list[str], cwd: str) -> subprocess.CompletedProcess:
    """Runs a Debian tool; its absence (no apt-get or dpkg-deb here) is a `HelpFetchError` that
    says what to do instead."""
    try:
        return subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError:
        raise HelpFetchError(
            f"{command[0]} is not available on this machine (it downloads the LibreOffice help "
            f"packages); install the packages elsewhere and pass --help_dir with an unpacked "
            f"{INSTALLED_HELP}"
        ) from None


def fetch_help(cache_dir: str, language_package: str) -> str:
    """Downloads and unpacks the English and `language_package` help .debs; returns the root."""
    cache_dir = os.path.abspath(cache_dir)  # the tools run inside it
    os.makedirs(cache_dir, exist_ok=True)
    root = os.path.join(cache_dir, "unpacked")
    for package in ("libreoffice-help-en-us", f"libreoffice-help-{language_package}"):
        done = os.path.join(cache_dir, f"{package}.unpacked")
        if os.path.isfile(done):
            continue
        debs = [
            n for n in os.listdir(cache_dir) if n.startswith(package + "_") and n.endswith(".deb")
        ]
        if not debs:
            logging.info("apt-get download %s into %s", package, cache_dir)
            result = _run(["apt-get", "download", package], cache_dir)
            debs = [n for n in os.listdir(cache_dir) if n.startswith(package + "_")]
            if result.returncode or not debs:
                raise HelpFetchError(
                    f"apt-get download {package} failed ({result.stderr.strip()[-300:]}); "
                    f"install it, or pass --help_dir with an unpacked {INSTALLED_HELP}"
                )
        deb = os.path.join(cache_dir, sorted(debs)[-1])
        unpack = _run(["dpkg-deb", "-x", deb, root], cache_dir)
        if unpack.returncode:
            os.remove(deb)  # most likely a truncated download; the next run fetches it again
            raise HelpFetchError(
                f"dpkg-deb -x {deb} failed ({unpack.stderr.strip()[-300:]}); "
                "the file was removed, run datagen again"
            )
        open(done, "w").close()
    return os.path.join(root, INSTALLED_HELP.lstrip("/"))


class LibreOfficeHelpProblem(Problem):
    """English --> `target_language` sentence pairs from the LibreOffice help; shared BPE of
    `vocab_size` (option; by default sized from the training pairs)."""

    # The language pair, as every translation problem names it (model cards, sentence splitting).
    source_language: ClassVar[str] = "en"
    target_language: ClassVar[str] = ""
    package: ClassVar[str] = ""
    vocab_type: ClassVar[str] = "bpe"
    max_input_length: ClassVar[int] = 128
    max_target_length: ClassVar[int] = 128
    examples_per_shard: ClassVar[int] = 10_000
    default_options: ClassVar[dict[str, Any]] = {
        "raw_dir": "",
        "help_dir": "",
        "vocab_size": 0,
        "modules": "",
        "vocab_model": "",
    }
    option_help: ClassVar[dict[str, str]] = {
        "raw_dir": "Cache folder of the downloaded help .deb packages (default: data_dir/raw).",
        "help_dir": "An unpacked /usr/share/libreoffice/help tree, used instead of downloading.",
        "vocab_size": "Vocabulary size, reserved ids included; 0: sized from the training pairs "
        "(t2t_lite.data.vocab_builders.auto_vocab_size).",
        "modules": "Help modules to keep, joined with '+' (scalc+swriter), or '-scalc' for all "
        "but one (default: all). The dev/test split of a sentence does not depend on it.",
        "vocab_model": "An existing SentencePiece model to use as the vocabulary (fine-tuning "
        "with a parent run's vocabulary), instead of training one.",
    }

    def vocab_settings(self, options: dict[str, Any]) -> tuple[str, int]:
        return self.vocab_type, int(options["vocab_size"])

    def help_root(self, data_dir: str, options: dict[str, Any]) -> str:
        if options["help_dir"]:
            return options["help_dir"]
        if os.path.isdir(os.path.join(INSTALLED_HELP, self.target_language)) and os.path.isdir(
            os.path.join(INSTALLED_HELP, ENGLISH)
        ):
            return INSTALLED_HELP
        return fetch_help(options["raw_dir"] or os.path.join(data_dir, "raw"), self.package)

    def prepare(self, data_dir: str, options: dict[str, Any]) -> None:
        root = self.help_root(data_dir, options)
        self._pairs, counts = filtered_pairs(
            align_help(root, self.target_language, options["modules"])
        )
        by_split = {}
        for pair in self._pairs:
            by_split[split_of(pair[0])] = by_split.get(split_of(pair[0]), 0) + 1
        logging.info("%s: %s pairs, per split %s (from %s)", self.name, counts, by_split, root)
        self.raw_counts = {**counts, **{f"{k}_pairs": v for k, v in by_split.items()}}

    def text_pairs(self, split: str, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        return (pair for pair in self._pairs if split_of(pair[0]) == split)


@register_problem("translate_ende_lohelp")
class TranslateEnDeLoHelp(LibreOfficeHelpProblem):
    target_language = "de"
    package = "de"


@register_problem("translate_enfr_lohelp")
class TranslateEnFrLoHelp(LibreOfficeHelpProblem):
    target_language = "fr"
    package = "fr"
