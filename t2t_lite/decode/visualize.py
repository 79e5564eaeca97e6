"""Attention pictures (as in the paper's appendix): every layer and head of encoder
self-attention, decoder self-attention and encoder-decoder attention, for one sentence.

Each (attention kind, layer) becomes one PNG with a heat map per head, rows the attending
positions and columns the attended ones, labelled with the tokens; `index.html` shows them all
on one self-contained page (the PNGs are embedded).
"""

from __future__ import annotations

import base64
import html
import os

import numpy as np

from t2t_lite.runtime import atomic_io, figures
from t2t_lite.vocabulary import EOS_ID

KINDS = {
    "encoder": "Encoder self-attention",
    "decoder_self": "Decoder self-attention",
    "decoder_cross": "Encoder-decoder attention",
}


def token_labels(tokenizer, ids: list[int]) -> list[str]:
    """One label per id: the piece's text, "</s>" for EOS."""
    return ["</s>" if i == EOS_ID else (tokenizer.decode_py([i]) or f"#{i}") for i in ids]


def sentence_attention(translator, sentence: str) -> dict:
    """Translates `sentence` with the translator's search and returns its attention maps:
    {"source": labels, "target": labels, "translation": str, kind: [layers x [heads, q, k]]}."""
    source = translator.encode([sentence], ["--inputs"])[0]
    if source is None:
        raise ValueError("--inputs is empty")
    found = translator.search_ids([source])
    output = [int(i) for i in found.ids.numpy()[0, 0] if i > 0]
    maps = translator.model.attention_maps(np.array([source]), np.array([output]))
    # float32 whatever the model computes in: matplotlib and JSON take no bfloat16.
    result = {kind: [np.asarray(w, np.float32)[0] for w in maps[kind]] for kind in KINDS}
    result["source"] = token_labels(translator.tokenizer, source)
    result["target"] = token_labels(translator.tokenizer, output)
    result["translation"] = translator.tokenizer.decode_py(output)
    return result


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend; `MissingExtraError` without the `viz`
    extra."""
    return figures.pyplot("drawing attention pictures")


def render_png(
    weights: np.ndarray, rows: list[str], columns: list[str], title: str, path: str
) -> None:
    """weights [heads, rows, columns] --> one PNG with a heat map per head."""
    plt = pyplot()
    heads = weights.shape[0]
    cols = min(heads, 4)
    grid_rows = -(-heads // cols)
    size = 0.28 * max(len(rows), len(columns)) + 1.5
    fig, axes = plt.subplots(
        grid_rows, cols, figsize=(cols * size, grid_rows * size), squeeze=False
    )
    for head, ax in enumerate(axes.flat):
        if head >= heads:
            ax.axis("off")
            continue
        ax.imshow(weights[head], cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_title(f"head {head}", fontsize=9)
        ax.set_xticks(range(len(columns)), columns, rotation=90, fontsize=7)
        ax.set_yticks(range(len(rows)), rows, fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    figures.write_png(fig, path, dpi=90)


def write_pictures(attention: dict, directory: str) -> list[str]:
    """All PNGs and index.html into `directory`; returns the PNG paths."""
    os.makedirs(directory, exist_ok=True)
    labels = {
        "encoder": ("source", "source"),
        "decoder_self": ("target", "target"),
        "decoder_cross": ("target", "source"),
    }
    sections, paths = [], []
    for kind, title in KINDS.items():
        rows, columns = (attention[side] for side in labels[kind])
        for layer, weights in enumerate(attention[kind]):
            path = os.path.join(directory, f"{kind}_layer{layer}.png")
            render_png(weights, rows, columns, f"{title}, layer {layer}", path)
            paths.append(path)
            with open(path, "rb") as f:
                data = base64.b64encode(f.read()).decode("ascii")
            sections.append(
                f"<h2>{html.escape(title)}, layer {layer}</h2>"
                f'<img src="data:image/png;base64,{data}" alt="{kind} {layer}">'
            )
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Attention</title></head>"
        "<body><h1>Attention</h1>"
        f"<p><b>Input:</b> {html.escape(' '.join(attention['source']))}</p>"
        f"<p><b>Output:</b> {html.escape(attention['translation'])}</p>"
        + "".join(sections)
        + "</body></html>\n"
    )
    atomic_io.write_text(os.path.join(directory, "index.html"), page)
    return paths
