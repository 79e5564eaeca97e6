"""t2t-serve in a real browser: the `t2t-serve` command runs as a subprocess on a tiny model and
headless Chromium (Debian's `chromium`, driven by Playwright) uses the page as a person would.

The steps are those of scripts/screenshot_serve.py, which makes the README's picture. Without
Chromium the tests skip, except under CI (CI=true), where .ci/run installs it and they fail.
"""

from __future__ import annotations

import os
import sys

import pytest
import serve_helpers

from t2t_lite.decode.guidance import Guide
from t2t_lite.decode.translator import Translator
from t2t_lite.decode.visualize import sentence_attention
from t2t_lite.run.run import Run

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import screenshot_serve  # noqa: E402

SENTENCE = "we saw the small boxes here"


@pytest.fixture(scope="module")
def chromium() -> str:
    path = screenshot_serve.find_chromium()
    missing = None if path else "no chromium on the PATH (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = "playwright is not installed (pip install -e '.[test]')"
    if missing and os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"CI: {missing}; .ci/run installs it")
    if missing:
        pytest.skip(missing)
    return path


@pytest.fixture(scope="module")
def text_server(chromium, tmp_path_factory):
    """One text run (serve_helpers.text_run) and one `t2t-serve` over it for the tests of the
    text pages, which only read them: (output_dir, the server's URL)."""
    root = tmp_path_factory.mktemp("text_server")
    output_dir = serve_helpers.text_run(root)
    with screenshot_serve.serving([f"--output_dir={output_dir}"], str(root / "log")) as url:
        yield output_dir, url


def test_translate_click_a_target_token_and_ask_for_terms(chromium, text_server, tmp_path):
    output_dir, url = text_server
    png, terms_png = str(tmp_path / "t2t-serve.png"), str(tmp_path / "terms.png")
    guides = ("we", "red box; doors")
    shown = screenshot_serve.screenshot(url, [SENTENCE], png, chromium)
    guided = screenshot_serve.screenshot(url, [SENTENCE], terms_png, chromium, guides)
    # The page searches with the run's defaults; its attention is that of the best translation.
    reference = sentence_attention(Translator.from_run(Run.restore(output_dir)), SENTENCE)
    assert shown["source"] == reference["source"]
    assert shown["target"] == reference["target"]
    assert shown["translation"] == reference["translation"]
    assert shown["cells"] == len(reference["source"]) * len(reference["target"]) > 0
    assert shown["selected"] == reference["target"][min(1, len(reference["target"]) - 1)]
    assert os.path.getsize(png) > 10_000
    # With a prefix and terms: the translation, confidence, marked tokens and alignment of
    # the Translator with the same guide.
    translator = Translator.from_run(Run.restore(output_dir))
    (hyp,) = translator.hypotheses(
        [SENTENCE], guides=[Guide("we", ("red box", "doors"))], details=True
    )[0]
    assert guided["translation"] == hyp.text and hyp.text.startswith("we")
    assert "red box" in hyp.text and "doors" in hyp.text
    assert guided["confidence"] == f"confidence {hyp.details.confidence:.2f}"
    assert guided["tokens"] == list(hyp.details.tokens)
    probs = zip(hyp.details.tokens, hyp.details.token_probs, strict=True)
    assert guided["low"] == [t for t, p in probs if p < 0.5]
    assert guided["pairs"] == hyp.details.alignment.split()
    assert os.path.getsize(terms_png) > 10_000


def test_parse_tree_and_gold_tree_score(chromium, tmp_path):
    output_dir = serve_helpers.parsing_run(tmp_path)
    words = "We saw the red box .".split()
    with screenshot_serve.serving([f"--output_dir={output_dir}"], str(tmp_path / "log")) as url:
        with screenshot_serve.browser_page(chromium) as page:
            page.goto(url)
            page.wait_for_selector("#translate:enabled")
            page.fill("#sentences", " ".join(words))
            page.click("#translate")
            page.wait_for_selector(".result .tree svg")
            drawn = page.locator(".result .tree svg text.word").all_text_contents()
            page.click(".result details.gold summary")
            page.fill(".result .gold-input", serve_helpers.GOLD_TREES[0])
            page.click(".result details.gold button")
            page.wait_for_selector(".result .evalb:has-text('F1')")
            score = page.locator(".result .evalb").inner_text()
            gold_words = page.locator(".result details.gold .tree text.word").all_text_contents()
            page.fill(".result .gold-input", "(S (NP")
            page.click(".result details.gold button")
            page.wait_for_selector(".result .evalb .error")
            error = page.locator(".result .evalb .error").inner_text()
            page.fill("#beam_size", "0")  # an error shown in place, the field outlined
            page.click("#translate")
            page.wait_for_selector("#error:visible")
            form_error = page.locator("#error").inner_text()
            page.wait_for_selector("#beam_size.invalid", timeout=10_000)
            # A later answer in another box (the attention of the earlier result) keeps the mark.
            page.click(".result .show-attention")
            page.wait_for_selector("#attention-status:empty", state="attached")
            page.wait_for_selector("#attention-error", state="hidden")
            outlined = page.locator("#beam_size.invalid").count()
            page.screenshot(path=str(tmp_path / "parsing.png"), full_page=True)
    assert drawn == words  # the tree's leaves, left to right
    assert gold_words == words
    assert score.startswith("F1 ") and "precision" in score
    assert error.startswith("gold is not one bracketed tree")
    assert form_error == "beam_size must be in [1, 21], got 0" and outlined == 1


def test_scores_scale_sampling_and_offline_api_pages(chromium, text_server):
    output_dir, url = text_server
    sampling = "temperature:1.5,seed:3"
    with screenshot_serve.browser_page(chromium) as page:
        outside = []  # scripts, styles and data from elsewhere: none (no CDN); ReDoc's
        local = (url, "blob:", "data:")  # "powered by" logo is an image and may fail
        kinds = ("document", "script", "stylesheet", "fetch", "xhr", "font")
        page.on(
            "request",
            lambda r: (
                r.url.startswith(local) or r.resource_type not in kinds or outside.append(r.url)
            ),
        )
        page.goto(url)
        page.wait_for_selector("#translate:enabled")
        page.fill("#sentences", SENTENCE)
        page.click("#translate")
        page.wait_for_selector(".result .best .score")
        score = page.locator(".result .best .score").inner_text()
        page.wait_for_selector("#cross-heatmap svg .scale")
        scale = page.locator("#cross-heatmap svg .scale text").all_text_contents()
        page.check("#sample")
        page.fill("#sampling", sampling)
        page.click("#translate")
        page.wait_for_selector(".result .best .score:has-text('log p')")
        sampled = page.locator(".result .best .hyp-text").inner_text()
        page.goto(f"{url}docs")  # url ends with "/"
        page.wait_for_selector(".swagger-ui .opblock", timeout=30_000)
        operations = page.locator(".swagger-ui .opblock-summary-path").all_text_contents()
        page.goto(f"{url}redoc")
        page.wait_for_selector("redoc [role=menuitem], .menu-content", timeout=30_000)
    assert score.startswith("score ") and float(score.split()[1]) < 0
    assert scale == ["0", "0.5", "1", "attention weight"]
    expected = Translator.from_run(output_dir, sampling=True, temperature=1.5, seed=3)
    assert sampled == expected.translate([SENTENCE])[0]
    assert "/api/translate" in "".join(operations)
    assert outside == [], outside


def test_a_document_side_by_side_as_it_streams(chromium, text_server, tmp_path):
    """The document panel: paragraphs side by side, filled from the server-sent events, the
    end what Translator.translate_document gives."""
    output_dir, url = text_server
    document = "we saw <b>the box</b>. the red door.\n\n- we took {name} here\n"
    png = str(tmp_path / "document.png")
    shown = screenshot_serve.screenshot(url, [], png, chromium, document=document)
    assert os.path.getsize(png) > 5_000
    expected = Translator.from_run(output_dir).translate_document(document)
    assert shown["document"] == expected
    paragraphs = expected.rstrip("\n").split("\n\n")
    assert shown["rows"] == [
        [["we saw <b>the box</b>. the red door.", ""], [paragraphs[0], "done"]],
        [["we took {name} here", ""], [paragraphs[1].removeprefix("- "), "done"]],
    ]
    assert shown["status"] == "done: 3 sentences"


@pytest.mark.parametrize("alpha", ["0", "1.2"])  # one beam is greedy search at any alpha
def test_one_greedy_sentence_streams_its_tokens(chromium, text_server, alpha):
    """Beam size 1 for one sentence: the page asks /api/translate_stream (not /api/translate),
    fills the translation in from its events, and ends with what Translator.translate gives
    and the attention view of it."""
    output_dir, url = text_server
    with screenshot_serve.browser_page(chromium) as page:
        asked = []
        page.on("request", lambda request: asked.append(request.url.removeprefix(url)))
        page.goto(url)
        page.wait_for_selector("#translate:enabled")
        page.fill("#sentences", SENTENCE)
        page.fill("#beam_size", "1")
        page.fill("#alpha", alpha)
        page.fill("#nbest", "1")
        page.click("#translate")
        page.wait_for_selector("#target-tokens .target-token")
        shown = page.locator(".result .best .hyp-text").first.inner_text()
    greedy = Translator.from_run(output_dir, beam_size=1, alpha=float(alpha))
    expected = greedy.translate([SENTENCE])[0]
    assert shown == expected
    assert "api/translate_stream" in asked and "api/translate" not in asked


def test_the_pages_patience_reaches_both_searches(chromium, text_server):
    """The patience field starts at the server's default (0) and is sent, with the beam and
    alpha beside it, by the sentence form and the document panel; the best translation shown
    is the Translator's at that patience."""
    output_dir, url = text_server
    with screenshot_serve.browser_page(chromium) as page:
        bodies = {}  # the first POST body to each route

        def keep(request):
            if request.method == "POST":
                bodies.setdefault(request.url.removeprefix(url), request.post_data_json)

        page.on("request", keep)
        page.goto(url)
        page.wait_for_selector("#translate:enabled")
        initial = page.input_value("#patience")
        page.fill("#sentences", SENTENCE)
        page.fill("#beam_size", "3")
        page.fill("#alpha", "1.2")
        page.fill("#patience", "1")
        page.fill("#nbest", "1")
        page.click("#translate")
        page.wait_for_selector(".result .best .hyp-text")
        shown = page.locator(".result .best .hyp-text").first.inner_text()
        page.fill("#document", SENTENCE)
        page.click("#translate-document")
        page.wait_for_selector("#document-status:has-text('done')")
    assert initial == "0"
    sent = bodies["api/translate"]
    assert (sent["beam_size"], sent["alpha"], sent["patience"]) == (3, 1.2, 1)
    assert bodies["api/document"]["patience"] == 1 and bodies["api/document"]["beam_size"] == 3
    searched = Translator.from_run(output_dir, beam_size=3, alpha=1.2, patience=1.0)
    assert shown == searched.translate([SENTENCE])[0]
