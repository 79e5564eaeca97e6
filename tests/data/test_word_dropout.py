"""Word dropout (t2t_lite/data/word_dropout.py): the signature ids, the probabilities against
alpha / (alpha + c), the replacements of a stream of batches, and the training split of a
parsing problem with `hparams.word_dropout`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from command_helpers import command

from t2t_lite.data import load_tokenizer
from t2t_lite.data.tokenizers import WordTokenizer
from t2t_lite.data.word_dropout import drop_probabilities, dropout_transform, source_counts
from t2t_lite.hparams import get_hparams
from t2t_lite.problems import get_problem

TOKENS = ["<pad>", "<EOS>", "<unk>", "(S", ")S", "NN", "<unk:c_ing>", "<unk:C>", "running",
          "Anna", "dog"]  # fmt: skip


def test_each_token_read_as_an_unknown_word_gets_its_signatures_id(tmp_path):
    path = tmp_path / "vocab.words.txt"
    path.write_text("".join(f"{token}\n" for token in TOKENS))
    tokenizer = WordTokenizer(str(path))
    assert tokenizer.tokens() == TOKENS
    # running -> <unk:c_ing> (6), Anna -> <unk:C> (7); NN (<unk:A>), dog (<unk:c>) and the
    # brackets and reserved tokens (shape "o") have signatures not in the list: <unk> (2).
    assert tokenizer.signature_ids().tolist() == [2, 2, 2, 2, 2, 2, 2, 2, 6, 7, 2]


def test_probabilities_are_alpha_over_alpha_plus_the_count():
    counts = np.array([50, 9, 0, 7, 7, 7, 4, 4, 3, 1, 0])
    found = drop_probabilities(TOKENS, counts, alpha=0.5)
    # Reserved ids and signatures never; a word id seen c > 0 times 0.5 / (0.5 + c); "dog",
    # never in the sources, never. Brackets and tags count as words where the sources hold them.
    expected = [0, 0, 0, 0.5 / 7.5, 0.5 / 7.5, 0.5 / 7.5, 0, 0, 0.5 / 3.5, 0.5 / 1.5, 0]
    np.testing.assert_allclose(found, expected, rtol=1e-6)
    assert found.dtype == np.float32


def _batches(rows: int, seed: int = 0) -> tf.data.Dataset:
    rng = np.random.default_rng(seed)
    inputs = rng.integers(3, 11, size=(6, rows, 9)).astype(np.int32)
    inputs[:, :, -2:] = 0  # padding
    return tf.data.Dataset.from_tensor_slices({"inputs": inputs, "targets": inputs + 100})


def _run(ds: tf.data.Dataset) -> list[dict]:
    return [{k: v.numpy() for k, v in batch.items()} for batch in ds]


def test_a_stream_of_batches_reads_words_as_their_signatures_at_their_rates():
    signature_of = np.array([0, 1, 2, 2, 2, 7, 6, 7, 6, 7, 2], np.int32)
    original = _run(_batches(400))
    # Rate 1: every id with a probability is replaced; padding (id 0) never.
    everything = np.array([0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1], np.float32)
    for got, was in zip(_run(dropout_transform(signature_of, everything, 1)(_batches(400))),
                        original, strict=True):  # fmt: skip
        np.testing.assert_array_equal(got["inputs"], signature_of[was["inputs"]])
        np.testing.assert_array_equal(got["targets"], was["targets"])  # targets untouched
    # Rate 0.3 for id 8 only: about 30 % of its places, nothing else moves.
    rate = np.zeros(11, np.float32)
    rate[8] = 0.3
    stream = _run(dropout_transform(signature_of, rate, 5)(_batches(400)))
    inputs, before = (np.concatenate([b["inputs"] for b in s]) for s in (stream, original))
    moved = inputs != before
    assert (before[moved] == 8).all() and (inputs[moved] == 6).all()
    share, places = moved.sum() / (before == 8).sum(), (before == 8).sum()
    assert abs(share - 0.3) < 4 * np.sqrt(0.3 * 0.7 / places), (share, places)
    # The same seed the same words; another seed others. A stream resumed after two batches
    # (skip, as a resumed run does) continues with the same words.
    again = _run(dropout_transform(signature_of, rate, 5)(_batches(400)))
    other = _run(dropout_transform(signature_of, rate, 6)(_batches(400)))
    resumed = _run(dropout_transform(signature_of, rate, 5)(_batches(400)).skip(2))
    for a, b in zip(stream, again, strict=True):
        np.testing.assert_array_equal(a["inputs"], b["inputs"])
    assert any((a["inputs"] != b["inputs"]).any() for a, b in zip(stream, other, strict=True))
    for a, b in zip(stream[2:], resumed, strict=True):
        np.testing.assert_array_equal(a["inputs"], b["inputs"])


TREES = """(S (NP (NNP Anna)) (VP (VBZ likes) (NP (NNS dogs))) (. .))
(S (NP (NNP Anna)) (VP (VBZ likes) (NP (NNS cats))) (. .))
(S (NP (NNP Anna)) (VP (VBZ likes) (NP (NN running))) (. .))
(S (NP (PRP She)) (VP (VBZ likes) (NP (NNS birds))) (. .))
"""


def test_the_training_split_of_a_parsing_problem_drops_words_and_no_other(tmp_path):
    for split in ("train", "dev", "test"):
        (tmp_path / f"{split}.mrg").write_text(TREES)
    data_dir = str(tmp_path / "data")
    problem = get_problem("parsing_trees")
    # Sized from the trees: words seen 3 times (Anna, likes, .) get ids, the rest signatures.
    problem.generate_data(data_dir, **{f"{s}_trees": str(tmp_path / f"{s}.mrg") for s in
                                       ("train", "dev", "test")})  # fmt: skip
    tokenizer = load_tokenizer(data_dir)
    files = problem.split_files(data_dir, "train")
    counts = source_counts(files, tokenizer.vocab_size)
    ids = {t: i for i, t in enumerate(tokenizer.tokens())}
    assert counts[ids["Anna"]] == 3 and counts[ids["likes"]] == 4 and counts[ids["."]] == 4
    assert counts[ids["<unk:c_s>"]] == 3 and counts[1] == 4  # dogs, cats, birds; the EOS ids

    def sources(split: str, overrides: str) -> list[str]:
        hparams = get_hparams("transformer_tiny", overrides)
        ds = problem.make_dataset(data_dir, split, hparams, shuffle=False, repeat=False, seed=1)
        rows = [row for batch in ds for row in tokenizer.decode(batch["inputs"]).numpy()]
        return sorted(row.decode() for row in rows)

    read = ["<unk:C> likes <unk:c_s> .", "Anna likes <unk:c_ing> .", "Anna likes <unk:c_s> .",
            "Anna likes <unk:c_s> ."]  # fmt: skip
    assert sources("train", "word_dropout=0") == read
    # alpha 1e9: every word with an id is dropped (1e9 / (1e9 + c) rounds to 1 in float32):
    # Anna to <unk:C>; the signatures of "likes" (<unk:c_es>) and "." (<unk:o>) are not in
    # this vocabulary, so they are read as <unk>, as unknown words of their shapes would be.
    dropped = ["<unk:C> <unk> <unk:c_ing> <unk>"] + ["<unk:C> <unk> <unk:c_s> <unk>"] * 3
    assert sources("train", "word_dropout=1e9") == dropped
    assert sources("dev", "word_dropout=1e9") == read  # evaluation reads the words
    with pytest.raises(ValueError, match="word_dropout must be >= 0, got -1"):
        get_hparams("transformer_tiny", "word_dropout=-1")


def test_a_vocabulary_without_signatures_is_refused(tmp_path):
    data_dir = str(tmp_path / "data")
    problem = get_problem("algorithmic_reverse")
    problem.generate_data(data_dir, max_sequence_length=4, train_size=20, dev_size=4)
    hparams = get_hparams("transformer_tiny", "word_dropout=0.25")
    refusal = (
        "hparam word_dropout=0.25 reads dropped words as their signatures, which only a words "
        "vocabulary with signatures of unknown words has (the parsing problems'); "
        f"{data_dir}/vocab.words.txt has none: leave word_dropout at 0 for this problem"
    )
    with pytest.raises(ValueError) as raised:
        problem.make_dataset(data_dir, "train", hparams, shuffle=True, repeat=True)
    assert str(raised.value) == refusal
    # t2t-train says so in one line before it writes anything.
    out = tmp_path / "run"
    done = command("t2t_train", "--problem=algorithmic_reverse", f"--data_dir={data_dir}",
                   f"--output_dir={out}", "--hparams_set=transformer_tiny",
                   "--hparams=word_dropout=0.25", "--train_steps=1")  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.splitlines()[-1]
    assert last == f"t2t-train: error: --hparams_set/--hparams: {refusal}"
    assert not out.exists()
