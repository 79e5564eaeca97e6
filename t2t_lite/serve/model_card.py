"""The model card every export carries: its README.md, in the Hugging Face Hub's form (YAML
front matter, then Markdown), so that someone else can pick the model up.

The front matter names the languages, the license (`t2t-export --license`), the tags, the
metrics and a `model-index` of the scores; the text says what data the model saw (the problem,
its input files and vocabulary with their SHA-256, the examples of each split), the model (the
hparams set, its parameters), its training (steps, minutes, the machines it trained on, from
the run folder's records), a table of scores (the run's own dev score from its end-of-run
choice, and each `t2t-export --score=SOURCE,REFERENCE` test set translated and scored with
BLEU and chrF), how to translate with it, and its known limits.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from t2t_lite.metrics.bleu import read_files
from t2t_lite.metrics.scores import corpus_scores
from t2t_lite.run.layout import BUDGET_FILE, CHOICE_FILE, FINAL_DIR, MACHINES_FILE

# The metrics of a test set's row.
CARD_METRICS = ("bleu", "chrf")


@dataclasses.dataclass(frozen=True)
class Scored:
    """A test set's scores: its name, its sentences, and BLEU and chrF (sacreBLEU)."""

    name: str
    sentences: int
    scores: dict[str, float]
    how: str  # what translated it


def score_test_sets(
    pairs: Sequence[tuple[str, str]], translate: Callable[[list[str]], list[str]], how: str
) -> list[Scored]:
    """Each (source file, reference file) translated by `translate` and scored."""
    scored = []
    for source, reference in pairs:
        lines, (references,) = read_files(source, [reference])
        found = corpus_scores(translate(lines), [references], CARD_METRICS)
        name = os.path.basename(source)
        scored.append(Scored(name, len(lines), {s.name: round(s.score, 2) for s in found}, how))
    return scored


def _read_json(path: str) -> dict:
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def run_record(output_dir: str, data_dir: str) -> dict[str, Any]:
    """What the run folder and its data directory say of the model's making: minutes spent,
    the machines, the end-of-run choice, the data's inputs, vocabulary and splits."""
    metadata = _read_json(os.path.join(data_dir, "metadata.json"))
    datagen = _read_json(os.path.join(data_dir, "datagen.json"))
    inputs = {}
    for option, entry in datagen.get("inputs", {}).items():
        files = entry.get("files") or {entry.get("path", option): entry}
        inputs.update({path: f.get("sha256", "") for path, f in files.items()})
    return {
        "minutes": _read_json(os.path.join(output_dir, BUDGET_FILE)).get("spent_minutes"),
        "machines": _read_json(os.path.join(output_dir, MACHINES_FILE)).get("machines", []),
        "choice": _read_json(os.path.join(output_dir, FINAL_DIR, CHOICE_FILE)),
        "inputs": inputs,
        "vocabulary": metadata.get("vocab", {}),
        "splits": {k: v.get("examples") for k, v in metadata.get("splits", {}).items()},
    }


def _yaml(value: Any, indent: int = 0) -> str:
    """A small YAML writer for the front matter: mappings, lists and JSON scalars (a JSON
    string, number or boolean is YAML too)."""
    pad = " " * indent
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{key}:\n{_yaml(item, indent + 2)}")
            else:
                lines.append(f"{pad}{key}: {json.dumps(item)}")
        return "\n".join(lines)
    lines = []
    for item in value:
        if isinstance(item, dict):
            body = _yaml(item, indent + 2)
            lines.append(f"{pad}- {body.lstrip()}")
        else:
            lines.append(f"{pad}- {json.dumps(item)}")
    return "\n".join(lines)


def _steps(step) -> str:
    if not isinstance(step, int):
        return f"training steps {step}"
    return f"{step:,} training step" + ("s" if step != 1 else "")


def front_matter(facts: dict[str, Any], scored: Sequence[Scored]) -> dict[str, Any]:
    """The Hub's metadata: language, license, tags, metrics and the model-index."""
    languages = [x for x in (facts.get("source_language"), facts.get("target_language")) if x]
    pair = "-".join(languages) or facts["problem"]
    results = [
        {
            "task": {"type": "translation", "name": f"Translation {pair}"},
            "dataset": {"name": s.name, "type": facts["problem"]},
            "metrics": [
                {"type": name, "value": value, "name": "BLEU" if name == "bleu" else "chrF"}
                for name, value in s.scores.items()
            ],
        }
        for s in scored
    ]
    meta: dict[str, Any] = {
        "language": languages,
        "license": facts["license"],
        "library_name": "t2t_lite",
        "tags": ["translation", "transformer", "t2t_lite", facts["format"]],
        "metrics": ["bleu", "chrf"],
    }
    if not languages:
        del meta["language"]
    if results:
        meta["model-index"] = [{"name": facts["name"], "results": results}]
    return meta


def card(facts: dict[str, Any], scored: Sequence[Scored], usage: str) -> str:
    """The README.md: front matter, then the model's data, model, training, scores, use and
    limits. `facts`: the export's (t2t_export.json) with `license`, `name`, `parameters`,
    `step`, the languages and `record` (`run_record`); `usage`: how to translate with it."""
    record = facts["record"]
    lines = ["---", _yaml(front_matter(facts, scored)), "---", "", f"# {facts['name']}", ""]
    lines += [
        f"A Transformer (Vaswani et al., 2017) trained with t2t_lite on the problem "
        f"`{facts['problem']}` and exported by `t2t-export --format={facts['format']}`.",
        "",
        "## Data",
        "",
        f"- problem: `{facts['problem']}`; examples per split: "
        + (", ".join(f"{k} {v:,}" for k, v in record["splits"].items() if v) or "not recorded"),
    ]
    for path, sha in record["inputs"].items():  # file names: a card travels without this machine
        lines.append(f"- input `{os.path.basename(path)}`, SHA-256 `{sha}`")
    vocabulary = record["vocabulary"]
    if vocabulary:
        lines.append(
            f"- vocabulary `{facts['vocabulary']}` ({vocabulary.get('type', '?')}, "
            f"{facts['vocab_size']:,} pieces), SHA-256 `{vocabulary.get('sha256', '?')}`"
        )
    machines = "; ".join(m["machine"] for m in record["machines"]) or "not recorded"
    minutes = f"{record['minutes']:.1f} minutes" if record["minutes"] else "minutes not recorded"
    lines += [
        "",
        "## Model and training",
        "",
        f"- hparams set `{facts['hparams_set']}`, {facts['parameters']:,} parameters",
        f"- {_steps(facts['step'])}, {minutes}; trained on: {machines}",
        f"- checkpoint `{os.path.basename(facts['checkpoint'])}`",
        "",
        "## Scores",
        "",
        "| test set | sentences | BLEU | chrF | translated by |",
        "|---|---:|---:|---:|---|",
    ]
    for s in scored:
        lines.append(
            f"| {s.name} | {s.sentences:,} | {s.scores['bleu']:.2f} | {s.scores['chrf']:.2f} "
            f"| {s.how} |"
        )
    if not scored:
        lines.append("| none: `t2t-export --score=SOURCE,REFERENCE` adds a test set | | | | |")
    choice = record["choice"]
    if choice.get("metric") in choice:  # the end-of-run choice of a budget run
        value = choice[choice["metric"]][choice["chosen"]]
        lines += [
            "",
            f"At the end of training the run kept its {choice['chosen']} weights: "
            f"{choice['metric']} {value:.4f} (greedy decoding of dev sentences for BLEU).",
        ]
    lines += ["", "## Use", "", usage.strip(), "", "## Limits", ""]
    if facts["format"] == "argos":  # argostranslate splits sentences but passes no length limit
        lines.append(
            f"- a sentence longer than {facts['max_positions'] - 1} pieces is refused by "
            "CTranslate2 (the model has no positions past it)"
        )
    else:
        lines.append(
            f"- inputs longer than {facts['max_input_length']} pieces (EOS included) are "
            "truncated and flagged; split long text into sentences (t2t-decode "
            "--input_format=document does)"
        )
    lines += [
        "- pieces the vocabulary lacks become its unknown piece; text in another script or "
        "language than the training data's is translated poorly",
        "- trained on one corpus: text of another domain scores lower than the table says",
    ]
    return "\n".join(lines) + "\n"
