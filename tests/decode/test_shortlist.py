"""The vocabulary shortlist (t2t_lite.data.shortlist): its table against a NumPy count of the
pairs, a batch's columns against a set union, the shortlisted search against the full search
(every id listed: the same hypotheses) and against the full search with the other ids masked
(the slow path), and --shortlist through t2t-decode and t2t-export."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import tensorflow as tf
from command_helpers import command
from decoding_helpers import random_inputs, tiny_model

from t2t_lite.data import shortlist
from t2t_lite.decode import transformer_step
from t2t_lite.hparams.search_settings import SearchSettings, parse_shortlist
from t2t_lite.model.layers import SharedEmbedding, int8_product
from t2t_lite.search import beam as search

VOCAB = 40


def _dice_reference(pairs, vocab):
    """Dice of every (source, target) id pair by plain counting."""
    pair_sets = [(set(s), set(t)) for s, t in pairs]
    count_s = {i: sum(i in s for s, _ in pair_sets) for i in range(vocab)}
    count_t = {i: sum(i in t for _, t in pair_sets) for i in range(vocab)}
    dice = {}
    for s, t in itertools.product(range(vocab), repeat=2):
        both = sum(s in a and t in b for a, b in pair_sets)
        if both:
            dice[s, t] = (2 * both / (count_s[s] + count_t[t]), both)
    return dice, count_t


def test_table_ranks_translations_by_dice_as_counted():
    rng = np.random.default_rng(0)
    pairs = [
        (rng.integers(3, 12, rng.integers(1, 6)), rng.integers(3, 12, rng.integers(1, 6)))
        for _ in range(60)
    ]
    table = shortlist.build(pairs, 12, 12, keep_per_source=4)
    dice, count_t = _dice_reference(pairs, 12)
    for source in range(12):
        found = sorted(
            ((-d, -both, t) for (s, t), (d, both) in dice.items() if s == source),
        )[:4]
        expected = [t for _, _, t in found] + [0] * (4 - len(found))
        assert table.translations[source].tolist() == expected, source
    by_count = sorted((-c, t) for t, c in count_t.items() if c)
    assert table.frequent.tolist() == [t for _, t in by_count]


def test_each_digit_translates_first_to_itself_in_reversal_data(tmp_path):
    """algorithmic_reverse: a digit is in the target exactly when it is in the source, so its
    Dice with itself is 1 and with any other digit less."""
    from t2t_lite.problems import get_problem

    problem = get_problem("algorithmic_reverse")
    problem.generate_data(str(tmp_path), max_sequence_length=6, train_size=500, dev_size=20)
    tokenizer = problem.tokenizer(str(tmp_path))
    files = problem.split_files(str(tmp_path), "train")
    table = shortlist.load_or_build(str(tmp_path), files, tokenizer.path, 13)
    assert table.translations[3:13, 0].tolist() == list(range(3, 13))
    assert sorted(table.frequent.tolist()) == [1, *range(3, 13)]  # EOS and the ten digits
    stored = tmp_path / shortlist.FILE
    assert stored.exists()
    before = stored.stat().st_mtime_ns
    again = shortlist.load_or_build(str(tmp_path), files, tokenizer.path, 13)
    np.testing.assert_array_equal(again.translations, table.translations)
    assert stored.stat().st_mtime_ns == before  # read back, not built again


def test_columns_are_the_sorted_union():
    rng = np.random.default_rng(1)
    translations = rng.integers(0, VOCAB, (VOCAB, 3)).astype(np.int32)
    translations[0] = 0  # padding translates to nothing
    frequent = np.array([9, 5, 30], np.int32)
    table = shortlist.Shortlist(frequent, translations, VOCAB)
    inputs = random_inputs(5, 6, VOCAB, seed=2)
    expected = {0, 1, 2, 9, 5, 30}
    for source in inputs.ravel():
        expected |= set(translations[source].tolist())
    assert table.columns(tf.constant(inputs)).numpy().tolist() == sorted(expected)
    sized = table.sized(1, 2)
    assert sized.frequent.tolist() == [9] and sized.translations.shape == (VOCAB, 2)


def _every_id(vocab: int) -> shortlist.Shortlist:
    every = np.arange(vocab, dtype=np.int32)
    return shortlist.Shortlist(every, np.zeros((vocab, 1), np.int32), vocab)


@pytest.mark.parametrize("beam", [1, 4])
def test_a_shortlist_of_every_id_is_the_full_search(beam):
    model = tiny_model(vocab_size=VOCAB, seed=4)
    inputs = tf.constant(random_inputs(6, 7, VOCAB, seed=3))
    options = {"beam_size": beam, "alpha": 0.6, "extra_length": 4, "nbest": beam}
    full = transformer_step.translate_ids(model, inputs, **options)
    short = transformer_step.translate_ids(model, inputs, **options, shortlist=_every_id(VOCAB))
    np.testing.assert_array_equal(short.ids.numpy(), full.ids.numpy())
    np.testing.assert_allclose(short.scores.numpy(), full.scores.numpy(), atol=1e-5)
    greedy = transformer_step.sample_ids(model, inputs, temperature=0.0, extra_length=4)
    short_greedy = transformer_step.sample_ids(
        model, inputs, temperature=0.0, extra_length=4, shortlist=_every_id(VOCAB)
    )
    np.testing.assert_array_equal(short_greedy.ids.numpy(), greedy.ids.numpy())


def _masked_full_search(model, inputs, columns, beam):
    """The slow path: the whole vocabulary's logits, those outside `columns` set to -inf."""
    allowed = tf.scatter_nd(columns[:, None], tf.ones_like(columns, tf.bool), [VOCAB])
    step_fn, cache = transformer_step.model_step_fn(model, inputs, 11)

    def masked(ids, index, state):
        logits, state = step_fn(ids, index, state)
        return tf.where(allowed, logits, -np.inf), state

    lengths = transformer_step.output_lengths(model, inputs, 4)
    return search.beam_search(masked, cache, inputs.shape[0], beam, 0.6, lengths, nbest=beam)


@pytest.mark.parametrize("use_cache", [True, False])
def test_shortlisted_search_equals_the_masked_full_search(use_cache):
    model = tiny_model(vocab_size=VOCAB, seed=6)
    inputs = tf.constant(random_inputs(6, 7, VOCAB, seed=5))
    rng = np.random.default_rng(7)
    table = shortlist.Shortlist(
        np.array([4, 8], np.int32), rng.integers(0, VOCAB, (VOCAB, 2)).astype(np.int32), VOCAB
    )
    columns = table.columns(inputs)
    assert 10 < len(columns) < VOCAB  # a real cut
    expected = _masked_full_search(model, inputs, columns, 3)
    found = transformer_step.translate_ids(
        model, inputs, beam_size=3, alpha=0.6, extra_length=4, nbest=3,
        use_cache=use_cache, shortlist=table,
    )  # fmt: skip
    np.testing.assert_array_equal(found.ids.numpy(), expected.ids.numpy())
    np.testing.assert_allclose(found.scores.numpy(), expected.scores.numpy(), atol=1e-5)
    assert set(np.unique(found.ids.numpy())) <= set(columns.numpy().tolist())


@pytest.mark.parametrize("int8", [False, True])
def test_logits_of_columns_are_those_columns_of_the_logits(int8):
    layer = SharedEmbedding(VOCAB, 16)
    layer.build()
    if int8:
        layer.quantize("int8")
        int8_product.prepare(layer)
    x = tf.random.stateless_normal([3, 5, 16], seed=[1, 2])
    columns = tf.constant([0, 1, 2, 7, 19, 33], tf.int32)
    full = layer.logits(x).numpy()
    np.testing.assert_allclose(
        layer.logits(x, columns=columns).numpy(), full[..., columns.numpy()], rtol=1e-6, atol=1e-6
    )


def test_settings_and_flag_refusals():
    assert parse_shortlist("100,50") == (100, 50) and parse_shortlist("") == (0, 0)
    for bad in ("100", "a,b", "1,2,3", "-1,5"):
        with pytest.raises(ValueError, match="FREQUENT,PER_SOURCE"):
            parse_shortlist(bad)
    with pytest.raises(ValueError, match="at most 2000 frequent"):
        SearchSettings(shortlist=(5000, 10)).check(64)
    with pytest.raises(ValueError, match="--constrained"):
        SearchSettings(shortlist=(10, 10), constrained=True).check(64)
    model = tiny_model(vocab_size=VOCAB, seed=4)
    with pytest.raises(ValueError, match="without constraints, prefixes or terms"):
        transformer_step.translate_ids(
            model, tf.constant([[5, 1]]), prefix=tf.constant([[6]]), shortlist=_every_id(VOCAB)
        )


@pytest.fixture(scope="module")
def reversal_run(tmp_path_factory):
    """A random tiny run of algorithmic_reverse over generated data with a training split:
    (output_dir, data_dir)."""
    from decoding_helpers import write_tiny_run

    from t2t_lite.problems import get_problem

    root = tmp_path_factory.mktemp("shortlist")
    output_dir, _, _ = write_tiny_run(root, problem="algorithmic_reverse")
    data_dir = root / "generated"
    get_problem("algorithmic_reverse").generate_data(
        str(data_dir), max_sequence_length=6, train_size=300, dev_size=10
    )
    return output_dir, data_dir


LINES = ["1 2 3", "4 4 0 9", "7"]


def test_t2t_decode_and_t2t_export_with_shortlist(reversal_run, tmp_path):
    """--shortlist builds the table in the data folder; with the frequent list covering every
    id, t2t-decode writes what the plain search writes (`run_decode`, which the command calls,
    in this process), and the export's serving signature returns the same."""
    from decoding_helpers import decode_flags

    from t2t_lite.decode.runner import run_decode

    output_dir, data_dir = reversal_run
    source, plain, short = tmp_path / "in.txt", tmp_path / "plain.txt", tmp_path / "short.txt"
    source.write_text("".join(f"{line}\n" for line in LINES))
    config = decode_flags(
        output_dir=str(output_dir), data_dir=str(data_dir), decode_from_file=str(source),
        decode_to_file=str(plain),
    )  # fmt: skip
    assert run_decode(*config) == len(LINES)
    run = [f"--output_dir={output_dir}", f"--data_dir={data_dir}", f"--decode_from_file={source}"]
    done = command("t2t_decode", *run, f"--decode_to_file={short}", "--shortlist=100,2")
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = {"plain": plain.read_text().splitlines(), "short": short.read_text().splitlines()}
    assert outputs["short"] == outputs["plain"] and len(outputs["plain"]) == 3
    assert (data_dir / shortlist.FILE).exists()
    export_dir = tmp_path / "export"
    exported = command("t2t_export", *run[:2], f"--export_dir={export_dir}", "--shortlist=100,2")
    assert exported.returncode == 0, exported.stderr[-3000:]
    loaded = tf.saved_model.load(str(export_dir / "1"))
    served = loaded.signatures["serving_default"](inputs=tf.constant(LINES))
    assert [s.decode() for s in served["outputs"].numpy()] == outputs["plain"]
    bad = command("t2t_decode", *run, "--shortlist=100")
    assert bad.returncode != 0, bad.stderr
    assert bad.stderr.strip().splitlines()[-1].startswith("t2t-decode: error: --shortlist takes")
    ct2 = command("t2t_export", *run[:2], "--export_dir=x", "--format=litert", "--shortlist=1,1")
    assert ct2.stderr.strip().splitlines()[-1] == (
        "t2t-export: error: --shortlist: --format=litert searches the whole vocabulary"
    )


def test_t2t_serve_backend_searches_the_shortlist(reversal_run):
    """t2t-serve's run backend searches as the Translator of the same run; with one
    translation per source id (each digit's is itself, the reversal data says), every output
    word is a word of its source; --jit_compile with a shortlist is refused."""
    from t2t_lite.decode.translator import Translator
    from t2t_lite.run.run import Run
    from t2t_lite.serve.web.run_backend import RunBackend

    output_dir, data_dir = reversal_run
    run = Run.restore(str(output_dir), data_dir=str(data_dir), search={"shortlist": (0, 1)})
    backend = RunBackend(run)
    found = backend.translate(LINES, run.search)
    expected = Translator.from_run(run).translate(LINES)
    assert [r["hypotheses"][0]["text"] for r in found] == expected
    for line, text in zip(LINES, expected, strict=True):  # the reserved <unk> is listed too
        assert set(text.split()) <= {*line.split(), "<unk>"}, (line, text)
    whole = Translator.from_run(Run.restore(str(output_dir), data_dir=str(data_dir)))
    assert any(  # the random model says other digits when nothing stops it
        set(text.split()) - {*line.split(), "<unk>"}
        for line, text in zip(LINES, whole.translate(LINES), strict=True)
    )
    with pytest.raises(ValueError, match="--jit_compile with --shortlist"):
        RunBackend(run, jit_compile=True)


@pytest.mark.parametrize("precision", ["float32", "mixed_bfloat16"])
def test_logits_by_the_transposed_kernel_equal_the_layers_own(precision):
    """The copy a search makes once (`output_kernel`), whole and cut to columns, gives the
    logits the layer computes from its own matrix."""
    layer = SharedEmbedding(VOCAB, 16, dtype=precision)
    layer.build()
    x = tf.cast(tf.random.stateless_normal([3, 5, 16], seed=[3, 4]), layer.compute_dtype)
    columns = tf.constant([0, 1, 2, 8, 21], tf.int32)
    for cut in (None, columns):
        kernel = layer.output_kernel(columns=cut)
        assert kernel.dtype == layer.compute_dtype
        # The same products, summed in another order: float32 rounding apart.
        np.testing.assert_allclose(
            tf.cast(layer.logits(x, columns=cut, kernel=kernel), tf.float32).numpy(),
            tf.cast(layer.logits(x, columns=cut), tf.float32).numpy(),
            rtol=1e-5 if precision == "float32" else 1e-2,
            atol=1e-5 if precision == "float32" else 1e-2,
        )
    layer.quantize("int8")
    assert layer.output_kernel() is None  # the 8-bit product keeps its own


def test_ctranslate2_export_writes_the_shortlist_as_its_vocabulary_map(reversal_run, tmp_path):
    """t2t-export --format=ctranslate2 --shortlist: vmap.txt lists the frequent pieces and each
    piece's translations (each digit's is itself), and CTranslate2 with use_vmap says only the
    source's digits."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    output_dir, data_dir = reversal_run
    folder = tmp_path / "ct2"
    done = command(
        "t2t_export", f"--output_dir={output_dir}", f"--data_dir={data_dir}",
        f"--export_dir={folder}", "--format=ctranslate2", "--shortlist=0,1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = (folder / "1" / "vmap.txt").read_text().splitlines()
    assert lines == ["\t", *(f"{d}\t{d}" for d in range(10))]
    assert "use_vmap=True" in (folder / "1" / "README.md").read_text()
    translator = ctranslate2.Translator(str(folder / "1"), device="cpu")
    pieces = [line.split() for line in LINES]
    results = translator.translate_batch(
        pieces, beam_size=2, use_vmap=True, max_input_length=8, max_decoding_length=6
    )
    for source, result in zip(pieces, results, strict=True):
        assert set(result.hypotheses[0]) <= {*source, "<unk>"}, (source, result.hypotheses)
