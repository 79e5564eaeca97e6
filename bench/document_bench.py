"""Markup through translation, measured on the LibreOffice help's held-out paragraphs.

    python bench/document_bench.py --output_dir=RUN --help_dir=HELP [--json=out.json]

RUN is an English-German run of translate_ende_lohelp (`make demo` trains one); HELP holds the
help's en-US/ and de/ page trees (/usr/share/libreoffice/help, or the unpacked packages under
the data directory's raw/). The paragraphs are those of the problem's test split (the same
hash of the English text) whose English side has inline markup; a paragraph whose text holds
<, > or & is left out, since the pages escape those and the model was trained on plain text.

Each paragraph is translated three times: its plain text as a line (`Translator.translate`),
its plain text as a document (`Translator.translate_document`: sentences split), and its markup
as a document (markup put back by alignment). Printed: how many paragraphs keep every tag (the
same tags, well nested), and sacreBLEU of each against the German plain text, the marked-up
document's with its tags stripped.
"""

from __future__ import annotations

import argparse
import collections
import html
import html.parser
import json
import os
import re

from machine import cpu_name  # bench/machine.py, beside this script

from t2t_lite.problems.lohelp import _ID, _VOID, ENGLISH, _pages, keep_pair, split_of


class _MarkupParser(html.parser.HTMLParser):
    """{id: (inner markup, plain text)} of a page's par_id/hd_id elements."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: dict[str, tuple[str, str]] = {}
        self._open: list[tuple[str, str | None, list[str], list[str]]] = []

    def handle_starttag(self, tag, attrs):
        for _, element_id, markup, _ in self._open:
            if element_id:
                markup.append(self.get_starttag_text())
        if tag not in _VOID:
            element_id = dict(attrs).get("id") or ""
            self._open.append((tag, element_id if _ID.match(element_id) else None, [], []))

    def handle_endtag(self, tag):
        if not any(open_tag == tag for open_tag, _, _, _ in self._open):
            return
        while self._open:
            open_tag, element_id, markup, text = self._open.pop()
            if element_id:
                self.found[element_id] = (" ".join("".join(markup).split()),
                                          " ".join("".join(text).split()))  # fmt: skip
            for _, outer_id, outer_markup, _ in self._open:
                if outer_id:
                    outer_markup.append(f"</{open_tag}>")
            if open_tag == tag:
                return

    def handle_data(self, data):
        for _, element_id, markup, text in self._open:
            if element_id:
                markup.append(data)
                text.append(data)


def held_out(help_dir: str) -> list[tuple[str, str, str]]:
    """(English markup, English text, German text) of the test split's marked-up paragraphs."""
    found, seen = [], set()
    english_root, german_root = os.path.join(help_dir, ENGLISH), os.path.join(help_dir, "de")
    for page in _pages(english_root):
        german_page = os.path.join(german_root, page)
        if not os.path.isfile(german_page):
            continue
        parsed = []
        for path in (os.path.join(english_root, page), german_page):
            parser = _MarkupParser()
            with open(path, encoding="utf-8") as f:
                parser.feed(f.read())
            parsed.append(parser.found)
        for element_id, (markup, text) in parsed[0].items():
            if element_id not in parsed[1] or text in seen:
                continue
            german = parsed[1][element_id][1]
            if not keep_pair(text, german) or split_of(text) != "test":
                continue
            seen.add(text)
            if "<" in markup and not re.search(r"[<>&]", text):
                found.append((markup, text, german))
    return found


class _Tags(html.parser.HTMLParser):
    """A text's tags (in order) and plain text, and whether its tags nest."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags, self.text, self.stack, self.nested = [], [], [], True
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(self.get_starttag_text())
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(self.get_starttag_text())

    def handle_endtag(self, tag):
        self.tags.append(f"</{tag}>")
        self.nested &= bool(self.stack) and self.stack.pop() == tag

    def handle_data(self, data):
        self.text.append(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True, help="the run (translate_ende_lohelp)")
    parser.add_argument("--help_dir", required=True, help="folder of en-US/ and de/ pages")
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    import sacrebleu

    from t2t_lite.decode.translator import Translator

    pairs = held_out(args.help_dir)
    translator = Translator.from_run(args.output_dir, beam_size=args.beam_size)
    plain = translator.translate([text for _, text, _ in pairs])
    plain_documents = [translator.translate_document(text) for _, text, _ in pairs]
    marked = [translator.translate_document(markup) for markup, _, _ in pairs]
    kept = tags_in = tags_out = 0
    for (markup, _, _), out in zip(pairs, marked, strict=True):
        source, target = _Tags(markup), _Tags(out)
        same = collections.Counter(source.tags) == collections.Counter(target.tags)
        kept += same and target.nested and not target.stack
        tags_in += len(source.tags)
        tags_out += sum(
            (collections.Counter(source.tags) & collections.Counter(target.tags)).values()
        )
    stripped = [" ".join(html.unescape("".join(_Tags(out).text)).split()) for out in marked]
    references = [[german for _, _, german in pairs]]
    figures = {
        "cpu": cpu_name(),
        "paragraphs": len(pairs),
        "tags": tags_in,
        "paragraphs_with_every_tag_well_nested": kept,
        "tags_kept": tags_out,
        "bleu_plain_text": round(sacrebleu.corpus_bleu(plain, references).score, 2),
        "bleu_plain_document": round(sacrebleu.corpus_bleu(plain_documents, references).score, 2),
        "bleu_markup_stripped": round(sacrebleu.corpus_bleu(stripped, references).score, 2),
    }
    print(f"| CPU | {figures['cpu']} |")
    print(f"| held-out paragraphs with markup | {figures['paragraphs']} ({tags_in} tags) |")
    share = 100 * kept / max(len(pairs), 1)
    print(f"| paragraphs with every tag back, well nested | {kept} ({share:.1f} %) |")
    print(f"| tags back | {tags_out} ({100 * tags_out / max(tags_in, 1):.1f} %) |")
    print(f"| BLEU, the plain text as a line | {figures['bleu_plain_text']} |")
    print(f"| BLEU, the plain text as a document | {figures['bleu_plain_document']} |")
    print(f"| BLEU, the markup as a document, tags stripped | {figures['bleu_markup_stripped']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
