"""`t2t-serve --export_dir=DIR`: a `t2t-export` SavedModel, everything through its signatures.

`serving_default` (n-best 1) and `nbest` translate, `attention` gives the attention maps, and
`assets.extra/t2t_export.json` tells the run's facts and the search settings fixed at export:
a request may ask for up to the exported n-best, but not for another beam size or alpha.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from t2t_lite.hparams import SearchSettings
from t2t_lite.problems import get_problem
from t2t_lite.serve.export import ATTENTION_SIGNATURE, EXPORT_INFO, NBEST_SIGNATURE
from t2t_lite.serve.web.backend import PARSING_METRIC, Capabilities, attention_json, translation


def resolve_version(export_dir: str) -> str:
    """`export_dir` itself when it holds saved_model.pb, else its newest numeric version
    folder; a FileNotFoundError names --export_dir when there is neither."""
    if os.path.isfile(os.path.join(export_dir, "saved_model.pb")):
        return export_dir
    if not os.path.isdir(export_dir):
        raise FileNotFoundError(f"--export_dir={export_dir} is not a folder")
    versions = [int(name) for name in os.listdir(export_dir) if name.isdigit()]
    for version in sorted(versions, reverse=True):
        path = os.path.join(export_dir, str(version))
        if os.path.isfile(os.path.join(path, "saved_model.pb")):
            return path
    raise FileNotFoundError(
        f"--export_dir={export_dir} holds neither saved_model.pb nor a version folder with one "
        "(t2t-export writes export_dir/<version>/)"
    )


def _strings(tensor: tf.Tensor) -> list:
    """A string tensor --> nested lists of Python str."""
    return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(tensor.numpy()).tolist()


class SavedModelBackend:
    """A SavedModel written by `t2t-export` behind `t2t-serve`; see `Backend`."""

    def __init__(self, export_dir: str):
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops the graph uses)

        self.path = resolve_version(export_dir)
        self.model = tf.saved_model.load(self.path)
        self.signatures = self.model.signatures
        with open(os.path.join(self.path, "assets.extra", EXPORT_INFO), encoding="utf-8") as f:
            info = json.load(f)
        known = {f.name for f in dataclasses.fields(SearchSettings)}  # exports of other versions
        exported = SearchSettings().override(
            **{k: v for k, v in info.get("settings", {}).items() if k in known}
        )
        self._facts = {**info, "source": "saved_model", "saved_model": os.path.abspath(self.path)}
        self.capabilities = Capabilities(
            defaults=exported.override(nbest=1),
            search_fixed=True,
            max_nbest=exported.nbest,
            attention=ATTENTION_SIGNATURE in self.signatures,
            parsing=self._metric(info) == PARSING_METRIC,
        )

    @staticmethod
    def _metric(info: dict[str, Any]) -> str | None:
        """The problem's metric as t2t-export stored it, or from the registry for an export
        written before it was stored."""
        if "metric" in info:
            return info["metric"]
        try:
            return get_problem(info.get("problem", "")).metric
        except KeyError:
            return None

    def facts(self) -> dict[str, Any]:
        return dict(self._facts)

    def translate(self, sentences: Sequence[str], settings: SearchSettings) -> list[dict]:
        inputs = tf.constant(list(sentences), tf.string)
        if settings.nbest == 1:
            found = self.signatures["serving_default"](inputs=inputs)
            outputs, scores = found["outputs"][:, None], found["scores"][:, None]
        else:
            found = self.signatures[NBEST_SIGNATURE](inputs=inputs)
            outputs = found["outputs"][:, : settings.nbest]
            scores = found["scores"][:, : settings.nbest]
        texts, scores = _strings(outputs), scores.numpy().tolist()
        results = []
        for i, sentence in enumerate(sentences):
            source = sentence.strip()
            hypotheses = list(zip(texts[i], scores[i], strict=True)) if source else []
            results.append(translation(source, bool(found["truncated"][i]), hypotheses))
        return results

    def attention(self, sentence: str, settings: SearchSettings) -> dict:
        found = self.signatures[ATTENTION_SIGNATURE](inputs=tf.constant([sentence]))
        s, t = int(found["source_length"][0]), int(found["target_length"][0])
        cut = {"encoder": (s, s), "decoder_self": (t, t), "decoder_cross": (t, s)}
        maps = {kind: found[kind][0, :, :, :q, :k].numpy() for kind, (q, k) in cut.items()}
        return attention_json(
            _strings(found["source_tokens"][0, :s]),
            _strings(found["target_tokens"][0, :t]),
            found["outputs"][0].numpy().decode("utf-8"),
            maps,
        )
