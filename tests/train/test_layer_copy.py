"""A run of another depth than its parent (`t2t-train --init_from` of a student): the layers it
copies (maximally spaced, Shleifer & Rush 2020) and a copied model checked against one whose
layers were set by Keras' own get_weights/set_weights."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
from lora_helpers import HPARAMS, parent_run
from train_helpers import config as config_for

from t2t_lite.hparams import get_hparams
from t2t_lite.model import Transformer
from t2t_lite.problems import get_problem
from t2t_lite.run.checkpoints import resolve_checkpoint
from t2t_lite.train import init_from, layer_copy
from t2t_lite.train import loop as training

LAYERS = "num_encoder_layers={},num_decoder_layers={},norm_position=pre,dropout=0.0"


@pytest.mark.parametrize(
    "parent, student, expected",
    [
        (3, 1, [0]),
        (3, 3, [0, 1, 2]),
        (12, 3, [0, 6, 11]),
        (12, 6, [0, 2, 4, 7, 9, 11]),
        (6, 2, [0, 5]),
        (3, 6, [0, 0, 1, 1, 2, 2]),
        (1, 2, [0, 0]),
    ],
)
def test_spaced_layers(parent, student, expected):
    assert layer_copy.spaced_layers(parent, student) == expected


def test_parent_path_renames_the_layer_only():
    maps = {"encoder": [0, 0, 1], "decoder": [2]}
    assert layer_copy.parent_path("model/encoder/layer_2/ffn/bias", maps) == (
        "model/encoder/layer_1/ffn/bias"
    )
    assert layer_copy.parent_path("model/decoder/layer_0/x", maps) == "model/decoder/layer_2/x"
    assert layer_copy.parent_path("model/embedding/embeddings", maps) == (
        "model/embedding/embeddings"
    )


def _model(encoder: int, decoder: int, vocab_size: int) -> Transformer:
    hparams = get_hparams("transformer_tiny", LAYERS.format(encoder, decoder))
    model = Transformer.from_hparams(hparams, vocab_size, dtype="float32")
    model.build()
    return model


def _parent(tmp_path, encoder: int, decoder: int) -> tuple[Transformer, str, int]:
    """A random parent of `encoder` + `decoder` layers saved as a run; (model, checkpoint path,
    vocabulary size)."""
    data_dir, output_dir = parent_run(str(tmp_path), name="parent")
    vocab_size = get_problem("algorithmic_reverse").tokenizer(data_dir).vocab_size
    parent = _model(encoder, decoder, vocab_size)
    path = tf.train.Checkpoint(model=parent).write(str(tmp_path / "deep" / "ckpt"))
    return parent, path, vocab_size


def _logits(model: Transformer) -> np.ndarray:
    ids = np.array([[3, 5, 7, 4, 1, 0], [6, 6, 2, 1, 0, 0]], np.int32)
    return model({"inputs": ids, "targets": ids[:, ::-1].copy()}, training=False).numpy()


def test_a_shallower_student_equals_the_parents_layers_set_by_keras(tmp_path):
    parent, path, vocab_size = _parent(tmp_path, encoder=3, decoder=3)
    student = _model(2, 1, vocab_size)
    maps = init_from.check_shapes(student, path)
    assert maps == {"encoder": [0, 2], "decoder": [0]}
    layer_copy.copy_layers(student, path, init_from.model_variable_keys(path), maps)
    # The slow path: the same layers set one by one through Keras.
    reference = _model(2, 1, vocab_size)
    reference.embedding.set_weights(parent.embedding.get_weights())
    for mine, theirs in ((0, 0), (1, 2)):
        reference.encoder.blocks[mine].set_weights(parent.encoder.blocks[theirs].get_weights())
    reference.decoder.blocks[0].set_weights(parent.decoder.blocks[0].get_weights())
    for stack in ("encoder", "decoder"):
        final = getattr(parent, stack).final_norm.get_weights()
        getattr(reference, stack).final_norm.set_weights(final)
    np.testing.assert_array_equal(_logits(student), _logits(reference))
    assert not np.allclose(_logits(student), _logits(_model(2, 1, vocab_size)))


def test_same_depth_through_the_copy_equals_the_checkpoint_restore(tmp_path):
    parent, path, vocab_size = _parent(tmp_path, encoder=2, decoder=2)
    copied, restored = _model(2, 2, vocab_size), _model(2, 2, vocab_size)
    maps = init_from.check_shapes(copied, path)
    assert not layer_copy.changes_depth(maps)
    layer_copy.copy_layers(copied, path, init_from.model_variable_keys(path), maps)
    tf.train.Checkpoint(model=restored).read(path).assert_existing_objects_matched()
    np.testing.assert_array_equal(_logits(copied), _logits(restored))
    np.testing.assert_array_equal(_logits(copied), _logits(parent))


def test_other_widths_are_still_refused_with_the_layer_named(tmp_path):
    _, path, vocab_size = _parent(tmp_path, encoder=3, decoder=3)
    hparams = get_hparams("transformer_tiny", LAYERS.format(1, 1) + ",d_ff=96")
    wider = Transformer.from_hparams(hparams, vocab_size, dtype="float32")
    wider.build()
    with pytest.raises(ValueError, match=r"decoder/layer_0/feed_forward/hidden/_kernel \[.*"):
        init_from.check_shapes(wider, path)


def test_a_run_of_another_depth_starts_from_its_parent(tmp_path):
    """t2t-train --init_from through the training loop: a 1 + 2 student of a 1 + 1 parent run
    repeats the parent's decoder layer; with a learning rate of ~0, one step leaves both of the
    student's decoder layers as the parent's one."""
    data_dir, parent_dir = parent_run(str(tmp_path))
    hparams = get_hparams("transformer_tiny", HPARAMS + ",num_decoder_layers=2,learning_rate=1e-9")
    config = config_for(str(tmp_path / "student"), 1, 1, eval_every=10**6)
    config = dataclasses.replace(config, data_dir=data_dir, init_from=parent_dir)
    training.train(get_problem("algorithmic_reverse"), config, hparams, "transformer_tiny")
    parent = tf.train.load_checkpoint(resolve_checkpoint(parent_dir))
    student = tf.train.load_checkpoint(resolve_checkpoint(str(tmp_path / "student")))
    parent_keys = init_from.model_variable_keys(resolve_checkpoint(parent_dir))
    student_keys = init_from.model_variable_keys(resolve_checkpoint(str(tmp_path / "student")))
    theirs = "model/decoder/layer_0/feed_forward/hidden/_kernel"
    for layer in (0, 1):
        mine = f"model/decoder/layer_{layer}/feed_forward/hidden/_kernel"
        np.testing.assert_allclose(
            student.get_tensor(student_keys[mine]), parent.get_tensor(parent_keys[theirs]),
            atol=1e-6,
        )  # fmt: skip


def test_optimizer_state_and_adapters_need_the_parents_depth(tmp_path):
    from lora_helpers import adapter_run

    from t2t_lite.train.step import Trainer

    data_dir, parent_dir = parent_run(str(tmp_path))
    vocab = get_problem("algorithmic_reverse").tokenizer(data_dir).path
    deeper = get_hparams("transformer_tiny", HPARAMS + ",num_decoder_layers=2")
    trainer = Trainer(deeper, 11, tf.distribute.get_strategy())
    with pytest.raises(
        ValueError, match=r"--init_optimizer: the run in .* other numbers of layers"
    ):
        init_from.initialize_from(trainer, parent_dir, vocab, init_optimizer=True)
    with pytest.raises(ValueError, match=r"--lora_rank: the run in .* other numbers of layers"):
        adapter_run(data_dir, parent_dir, str(tmp_path / "adapter"), 2, 1, "num_decoder_layers=2")
