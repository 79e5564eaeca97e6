"""The parsing problems (problems/parsing.py): datagen on literal trees, vocabulary, repair."""

from __future__ import annotations

import json
import os

import pytest
import tensorflow as tf

from t2t_lite.data import load_tokenizer
from t2t_lite.data.pipeline import parse_examples
from t2t_lite.data.trees import parse_tree, read_trees
from t2t_lite.metrics.evalb import evaluate_files
from t2t_lite.problems import get_problem, read_metadata
from t2t_lite.problems.parsing import parsing_vocab, tag_table
from t2t_lite.problems.parsing_trees import delinearize, linearize

GUM_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "gum")

TRAIN = """( (S (NP-SBJ (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .)) )
( (S (NP-SBJ-1 (PRP We)) (VP (VBD left) (NP (-NONE- *T*-1))) (. .)) )
"""
DEV = "(ROOT (S (NP (DT The) (NN dog)) (VP (VBD barked))))\n"
TEST = """(TOP (FRAG (NP (NNP Mary)) (. !)))
( (S (NP (PRP It)) (VP (VBZ works))) )
"""
# Sources and targets the problem must write, in file order.
EXPECTED = {
    "train": [
        ("John has a dog .", "(S (NP NNP )NP (VP VBZ (NP DT NN )NP )VP . )S"),
        ("We left .", "(S (NP PRP )NP (VP VBD )VP . )S"),
    ],
    "dev": [("The dog barked", "(S (NP DT NN )NP (VP VBD )VP )S")],
    "test": [
        ("Mary !", "(FRAG (NP NNP )NP . )FRAG"),
        ("It works", "(S (NP PRP )NP (VP VBZ )VP )S"),
    ],
}
UNSEEN = {  # how the shards read back: words and labels unseen in training are <unk>
    "dev": {"The dog barked": ("<unk> dog <unk>", "(S (NP DT NN )NP (VP VBD )VP )S")},
    "test": {
        "Mary !": ("<unk> <unk>", "<unk> (NP NNP )NP . <unk>"),
        "It works": ("<unk> <unk>", "(S (NP PRP )NP (VP VBZ )VP )S"),
    },
}


def _read_split(data_dir: str, split: str) -> list[tuple[str, str]]:
    """Every example of a split's shards, decoded back to text (EOS dropped)."""
    problem = get_problem("parsing_trees")
    tokenizer = load_tokenizer(data_dir)
    out = []
    for path in problem.split_files(data_dir, split):
        for record in tf.data.TFRecordDataset(path).batch(64):
            parsed = parse_examples(record)
            for name in ("inputs", "targets"):
                assert all(row[-1] == 1 for row in parsed[name].to_list())  # EOS last
            sources = tokenizer.decode(parsed["inputs"]).numpy()
            targets = tokenizer.decode(parsed["targets"]).numpy()
            out += [(s.decode(), t.decode()) for s, t in zip(sources, targets, strict=True)]
    return out


@pytest.fixture(scope="module")
def tree_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("trees")
    for name, text in (("train", TRAIN), ("dev", DEV), ("test", TEST)):
        (root / f"{name}.mrg").write_text(text)
    return root


def test_parsing_trees_datagen_on_literal_trees(tree_files, tmp_path):
    data_dir = str(tmp_path / "data")
    # A size with room for every word: sized from the corpus, words seen once would have only
    # their signatures (test_vocabulary_sized_from_the_corpus_keeps_words_seen_min_count_times).
    metadata = get_problem("parsing_trees").generate_data(
        data_dir,
        train_trees=str(tree_files / "train.mrg"),
        dev_trees=str(tree_files / "dev.mrg"),
        test_trees=str(tree_files / "test.mrg"),
        vocab_size=100,
    )
    assert metadata["metric"] == "parse_f1"
    decode_defaults = metadata["decode_defaults"]
    assert {k: decode_defaults[k] for k in ("beam_size", "alpha", "extra_length")} == {
        "beam_size": 21,
        "alpha": 0.3,
        "extra_length": 300,
    }
    assert decode_defaults["constrained"] and not decode_defaults["sampling"]
    assert metadata["vocab"]["type"] == "words"
    # The model outputs only the reserved ids and the training trees' tags and brackets, which
    # the vocabulary lists first.
    targets = {token for _, target in EXPECTED["train"] for token in target.split()}
    with open(os.path.join(data_dir, "vocab.words.txt")) as f:
        vocab = f.read().split("\n")
    size = metadata["vocab"]["output_size"]
    assert size == 3 + len(targets) and set(vocab[3:size]) == targets
    for split, pairs in EXPECTED.items():
        # Shards are shuffled within themselves, so compare as sorted lists.
        # Words never seen in training come back as <unk> (the source text files keep them).
        expected = [UNSEEN.get(split, {}).get(s, (s, t)) for s, t in pairs]
        assert sorted(_read_split(data_dir, split)) == sorted(expected)
    # Sources and gold trees for t2t-decode / t2t-evalb, in file order.
    with open(os.path.join(data_dir, "test.source.txt")) as f:
        assert f.read() == "Mary !\nIt works\n"
    gold = [str(t) for t in read_trees(os.path.join(data_dir, "test.gold.trees"))]
    assert gold == ["(FRAG (NP (NNP Mary)) (. !))", "(S (NP (PRP It)) (VP (VBZ works)))"]
    # What constrained decoding takes from the training trees.
    with open(os.path.join(data_dir, "tags.json")) as f:
        assert json.load(f) == {
            "tags": {
                "John": {"NNP": 1},
                "has": {"VBZ": 1},
                "a": {"DT": 1},
                "dog": {"NN": 1},
                ".": {".": 2},
                "We": {"PRP": 1},
                "left": {"VBD": 1},
            },
            "max_depth": 3,
            "max_opens": 2,
        }
    constraint = get_problem("parsing_trees").decode_constraint(data_dir, load_tokenizer(data_dir))
    assert (constraint.max_depth, constraint.max_opens) == (3, 2)
    table = constraint.tag_table.numpy()
    tags = [i for i, t in enumerate(vocab) if i < size and t[0] not in "()" and i > 2]
    assert table[2].nonzero()[0].tolist() == tags  # <unk>: every tag
    # Every word is rarer than TAG_MIN_COUNT here: any tag; seen once is enough with 1.
    assert table[vocab.index("dog")].nonzero()[0].tolist() == tags
    with open(os.path.join(data_dir, "tags.json")) as f:
        strict = tag_table(json.load(f)["tags"], vocab, min_count=1)
    assert strict[vocab.index("dog")].nonzero()[0].tolist() == [vocab.index("NN")]
    assert strict[vocab.index(".")].nonzero()[0].tolist() == [vocab.index(".")]
    # Rerunning is a no-op that keeps the files.
    again = get_problem("parsing_trees").generate_data(
        data_dir,
        train_trees=str(tree_files / "train.mrg"),
        dev_trees=str(tree_files / "dev.mrg"),
        test_trees=str(tree_files / "test.mrg"),
        vocab_size=100,
    )
    assert again == read_metadata(data_dir)


def test_vocabulary_puts_every_target_token_first():
    pairs = EXPECTED["train"] + EXPECTED["test"]
    # The 15 distinct target tokens by count, ties by name; then the signatures of the source
    # words that do not fit, by the count of their words; then the source words that do ("." is
    # a tag already), by count, ties alphabetically. With room for 5: leaving out "We", "a",
    # "dog", "has", "left" and "works" needs 3 signatures, which leave out "John" and "Mary"
    # too, whose 4th signature leaves out "It": 4 signatures and 1 word.
    targets = [
        "(NP", ")NP",
        "(S", "(VP", ")S", ")VP", ".",
        "NNP", "PRP", "VBZ",
        "(FRAG", ")FRAG", "DT", "NN", "VBD",
    ]  # fmt: skip
    assert parsing_vocab(pairs, vocab_size=3 + 15 + 5) == [
        *targets, "<unk:C>", "<unk:c>", "<unk:c_s>", "<unk:C_y>", "!"
    ]  # fmt: skip
    # With room for every word, no signatures.
    everything = ["!", "It", "John", "Mary", "We", "a", "dog", "has", "left", "works"]
    assert parsing_vocab(pairs, vocab_size=3 + 15 + 20) == [*targets, *everything]
    with pytest.raises(ValueError, match="vocab_size=10 is too small.*15 distinct"):
        parsing_vocab(pairs, vocab_size=10)


def test_vocabulary_sized_from_the_corpus_keeps_words_seen_min_count_times():
    # The training sentences three times and the test ones once: with no vocab_size, the words
    # seen at least 3 times get ids and the rest only their signatures, by their words' counts.
    pairs = EXPECTED["train"] * 3 + EXPECTED["test"]
    targets = [
        "(NP", ")NP", "(S", "(VP", ")S", ")VP", ".",
        "NNP", "PRP", "VBZ", "DT", "NN", "VBD", "(FRAG", ")FRAG",
    ]  # fmt: skip
    frequent = ["John", "We", "a", "dog", "has", "left"]
    # It (C); Mary (C_y); ! (o); works (c_s), as has would be.
    assert parsing_vocab(pairs) == [
        *targets, "<unk:C>", "<unk:C_y>", "<unk:c_s>", "<unk:o>", *frequent
    ]  # fmt: skip
    # Seen at least 4 times: none; a, dog, left (c) count 9, John, We, It (C) 7, has, works 4.
    assert parsing_vocab(pairs, min_count=4) == [
        *targets, "<unk:c>", "<unk:C>", "<unk:c_s>", "<unk:C_y>", "<unk:o>"
    ]  # fmt: skip
    assert parsing_vocab(pairs, min_count=1) == [*targets, *frequent, "!", "It", "Mary", "works"]


def _fake_wsj(root, sections=range(0, 25)) -> str:
    for section in sections:
        folder = root / f"{section:02d}"
        folder.mkdir(parents=True)
        (folder / f"wsj_{section:02d}01.mrg").write_text(
            f"( (S (NP-SBJ (NNP S{section})) (VP (VBD ended)) (. .)) )\n"
        )
    return str(root)


def test_wsj_parsing_sections_and_semi_silver(tmp_path):
    ptb_dir = _fake_wsj(tmp_path / "wsj")
    problem = get_problem("wsj_parsing")
    options = problem.resolve_options({"ptb_dir": ptb_dir})
    assert problem.vocab_settings(options) == ("words", 16000)
    assert problem.decode_defaults.beam_size == 21
    train = list(problem.text_pairs("train", options))
    assert [s for s, _ in train] == [f"S{i} ended ." for i in range(2, 22)]
    assert list(problem.text_pairs("test", options)) == [
        ("S23 ended .", "(S (NP NNP )NP (VP VBD )VP . )S")
    ]
    silver = tmp_path / "silver.trees"
    silver.write_text("(S (NP (PRP It)) (VP (VBD rained)))\n" * 3)
    semi = get_problem("wsj_parsing_semi")
    options = semi.resolve_options({"ptb_dir": ptb_dir, "silver_trees": str(silver)})
    assert semi.vocab_settings(options) == ("words", 32000)
    pairs = list(semi.text_pairs("train", options))
    assert len(pairs) == 23 and pairs[-1] == ("It rained", "(S (NP PRP )NP (VP VBD )VP )S")
    assert list(semi.text_pairs("dev", options)) == [
        ("S22 ended .", "(S (NP NNP )NP (VP VBD )VP . )S")
    ]


def test_bad_options_name_the_flag(tmp_path, tree_files):
    problem = get_problem("parsing_trees")
    with pytest.raises(ValueError, match="needs --train_trees and --dev_trees"):
        problem.generate_data(str(tmp_path / "a"))
    with pytest.raises(ValueError, match=r"gum_dir or \['--train_trees'\], not both"):
        problem.generate_data(
            str(tmp_path / "b"), gum_dir=str(tmp_path), train_trees=str(tree_files / "x")
        )
    with pytest.raises(FileNotFoundError, match="--dev_trees=.*nothing"):
        problem.generate_data(
            str(tmp_path / "c"),
            train_trees=str(tree_files / "train.mrg"),
            dev_trees=str(tree_files / "nothing*.mrg"),
        )
    with pytest.raises(ValueError, match="wsj_parsing needs --ptb_dir"):
        get_problem("wsj_parsing").generate_data(str(tmp_path / "d"))
    with pytest.raises(FileNotFoundError, match="--ptb_dir=.*section folder .*/05"):
        ptb_dir = _fake_wsj(tmp_path / "partial", sections=[2, 3, 4, 22, 23])
        get_problem("wsj_parsing").generate_data(str(tmp_path / "e"), ptb_dir=ptb_dir)
    with pytest.raises(ValueError, match="wsj_parsing_semi needs --silver_trees"):
        get_problem("wsj_parsing_semi").generate_data(
            str(tmp_path / "f"), ptb_dir=_fake_wsj(tmp_path / "full")
        )


WORDS = "John has a dog ."
# (broken model output, the repaired tree postprocess must write)
BROKEN = [
    ("", "(S (XX John) (XX has) (XX a) (XX dog) (. .))"),  # empty
    (  # unbalanced: never closed
        "(S (NP NNP (VP VBZ (NP DT NN",
        "(S (NP (NNP John) (VP (VBZ has) (NP (DT a) (NN dog)))) (. .))",
    ),
    (  # too many closing brackets; a closing bracket closes the innermost phrase
        ")S (S (NP NNP )VP )NP (VP VBZ (NP DT NN )NP )VP . )S )S",
        "(S (S (NP (NNP John))) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))",
    ),
    (  # too few leaves
        "(S (NP NNP )NP (VP VBZ )VP )S",
        "(S (NP (NNP John)) (VP (VBZ has)) (XX a) (XX dog) (. .))",
    ),
    (  # too many leaves, an empty phrase, two top-level pieces
        "(NP NNP )NP (VP VBZ (ADJP )ADJP (NP DT NN NN NN )NP )VP . . .",
        "(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog) (. .))))",
    ),
    (  # punctuation tags that disagree with the words (EVALB would reject the sentence)
        "(S (NP , )NP (VP VBZ (NP DT NN )NP )VP NN )S",
        "(S (NP (XX John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))",
    ),
    ("<unk> <unk>", "(S (<unk> John) (<unk> has) (XX a) (XX dog) (. .))"),
]


@pytest.mark.parametrize("output, expected", BROKEN)
def test_postprocess_repairs_broken_outputs(output, expected):
    repaired = get_problem("parsing_trees").postprocess(WORDS, output)
    assert repaired == expected
    assert parse_tree(repaired).leaves() == WORDS.split()


def test_repaired_outputs_score_with_evalb(tmp_path):
    gold = tmp_path / "gold.trees"
    test = tmp_path / "test.trees"
    problem = get_problem("parsing_trees")
    gold.write_text("(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))\n" * len(BROKEN))
    test.write_text("".join(problem.postprocess(WORDS, out) + "\n" for out, _ in BROKEN))
    result = evaluate_files(str(gold), str(test))
    assert result.all.errors == 0 and result.all.skips == 0
    # Gold: S, NP, VP, NP per sentence (punctuation deleted). Matched / test brackets per row:
    # empty 1/1, unclosed 3/4, over-closed 4/5, too few 2/3, too many 4/4 (the extra "." is
    # deleted), unk 1/1, punctuation tags fixed 4/4.
    totals = (result.all.matched, result.all.gold_brackets, result.all.test_brackets)
    assert totals == (19, 4 * len(BROKEN), 22)


@pytest.mark.skipif(not os.path.isdir(GUM_DIR), reason="../shared/data/gum is absent")
def test_gum_option_uses_the_document_split():
    problem = get_problem("parsing_trees")
    options = problem.resolve_options({"gum_dir": GUM_DIR})
    assert problem.splits(options) == ("train", "dev", "test")
    counts = {s: len(problem.tree_files(s, options)) for s in ("train", "dev", "test")}
    assert counts == {"train": 254, "dev": 11, "test": 16}


def test_t2t_decode_writes_repaired_trees_evalb_scores(tmp_path):
    """A random model's outputs (garbage tags and brackets) go through the problem's hook."""
    import tensorflow as tf
    from decoding_helpers import model_hparams, tiny_model

    from t2t_lite.decode.translator import Translator
    from t2t_lite.run.layout import CHECKPOINT_DIR
    from t2t_lite.run.run_flags import RunFlags
    from t2t_lite.run.run_info import RunInfo

    data_dir, output_dir = tmp_path / "data", tmp_path / "run"
    data_dir.mkdir()
    words = ["(S", ")S", "(NP", ")NP", "(VP", ")VP", "NNP", "VBZ", ".", "John", "has", "dog"]
    (data_dir / "vocab.words.txt").write_text("\n".join(["<pad>", "<EOS>", "<unk>", *words]))
    model = tiny_model(len(words) + 3, seed=5)
    RunInfo("parsing_trees", str(data_dir), "transformer_tiny", model_hparams(model), 15).save(
        str(output_dir)
    )
    tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model), str(output_dir / CHECKPOINT_DIR), max_to_keep=1
    ).save()
    lines = ["John has a dog .", "", "dog", "John has John has John has ."]
    problem = get_problem("parsing_trees")
    # The problem's default, constrained search: trees that need no repair.
    translator = Translator.from_run(
        RunFlags(str(output_dir), beam_size=2, extra_length=8).restore()
    )
    assert translator.settings.constrained
    translator.postprocess = lambda source, output: output
    for line, found in zip(lines, translator.hypotheses(lines, ["in.txt"] * 4), strict=True):
        if line:
            tokens = found[0].text.split()
            assert linearize(delinearize(tokens, line.split())) == found[0].text
            assert sum(not t.startswith(("(", ")")) for t in tokens) == len(line.split())
    # Unconstrained: garbage, repaired.
    unconstrained = RunFlags(str(output_dir), beam_size=2, extra_length=8, constrained=False)
    translator = Translator.from_run(unconstrained.restore())  # what run_decode uses
    assert translator.postprocess.__func__ is type(problem).postprocess
    out = [h[0].text if h else "" for h in translator.hypotheses(lines, ["in.txt"] * 4)]
    assert out[1] == ""
    # The slow path: the raw decoded sequences, repaired one by one.
    translator.postprocess = lambda source, output: output
    raw = [h[0].text if h else "" for h in translator.hypotheses(lines, ["in.txt"] * 4)]
    for line, got, sequence in zip(lines, out, raw, strict=True):
        if line:
            assert got == problem.postprocess(line, sequence)
            assert parse_tree(got).leaves() == line.split()
    # EVALB takes the non-empty ones as they are (no error sentences).
    (tmp_path / "test.trees").write_text("\n".join(o for o in out if o) + "\n")
    (tmp_path / "gold.trees").write_text(
        "(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))\n(NP (NN dog))\n"
        "(S (NP (NNP John)) (VP (VBZ has) (NNP John) (VBZ has) (NNP John) (VBZ has)) (. .))\n"
    )
    result = evaluate_files(str(tmp_path / "gold.trees"), str(tmp_path / "test.trees"))
    assert result.all.errors == 0 and result.all.sentences == 3


def test_cpu_parsing_hparams_set_builds():
    import numpy as np

    from t2t_lite.hparams import get_hparams
    from t2t_lite.model.transformer import Transformer

    hparams = get_hparams("transformer_parsing_small")
    paper = get_hparams("transformer_parsing")
    small = get_hparams("transformer_small")
    # transformer_small's CPU recipe at width 128: only the size, the tree length, the share of
    # the minutes kept for the search tuning and P_drop (from the same 8 passes) differ; no word
    # dropout.
    assert hparams == small.replace(
        d_model=128, d_ff=512, max_length=256, budget_tune_share=0.08, dropout=0.2
    )
    assert hparams.word_dropout == 0.0
    assert (hparams.dropout, hparams.dropout_passes) == (0.2, 8.0)
    assert (hparams.d_model, hparams.num_encoder_layers, hparams.precision) == (128, 3, "auto")
    assert hparams.max_length == 256 and paper.d_model == 1024
    model = Transformer.from_hparams(hparams, 40)
    features = {"inputs": np.array([[5, 6, 1, 0]]), "targets": np.array([[7, 8, 9, 1, 0]])}
    logits = model(features, training=False)
    assert logits.shape == (1, 5, 40) and logits.dtype == "float32"
    assert np.isfinite(logits.numpy()).all()


def test_fix_punctuation_tags():
    from t2t_lite.problems.parsing import fix_punctuation_tags

    tree = parse_tree('(S (NN ") (NP (. John)) (XX \u201d) (. -) (VP (, ,) (CD 3)))')
    # Quotes get a quote tag, a word never keeps a punctuation tag, an ambiguous "-" keeps the
    # model's tag, "," its own.
    assert str(fix_punctuation_tags(tree)) == (
        "(S ('' \") (NP (XX John)) ('' \u201d) (. -) (VP (, ,) (CD 3)))"
    )


def test_tree_statistics_bounds_unary_chains_by_coverage():
    from t2t_lite.problems.parsing import tree_statistics

    pairs = [("a", "(S (NP X )NP )S")] * 98 + [
        ("a b", "(S (VP (S (NP X )NP )S )VP Y )S"),
        ("a", "(S (A (B (C (D (E X )E )D )C )B )A )S"),
    ]
    stats = tree_statistics(pairs)
    assert (stats["max_depth"], stats["max_opens"]) == (6, 4)  # 98 of 100 have 2, 99 <= 4
    assert tree_statistics(pairs, coverage=0.98)["max_opens"] == 2
    assert tree_statistics(pairs, coverage=1.0)["max_opens"] == 6
    assert stats["tags"] == {"a": {"X": 100}, "b": {"Y": 1}}
