"""Fine-tuning: a new run that starts from another run's weights (`t2t-train --init_from`).

The parent is a run directory (its newest checkpoint, averaged/ included) or a checkpoint path.
The new run must use the same vocabulary (the vocabulary files' SHA-256 must be equal) and an
hparams set whose variables have the parent's shapes; either mismatch is refused with the files
or the variables named. The numbers of encoder and decoder layers may differ from the parent's:
each layer then copies one of the parent's (`t2t_lite.train.layer_copy`), as a distilled student
starts from its teacher. The optimizer and the learning-rate schedule start afresh unless
`init_optimizer`, which also takes the parent's Adam moments and step count. With
`--lora_rank` the parent's weights become the frozen base of a LoRA adapter (`prepare_adapter`).
"""

from __future__ import annotations

import os
import tempfile

import tensorflow as tf
from absl import logging
from tensorflow.core.protobuf import trackable_object_graph_pb2

from t2t_lite.data import load_tokenizer
from t2t_lite.model import lora
from t2t_lite.run import adapter
from t2t_lite.run.checkpoints import resolve_checkpoint
from t2t_lite.run.layout import ADAPTER_FILE, LAST_CHECKPOINT_FILE, RUN_INFO_FILE
from t2t_lite.run.run_info import RunInfo
from t2t_lite.runtime.atomic_io import file_sha256
from t2t_lite.train import layer_copy
from t2t_lite.train.config import ConflictingRunError


def parent_run(init_from: str) -> tuple[str, str]:
    """(the parent's run directory, its checkpoint path) for a run dir or a checkpoint path."""
    if os.path.isfile(os.path.join(init_from, RUN_INFO_FILE)):
        return init_from, resolve_checkpoint(init_from)
    path = resolve_checkpoint("", init_from)
    directory = os.path.dirname(os.path.abspath(path))
    while not os.path.isfile(os.path.join(directory, RUN_INFO_FILE)):
        parent = os.path.dirname(directory)
        if parent == directory:
            raise FileNotFoundError(
                f"--init_from={init_from}: no {RUN_INFO_FILE} beside or above {path}, so its "
                "vocabulary cannot be checked"
            )
        directory = parent
    return directory, path


def check_vocabulary(parent_dir: str, parent_vocab: str, vocab: str) -> None:
    """Refuses a fine-tuning run whose vocabulary file differs from its parent's."""
    if file_sha256(parent_vocab) != file_sha256(vocab):
        raise ValueError(
            f"--init_from: the run in {parent_dir} was trained with the vocabulary {parent_vocab}, "
            f"which differs from {vocab} (SHA-256); make the new data with the parent's vocabulary "
            "(text2text: --problem_options=vocab_model=PARENT_DATA_DIR/vocab.bpe.model)"
        )


def model_variable_keys(path: str) -> dict[str, str]:
    """Object path under "model" (e.g. model/encoder/layer_0/.../kernel) --> checkpoint key of
    each variable in a checkpoint, read from its object graph: a variable's key depends on which
    object reached it first (the optimizer may), its path from the model does not."""
    return _variable_keys(tf.train.load_checkpoint(path))


def _variable_keys(reader) -> dict[str, str]:
    """`model_variable_keys` of an open checkpoint reader."""
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    root = [c.node_id for c in graph.nodes[0].children if c.local_name == "model"]
    stack, seen, found = [(node, "model") for node in root], set(), {}
    while stack:
        node_id, name = stack.pop()
        if node_id in seen:
            continue
        seen.add(node_id)
        node = graph.nodes[node_id]
        for attribute in node.attributes:
            if attribute.name == "VARIABLE_VALUE":
                found[name] = attribute.checkpoint_key
        stack += [(child.node_id, f"{name}/{child.local_name}") for child in node.children]
    return found


def model_variable_shapes(path: str) -> dict[str, list[int]]:
    """Object path under "model" --> shape of each variable in a checkpoint."""
    reader = tf.train.load_checkpoint(path)
    shapes = reader.get_variable_to_shape_map()
    return {name: shapes.get(key) for name, key in _variable_keys(reader).items()}


def check_shapes(model: tf.Module, path: str) -> dict[str, list[int]]:
    """Refuses a parent checkpoint whose model variables are missing or differ in shape from
    `model`'s, naming them (the first ten); returns the parent's layer each layer of `model`
    takes (`layer_copy.layer_maps`: the same one unless the depths differ)."""
    with tempfile.TemporaryDirectory() as directory:
        mine = tf.train.Checkpoint(model=model).write(os.path.join(directory, "ckpt"))
        wanted = model_variable_shapes(mine)
    found = model_variable_shapes(path)
    maps = layer_copy.layer_maps(found, wanted)
    bad = []
    for name, shape in sorted(wanted.items()):
        theirs = layer_copy.parent_path(name, maps)
        if found.get(theirs) != shape:
            shown = name if theirs == name else f"{name} (from {theirs})"
            bad.append(f"{shown} {shape} (the parent's: {found.get(theirs, 'none')})")
    if bad:
        raise ValueError(
            f"--init_from={path}: {len(bad)} variables of this hparams set do not match the "
            f"parent's: " + "; ".join(bad[:10])
        )
    return maps


def initialize_from(trainer, init_from: str, vocab: str, init_optimizer: bool = False) -> str:
    """Loads the parent's weights (and optimizer state if `init_optimizer`) into `trainer`,
    whose model's vocabulary file is `vocab`; returns the parent's checkpoint path."""
    parent_dir, path = parent_run(init_from)
    parent_vocab = load_tokenizer(RunInfo.load(parent_dir).data_dir).path
    check_vocabulary(parent_dir, parent_vocab, vocab)
    maps = check_shapes(trainer.model, path)
    if layer_copy.changes_depth(maps):
        keys = model_variable_keys(path)
        if init_optimizer:
            raise ValueError(
                f"--init_optimizer: the run in {parent_dir} has other numbers of layers "
                f"({layer_copy.describe(maps, keys)}), so its optimizer state does not fit "
                "this model; drop --init_optimizer"
            )
        layer_copy.copy_layers(trainer.model, path, keys, maps)
        logging.info("initialized from %s: %s", path, layer_copy.describe(maps, keys))
        return path
    parts = {"model": trainer.model}
    if init_optimizer:
        parts["optimizer"] = trainer.optimizer
    tf.train.Checkpoint(**parts).restore(path).expect_partial().assert_existing_objects_matched()
    logging.info(
        "initialized from %s (%s)", path, "weights and optimizer" if init_optimizer else "weights"
    )
    return path


def prepare_adapter(model: tf.Module, config, vocab: str, chief: bool = True) -> None:
    """An adapter run (`--lora_rank`): loads the parent's weights into the built `model` as its
    frozen base and enables LoRA on it, before the optimizer sees its trainable weights.

    A new run takes the parent of `config.init_from` (vocabulary and shapes checked as for any
    fine-tuning) and records it in output_dir/adapter.json (`AdapterRecord`); a resumed run
    takes the recorded parent again and refuses other base weights, naming both hashes, or
    another rank.
    """
    if adapter.is_adapter_run(config.output_dir):
        record = adapter.AdapterRecord.load(config.output_dir, model.d_model)
        if record.rank != config.lora_rank:
            raise ConflictingRunError(
                f"--lora_rank={config.lora_rank}: the adapter run in {config.output_dir} has "
                f"rank {record.rank}; pass --lora_rank={record.rank} or a new --output_dir"
            )
        base = adapter.restore_base(model, record)
        adapter.check_base(model, record, config.output_dir, base)
        lora.enable(model, record.rank, record.alpha)
        return
    if os.path.exists(os.path.join(config.output_dir, LAST_CHECKPOINT_FILE)):
        raise ConflictingRunError(
            f"--lora_rank={config.lora_rank}: {config.output_dir} holds a run that is not an "
            f"adapter (no {ADAPTER_FILE}); train the adapter in a new --output_dir"
        )
    parent_dir, path = parent_run(config.init_from)
    parent_vocab = load_tokenizer(RunInfo.load(parent_dir).data_dir).path
    check_vocabulary(parent_dir, parent_vocab, vocab)
    maps = check_shapes(model, path)
    if layer_copy.changes_depth(maps):
        raise ValueError(
            f"--lora_rank: the run in {parent_dir} has other numbers of layers "
            f"({layer_copy.describe(maps, model_variable_keys(path))}); an adapter keeps its "
            "parent's model, so train it with the parent's hparams set"
        )
    tf.train.Checkpoint(model=model).restore(
        path
    ).expect_partial().assert_existing_objects_matched()
    sha256 = lora.weights_sha256(model)
    lora.enable(model, config.lora_rank)
    record = adapter.AdapterRecord(
        rank=config.lora_rank,
        alpha=float(config.lora_rank),
        parent_dir=os.path.abspath(parent_dir),
        parent_checkpoint=os.path.abspath(path),
        parent_sha256=sha256,
        trainable_weights=lora.adapter_size(model, config.lora_rank),
    )
    if chief:
        os.makedirs(config.output_dir, exist_ok=True)
        record.save(config.output_dir)
    logging.info(
        "LoRA adapter of rank %d over %s (weights sha256 %s): %d trainable weights",
        record.rank, path, sha256[:16], record.trainable_weights,
    )  # fmt: skip
