"""Drives t2t-serve's page in headless Chromium: the browser test's steps, and the README's picture.

  python scripts/screenshot_serve.py --output_dir=demo_out/train --png=docs/t2t-serve.png
  python scripts/screenshot_serve.py --export_dir=demo_out/export --png=/tmp/page.png \\
      --sentence="Click the OK button to close the dialog."
  python scripts/screenshot_serve.py --output_dir=demo_out/train \\
      --png=docs/t2t-serve-document.png --document=page.md
  python scripts/screenshot_serve.py --output_dir=demo_out/train --png=docs/t2t-serve-terms.png \\
      --terms="Schaltfläche; Dialogfenster" --beam_size=8 \\
      --sentence="Click the OK button to close the dialog."

Starts the `t2t-serve` command of this Python environment on a free loopback port, opens the
page with Playwright in the system's Chromium (Debian's `chromium`; Playwright's own browser
download is never used), types the sentences, presses Translate, waits for the translations and
the attention, clicks a target token, and saves a screenshot of the whole page.
`tests/serve/test_web_browser.py` runs the same functions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

SENTENCES = ["Click the OK button to close the dialog."]
CHROMIUM_NAMES = ("chromium", "chromium-browser")


def find_chromium() -> str | None:
    """The system's Chromium executable, or None."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_command() -> list[str]:
    """`t2t-serve` of this environment (beside its Python), else the module."""
    script = os.path.join(os.path.dirname(sys.executable), "t2t-serve")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "t2t_lite.bin.t2t_serve"]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "api/info", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def serving(args: Sequence[str], log_path: str, timeout: float = 240.0) -> Iterator[str]:
    """Runs `t2t-serve ARGS` on a free loopback port until the block ends; yields its URL
    ("http://127.0.0.1:PORT/") once /api/info answers. Its output goes to `log_path`."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [*serve_command(), *args, "--host=127.0.0.1", f"--port={port}"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + timeout
        while not _ready(url):
            if process.poll() is not None or time.monotonic() > deadline:
                with open(log_path) as f:
                    tail = f.read()[-3000:]
                raise RuntimeError(f"t2t-serve did not start (exit {process.poll()}):\n{tail}")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def drive(page: Any, url: str, sentences: Sequence[str], token: int = 1) -> dict[str, Any]:
    """On the page at `url`: types the sentences, translates, waits for the first sentence's
    attention, clicks its target token number `token` (the last one if there are fewer).

    Returns what the page shows: translation (the first result's best), source and target
    token labels, cells (of the target x source heatmap), selected (the clicked token's label).
    """
    page.goto(url)
    page.wait_for_selector("#translate:enabled")
    page.fill("#sentences", "\n".join(sentences))
    page.click("#translate")
    page.wait_for_selector(".result .hyp-text")
    page.wait_for_selector("#target-tokens .target-token")
    targets = page.locator("#target-tokens .target-token")
    chosen = min(token, targets.count() - 1)
    targets.nth(chosen).click()
    page.wait_for_function(
        "i => document.querySelectorAll('#target-tokens .target-token')[i]"
        ".classList.contains('selected')",
        arg=chosen,
    )
    return {
        "translation": page.locator(".result .best .hyp-text").first.inner_text(),
        "source": page.locator("#source-weights .source-token").all_inner_texts(),
        "target": targets.all_inner_texts(),
        "cells": page.locator("#cross-heatmap rect.cell").count(),
        "selected": page.locator("#target-tokens .target-token.selected").inner_text(),
    }


def drive_guided(page: Any, url: str, sentences: Sequence[str], prefix: str, terms: str) -> dict:
    """On the page at `url`: types the sentences, a prefix and terms ("a; b"), asks for
    confidence and alignment, translates, and waits for the first result's details.

    Returns the first result's translation, confidence (the badge's text), tokens, the tokens
    marked as unlikely, and the alignment chips' titles (Pharaoh pairs)."""
    page.goto(url)
    page.wait_for_selector("#translate:enabled")
    page.fill("#sentences", "\n".join(sentences))
    page.fill("#prefix", prefix)
    page.fill("#terms", terms)
    page.check("#details")
    page.click("#translate")
    page.wait_for_selector(".result .details .confidence")
    first = page.locator(".result").first
    pairs = first.locator(".alignment .pair")
    return {
        "translation": first.locator(".best .hyp-text").inner_text(),
        "confidence": first.locator(".details .confidence").inner_text(),
        "tokens": first.locator(".details .probs .token").all_inner_texts(),
        "low": first.locator(".details .probs .token.low").all_inner_texts(),
        "pairs": [pairs.nth(i).get_attribute("title") for i in range(pairs.count())],
    }


def drive_document(page: Any, url: str, text: str) -> dict[str, Any]:
    """On the page at `url`: pastes `text` into the document form, translates it and waits for
    the stream's end. Returns the side-by-side rows ([[source, class], [target, class]] each),
    the status line and the whole translated document."""
    page.goto(url)
    page.wait_for_selector("#translate:not([disabled])")  # the page has its info
    page.fill("#document", text)
    page.click("#translate-document")
    page.wait_for_function(
        "document.querySelector('#document-status').textContent.startsWith('done')"
    )
    rows = page.eval_on_selector_all(
        "#document-pairs tbody tr",
        "rows => rows.map(r => [...r.cells].map(c => [c.textContent, c.className]))",
    )
    return {
        "rows": rows,
        "status": page.text_content("#document-status"),
        "document": page.get_attribute("#document-pairs", "data-document"),
    }


@contextlib.contextmanager
def browser_page(chromium: str, width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A page of headless Chromium (`chromium`: its executable) driven by Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def screenshot(
    url: str,
    sentences: Sequence[str],
    png: str,
    chromium: str,
    guides: tuple | None = None,
    document: str | None = None,
) -> dict[str, Any]:
    """`drive` the page at `url`, then save it whole as `png`; with `guides`, (prefix, terms),
    `drive_guided` and save the form and results only (the model's facts name local paths);
    with a `document`, `drive_document` and save the document form. Returns what the driving
    found."""
    with browser_page(chromium) as page:
        if document is not None:
            shown = drive_document(page, url, document)
            page.locator("#document-form").screenshot(path=png)
        elif guides:
            shown = drive_guided(page, url, sentences, *guides)
            page.locator("main .column").screenshot(path=png)
        else:
            shown = drive(page, url, sentences)
            page.screenshot(path=png, full_page=True)
    return shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--output_dir", help="a training run")
    model.add_argument("--export_dir", help="a t2t-export SavedModel")
    parser.add_argument("--png", required=True, help="where the screenshot goes")
    parser.add_argument("--sentence", action="append", help="repeatable; default: a demo one")
    parser.add_argument("--chromium", default=find_chromium(), help="Chromium's executable")
    parser.add_argument("--prefix", default="", help="a target prefix for every sentence")
    parser.add_argument("--terms", default="", help="target phrases, 'a; b', for every sentence")
    parser.add_argument("--beam_size", type=int, help="t2t-serve's default beam (the run's)")
    parser.add_argument("--document", help="a file to translate in the document form instead")
    args = parser.parse_args()
    if not args.chromium:
        sys.exit("screenshot_serve: no chromium on the PATH (apt-get install chromium)")
    model_flag = (
        f"--output_dir={args.output_dir}" if args.output_dir else f"--export_dir={args.export_dir}"
    )
    beam = [f"--beam_size={args.beam_size}"] if args.beam_size else []
    with serving([model_flag, *beam], args.png + ".serve.log") as url:
        guides = (args.prefix, args.terms) if args.prefix or args.terms else None
        document = open(args.document, encoding="utf-8").read() if args.document else None
        sentences = args.sentence or SENTENCES
        shown = screenshot(url, sentences, args.png, args.chromium, guides, document)
    os.remove(args.png + ".serve.log")
    print(json.dumps({"png": args.png, **shown}, ensure_ascii=False))


if __name__ == "__main__":
    main()
