"""Export for CTranslate2: a trained run --> a CTranslate2 model folder, with its vocabulary.

The conversion goes through CTranslate2's own specification API: `ctranslate2.specs`'
`TransformerSpec` (a `TransformerEncoderSpec` and a `TransformerDecoderSpec`) filled with the
model's weights, written by a `ctranslate2.converters.Converter`, which also quantizes
(`int8`, `int16`, `float32`, ... as CTranslate2's `--quantization`). What maps where:

  - embeddings: one matrix (or a source and a target one), scaled by sqrt(d_model) in both; the
    output projection is the target embedding (tied), without bias;
  - positions: the model's own table [max_positions, d_model] (either sinusoid layout, or a
    learned table), so CTranslate2 adds exactly what the model adds, from position 0 on both
    sides, and refuses positions past max_positions as the model does;
  - the decoder's start symbol is id 0, whose embedding is zero (`start_from_zero_embedding`);
  - attention: q, k, v kernels [d_model, heads, d_k] --> [heads * d_k, d_model] (self-attention
    fuses q, k and v, cross-attention k and v), output [heads, d_v, d_model] --> [d_model,
    heads * d_v]; no biases; the feed-forward's two Dense layers with biases, ReLU;
  - post-norm (the paper's) or pre-norm with a final layer norm in each stack; epsilon as trained;
  - source and target vocabularies: the run's pieces in id order ("<pad>", "<EOS>", "<unk>",
    ...); the source gets "<EOS>" appended (`add_source_eos`), decoding starts from "<pad>".

What CTranslate2 cannot represent is refused with a ValueError naming the setting: an output
vocabulary smaller than the vocabulary (parsing problems), d_k != d_v, a decoding constraint.
Searches differ in two rules (docs/serving.md): CTranslate2's length penalty divides by
length^alpha (GNMT's ((5 + length) / 6)^alpha here), and it never forbids id 0.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import types
from collections.abc import Callable
from typing import Any

import ctranslate2
import numpy as np
import sentencepiece
from absl import logging
from ctranslate2.specs import common_spec, model_spec, transformer_spec

from t2t_lite.data.shortlist import Shortlist
from t2t_lite.data.tokenizers import read_vocab_list
from t2t_lite.decode.details import alignment_layer
from t2t_lite.decode.exported import EXPORT_INFO
from t2t_lite.model.ensemble import Ensemble
from t2t_lite.run.run import Run
from t2t_lite.runtime import atomic_io
from t2t_lite.serve.versions import write_version
from t2t_lite.vocabulary import EOS_ID, PAD_ID, RESERVED_TOKENS, UNK_ID

QUANTIZATIONS = model_spec.ACCEPTED_MODEL_TYPES


def vocabulary_tokens(path: str) -> list[str]:
    """The pieces of a vocabulary file in id order: a SentencePiece model's (`.model`), or the
    lines of a WordPiece or words list."""
    if path.endswith(".model"):
        processor = sentencepiece.SentencePieceProcessor(model_file=path)
        return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    return read_vocab_list(path)


def refusal(run: Run) -> str | None:
    """Why CTranslate2 cannot hold this run's model and search, or None when it can."""
    model, hp = run.model, run.hparams
    if isinstance(model, Ensemble):
        return "--checkpoint names several checkpoints; convert one (t2t-avg-checkpoints averages)"
    if model.output_vocab_size and model.output_vocab_size != model.vocab_size:
        return (
            f"output_vocab_size={model.output_vocab_size} < vocab_size={model.vocab_size} (the "
            "problem's outputs are a prefix of the vocabulary); CTranslate2's target vocabulary "
            "is its embedding's"
        )
    if hp.key_dim != hp.value_dim:
        return f"hparams d_k={hp.key_dim} != d_v={hp.value_dim}; CTranslate2 has one head_dim"
    if hp.position_encoding not in ("sinusoid", "sinusoid_concat", "learned"):
        return f"hparams position_encoding={hp.position_encoding!r} is unknown to this converter"
    if run.search.constrained:
        return f"problem {run.problem.name} decodes constrained; pass --noconstrained"
    if run.quantize != "none":
        return f"--quantize={run.quantize}; CTranslate2 quantizes itself (--ct2_quantization)"
    return None


def _array(variable: Any) -> np.ndarray:
    return np.asarray(variable, dtype=np.float32)


def _projection(dense: Any) -> np.ndarray:
    """An EinsumDense kernel [d_model, heads, d] --> CTranslate2's weight [heads * d, d_model]."""
    kernel = _array(dense.kernel)
    return kernel.reshape(kernel.shape[0], -1).T


def _set_attention(spec: Any, attention: Any, norm: Any, self_attention: bool) -> None:
    """An attention layer's projections and its layer norm into a MultiHeadAttentionSpec."""
    q, k, v = (
        _projection(d) for d in (attention.query_dense, attention.key_dense, attention.value_dense)
    )
    if self_attention:
        spec.linear[0].weight = np.concatenate([q, k, v])
    else:
        spec.linear[0].weight = q
        spec.linear[1].weight = np.concatenate([k, v])
    output = _array(attention.output_dense.kernel)  # [heads, d_v, d_model]
    spec.linear[-1].weight = output.reshape(-1, output.shape[-1]).T
    _set_norm(spec.layer_norm, norm)


def _set_norm(spec: Any, norm: Any) -> None:
    spec.gamma, spec.beta = _array(norm.gamma), _array(norm.beta)


def _set_feed_forward(spec: Any, layer: Any) -> None:
    ffn = layer.feed_forward
    for linear, dense in ((spec.linear_0, ffn.hidden), (spec.linear_1, ffn.output_dense)):
        linear.weight, linear.bias = _array(dense.kernel).T, _array(dense.bias)
    _set_norm(spec.layer_norm, layer.feed_forward_norm)


def transformer_spec_of(model: Any, tokens: list[str]) -> transformer_spec.TransformerSpec:
    """A filled `TransformerSpec` of a `Transformer` whose vocabulary is `tokens` (id order)."""
    hp = types.SimpleNamespace(**model.get_config())  # the model's plain arguments
    pre_norm = hp.norm_position == "pre"
    head_dim = None if hp.key_dim * hp.num_heads == hp.d_model else hp.key_dim
    options = dict(pre_norm=pre_norm, activation=common_spec.Activation.RELU, head_dim=head_dim)
    encoder = transformer_spec.TransformerEncoderSpec(
        hp.num_encoder_layers, hp.num_heads, **options
    )
    # return_attention gives the attention the alignments of t2t-decode come from: one
    # layer's encoder-decoder attention averaged over all its heads (details.alignment_layer).
    decoder = transformer_spec.TransformerDecoderSpec(
        hp.num_decoder_layers,
        hp.num_heads,
        alignment_layer=alignment_layer(model),
        alignment_heads=hp.num_heads,
        **options,
    )
    source = _array(model.embedding.embeddings)
    target = source if hp.shared_embeddings else _array(model.target_embedding.embeddings)
    positions = _array(model.positions.table)  # [max_positions, d_model]
    encoder.embeddings[0].weight, encoder.position_encodings.encodings = source, positions
    decoder.embeddings.weight, decoder.position_encodings.encodings = target, positions
    decoder.projection.weight = target
    decoder.start_from_zero_embedding = True  # id 0 embeds to zeros, as in the model
    for spec, layer in zip(encoder.layer, model.encoder.blocks, strict=True):
        _set_attention(spec.self_attention, layer.self_attention, layer.self_attention_norm, True)
        _set_feed_forward(spec.ffn, layer)
    for spec, layer in zip(decoder.layer, model.decoder.blocks, strict=True):
        _set_attention(spec.self_attention, layer.self_attention, layer.self_attention_norm, True)
        _set_attention(spec.attention, layer.cross_attention, layer.cross_attention_norm, False)
        _set_feed_forward(spec.ffn, layer)
    if pre_norm:
        _set_norm(encoder.layer_norm, model.encoder.final_norm)
        _set_norm(decoder.layer_norm, model.decoder.final_norm)
    spec = transformer_spec.TransformerSpec(encoder, decoder)
    spec.config.layer_norm_epsilon = hp.layer_norm_epsilon
    spec.config.unk_token = tokens[UNK_ID]
    spec.config.bos_token = spec.config.decoder_start_token = tokens[PAD_ID]
    spec.config.eos_token = tokens[EOS_ID]
    spec.config.add_source_eos = True
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    return spec


class T2TLiteConverter(ctranslate2.converters.Converter):
    """CTranslate2's converter for a t2t_lite `Transformer` and its vocabulary's pieces."""

    def __init__(self, model: Any, tokens: list[str]):
        if len(tokens) != model.vocab_size:
            raise ValueError(f"{len(tokens)} vocabulary pieces for a model of {model.vocab_size}")
        if tuple(tokens[: len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
            raise ValueError(f"the vocabulary must begin with {RESERVED_TOKENS}, not {tokens[:3]}")
        self.model, self.tokens = model, tokens

    def _load(self) -> transformer_spec.TransformerSpec:
        return transformer_spec_of(self.model, self.tokens)


def check_quantization(quantization: str) -> None:
    if quantization not in QUANTIZATIONS:
        raise ValueError(
            f"--ct2_quantization={quantization!r} is not one of CTranslate2's {QUANTIZATIONS}"
        )


def export_run(
    run: Run,
    export_dir: str,
    version: int | None = None,
    quantization: str = "float32",
    card: Callable[[dict[str, Any], str], str] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Converts a restored run to `export_dir/<version>` (a CTranslate2 model folder: model.bin,
    config.json, the vocabularies, the run's vocabulary file, README.md and t2t_export.json),
    written whole or not at all (`write_version`). Returns the folder and the facts stored."""
    check_quantization(quantization)
    reason = refusal(run)
    if reason:
        raise ValueError(f"{run.output_dir} cannot be converted to CTranslate2: {reason}")
    vocab_file = run.tokenizer.path
    tokens = vocabulary_tokens(vocab_file)
    converter = T2TLiteConverter(run.model, tokens)
    info = {
        **run.describe(),
        "format": "ctranslate2",
        "quantization": quantization,
        "vocabulary": os.path.basename(vocab_file),
        "max_positions": run.hparams.max_positions,
    }
    for key in ("output_dir", "checkpoint", "data_dir"):
        info[key] = os.path.abspath(info[key])
    start = time.monotonic()

    def write(folder: str) -> None:
        with tempfile.TemporaryDirectory() as scratch:
            vmap = None
            if run.shortlist is not None:  # CTranslate2 copies it into the folder, vmap.txt
                vmap = os.path.join(scratch, "vmap.txt")
                atomic_io.write_text(vmap, vocabulary_map(tokens, run.shortlist))
            converter.convert(folder, vmap=vmap, quantization=quantization, force=True)
        os.chmod(folder, 0o755)
        shutil.copyfile(vocab_file, os.path.join(folder, info["vocabulary"]))
        atomic_io.write_json(os.path.join(folder, EXPORT_INFO), info)
        readme = card(info, usage(info)) if card else usage(info)  # the model card
        atomic_io.write_text(os.path.join(folder, "README.md"), readme)

    path = write_version(export_dir, version, write)
    logging.info("wrote the CTranslate2 model %s in %.1f s", path, time.monotonic() - start)
    return path, info


def vocabulary_map(tokens: list[str], table: Shortlist) -> str:
    """A shortlist as CTranslate2's vocabulary map (its `use_vmap`): a line per source piece,
    the piece, a tab and its target candidates separated by spaces, after a first line with
    an empty source, the candidates of every batch (the frequent pieces). CTranslate2 adds
    the unknown, start and end pieces itself."""
    lines = ["\t" + " ".join(tokens[i] for i in table.frequent)]
    for source in range(len(RESERVED_TOKENS), len(tokens)):
        found = [tokens[t] for t in table.translations[source] if t != PAD_ID]
        if found:
            lines.append(f"{tokens[source]}\t{' '.join(found)}")
    return "\n".join(lines) + "\n"


def usage(info: dict[str, Any]) -> str:
    """The README.md written beside a converted model: how to translate with it."""
    settings = info["settings"]
    beam, alpha, extra = settings["beam_size"], settings["alpha"], settings["extra_length"]
    patience = settings.get("patience", 0.0)
    # CTranslate2 also stops once beam_size * patience hypotheses have finished (default 1).
    patience = f"    patience={patience},  # t2t-export --patience\n" if patience else ""
    shortlisted = tuple(settings.get("shortlist", (0, 0))) != (0, 0)
    vmap = "    use_vmap=True,  # the shortlist of t2t-export --shortlist (vmap.txt)\n"
    vmap = vmap if shortlisted else ""
    tokenize = (
        'sp = sentencepiece.SentencePieceProcessor(model_file=f"{folder}/'
        f'{info["vocabulary"]}")\n'
        "pieces = [sp.encode(line.strip(), out_type=str) for line in lines]\n"
        if info["vocabulary"].endswith(".model")
        else "pieces = [line.split() for line in lines]  # tokenize as the run's vocabulary does\n"
    )
    detokenize = (
        "sp.decode(result.hypotheses[0])"
        if info["vocabulary"].endswith(".model")
        else '" ".join(result.hypotheses[0])'
    )
    return (
        f"# CTranslate2 model of the run {os.path.basename(info['output_dir'])}\n\n"
        f"Checkpoint {os.path.basename(info['checkpoint'])} (problem {info['problem']}, hparams "
        f"{info['hparams_set']}), weights {info['quantization']}. Converted by t2t-export "
        "--format=ctranslate2; docs/serving.md in t2t_lite tells how the searches compare.\n\n"
        "```python\nimport ctranslate2\nimport sentencepiece\n\n"
        'folder = "."  # this folder\n'
        'lines = ["Click the OK button to close the dialog."]\n'
        f"{tokenize}"
        'translator = ctranslate2.Translator(folder, device="cpu")\n'
        "longest = max(len(p) for p in pieces) + 1  # EOS included\n"
        "results = translator.translate_batch(\n"
        f"    pieces, beam_size={beam}, length_penalty={alpha},\n"
        f"{patience}"
        f"{vmap}"
        f"    max_input_length={info['max_positions']},\n"
        f"    max_decoding_length=min(longest + {extra}, {info['max_positions']}),\n"
        ")\n"
        f"print([{detokenize} for result in results])\n```\n"
    )
