"""`t2t-serve --export_dir=DIR`: a `t2t-export` SavedModel, everything through its signatures.

`serving_default` (n-best 1) and `nbest` translate, `attention` gives the attention maps, and
`assets.extra/t2t_export.json` tells the run's facts and the search settings fixed at export:
a request may ask for up to the exported n-best, but not for another beam size or alpha.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from t2t_lite.decode.exported import (
    ATTENTION_SIGNATURE,
    GUIDED_SIGNATURE,
    ExportedTranslator,
    strings,
)
from t2t_lite.hparams import SearchSettings
from t2t_lite.problems import get_problem
from t2t_lite.search.controls import Controls
from t2t_lite.serve.web.backend import (
    PARSING_METRIC,
    Capabilities,
    attention_json,
    details_json,
    translation,
)


class SavedModelBackend:
    """A SavedModel written by `t2t-export` behind `t2t-serve`; see `Backend`."""

    def __init__(
        self,
        export_dir: str,
        model_name: str | None = None,
        version_labels: dict[str, str] | None = None,
    ):
        self.exported = ExportedTranslator(export_dir)
        self.version_labels = dict(version_labels or {})  # TF Serving's /labels/L: a version
        # TF Serving's model name (tf_serving.py): the folder of versions, as models.config has it
        folder = os.path.abspath(export_dir)
        if os.path.basename(folder).isdigit():
            folder = os.path.dirname(folder)
        self.model_name = model_name or os.path.basename(folder)
        self.path, self.signatures = self.exported.path, self.exported.signatures
        info = self.exported.info
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
            guided_nbest=1 if GUIDED_SIGNATURE in self.signatures else 0,
            controls_nbest=1 if self.exported.takes_controls else 0,
        )
        self._exported_controls = Controls.of(exported)

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

    def translate(
        self,
        sentences: Sequence[str],
        settings: SearchSettings,
        guides: Sequence[Any] | None = None,
        details: bool = False,
    ) -> list[dict]:
        controls = Controls.of(settings)
        if guides is not None or details or controls != self._exported_controls:
            return self._guided(sentences, guides, controls or Controls())
        texts, scores, truncated = self.exported.search(sentences, settings.nbest)
        results = []
        for i, sentence in enumerate(sentences):
            source = sentence.strip()
            hypotheses = list(zip(texts[i], scores[i], strict=True)) if source else []
            results.append(translation(source, truncated[i], hypotheses))
        return results

    def _guided(
        self, sentences: Sequence[str], guides: Sequence[Any] | None, controls: Controls
    ) -> list[dict]:
        """The best translations with their details, from the `guided` signature (with
        `controls` where it takes them)."""
        found = self.exported.guided(
            sentences, guides, controls if self.exported.takes_controls else None
        )
        results = []
        for i, sentence in enumerate(sentences):
            source = sentence.strip()
            hypotheses = []
            if source:
                labels = strings(found["tokens"][i])
                n = sum(1 for t in labels if t)
                about = details_json(
                    labels[:n],
                    found["token_probs"][i, :n].numpy(),
                    found["alignment"][i].numpy().decode("utf-8"),
                    float(found["confidence"][i]),
                )
                text = found["outputs"][i].numpy().decode("utf-8")
                hypotheses = [(text, float(found["scores"][i]), about)]
            results.append(translation(source, bool(found["truncated"][i]), hypotheses))
        return results

    def attention(self, sentence: str, settings: SearchSettings) -> dict:
        found = self.signatures[ATTENTION_SIGNATURE](inputs=tf.constant([sentence]))
        s, t = int(found["source_length"][0]), int(found["target_length"][0])
        cut = {"encoder": (s, s), "decoder_self": (t, t), "decoder_cross": (t, s)}
        maps = {kind: found[kind][0, :, :, :q, :k].numpy() for kind, (q, k) in cut.items()}
        return attention_json(
            strings(found["source_tokens"][0, :s]),
            strings(found["target_tokens"][0, :t]),
            found["outputs"][0].numpy().decode("utf-8"),
            maps,
        )
