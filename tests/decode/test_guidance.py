"""Target prefixes, constraints and the terminology table through the `Translator` (the path of
t2t-decode and the Python API), on a random tiny algorithmic_copy run (words 0..9)."""

from __future__ import annotations

import json
import logging
import math

import pytest
from decoding_helpers import decode_flags, write_tiny_run

from t2t_lite.decode.guidance import Guide, Terminology, read_guides
from t2t_lite.decode.runner import run_decode
from t2t_lite.decode.translator import Translator
from t2t_lite.run.run_flags import RunFlags

LINES = ["1 2 3", "", "4 5 6 7 8", "9 9", "3 0 3"]


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    root = tmp_path_factory.mktemp("guided")
    write_tiny_run(root, max_positions=32, seed=5)
    return Translator.from_run(str(root / "out"), beam_size=4, alpha=0.6, nbest=2)


def test_outputs_start_with_their_prefix_and_score_it_as_forced_scoring_does(translator):
    prefixes = ["7 7", "5", "0 1 2", "", "9"]
    found = translator.hypotheses(LINES, guides=[Guide(p) for p in prefixes], details=True)
    for line, prefix, hyps in zip(LINES, prefixes, found, strict=True):
        if not line:
            assert hyps == []
            continue
        for hyp in hyps:
            assert hyp.text.split()[: len(prefix.split())] == prefix.split()
            # The log-prob includes the prefix: the forced pass over the whole output gives it.
            assert sum(map(math.log, hyp.details.token_probs)) == pytest.approx(hyp.log_prob)
    # So does scoring the output (t2t-decode --score_file), which adds EOS to the target:
    # where the search stopped at the maximum length without EOS, EOS's log-prob is added.
    texts = [hyps[0].text if hyps else "" for hyps in found]
    names = [f"line {i}" for i in range(len(LINES))]
    scored = translator.score(LINES, texts, names, names)
    ended = 0
    for hyps, value in zip(found, scored, strict=True):
        if hyps and hyps[0].details.tokens[-1] == "</s>":
            assert value == pytest.approx(hyps[0].log_prob, abs=1e-4)
            ended += 1
        elif hyps:
            assert value < hyps[0].log_prob
    assert ended >= 1
    unguided = translator.translate(LINES)
    assert translator.translate(LINES, prefixes=[""] * len(LINES)) == unguided
    assert sum(t != u for t, u in zip(texts, unguided, strict=True)) >= 3


def test_every_constraint_appears_in_every_output(translator):
    constraints = [["8 8"], ["1"], ["2 2 2", "6"], [], ["5 4"]]
    found = translator.translate(LINES, constraints=constraints)
    plain = translator.translate(LINES)
    for text, wanted in zip(found, constraints, strict=True):
        for phrase in wanted:
            if text:
                assert f" {phrase} " in f" {text} ", (text, phrase)
    assert found[3] == plain[3]  # no constraint: the unguided search
    pairs = zip(constraints, plain, strict=True)
    assert sum(all(f" {p} " in f" {b} " for p in w) for w, b in pairs) <= 2


def test_a_constraint_that_cannot_fit_is_dropped_with_a_warning_naming_the_line(translator, caplog):
    long = " ".join(["3"] * 40)  # 40 tokens: more than the 32 positions
    with caplog.at_level(logging.WARNING):
        found = translator.hypotheses(
            ["1 2", "4 4"],
            ["in.txt:1", "in.txt:2"],
            guides=[Guide("", ("7", long, "8")), Guide()],
        )
    assert len(found) == 2 and all(found)
    # "7" fits; the long one does not, so it and the ones after it are dropped.
    assert " 7 " in f" {found[0][0].text} "
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("in.txt:1: constraint") and "dropped" in m for m in messages)


def test_terminology_applies_where_the_source_term_occurs_as_a_word(tmp_path):
    table = tmp_path / "terms.tsv"
    table.write_text("# source\ttarget\n3\t8 8\n4 5\t0\n\n9\t1\n")
    terms = Terminology.read(str(table))
    assert terms.constraints_for("1 2 3") == ("8 8",)
    assert terms.constraints_for("4 5 6 3") == ("8 8", "0")
    assert terms.constraints_for("34 5") == ()
    constraints = tmp_path / "c.tsv"
    constraints.write_text("6\t8 8\n\n")
    prefixes = tmp_path / "p.txt"
    prefixes.write_text("2\n\n")
    guides = read_guides(2, ["3 9", "4 5"], str(prefixes), str(constraints), str(table))
    assert guides == [Guide("2", ("6", "8 8", "1")), Guide("", ("0",))]
    table.write_text("3\t8\t9\n")
    with pytest.raises(ValueError, match=r"terms.tsv:1: expected 'source term<TAB>target term'"):
        Terminology.read(str(table))
    with pytest.raises(ValueError, match=r"--prefix_file .*p.txt has 2 lines but the input has 3"):
        read_guides(3, ["a", "b", "c"], str(prefixes))


def test_sampling_takes_a_prefix_but_refuses_constraints(tmp_path):
    write_tiny_run(tmp_path, max_positions=32, seed=5)
    sampler = Translator.from_run(str(tmp_path / "out"), sampling=True, temperature=0.0)
    found = sampler.translate(["1 2 3"], prefixes=["6 6"])
    assert found[0].split()[:2] == ["6", "6"]
    with pytest.raises(ValueError, match="terminology constraints need beam search"):
        sampler.translate(["1 2 3"], constraints=[["6"]])


def test_t2t_decode_flags_write_n_lines_with_alignments_and_json(tmp_path, monkeypatch):
    write_tiny_run(tmp_path, max_positions=32, seed=5)
    (tmp_path / "in.txt").write_text("1 2 3\n\n4 5 6\n")
    (tmp_path / "terms.tsv").write_text("5\t9 9\n")
    (tmp_path / "prefix.txt").write_text("0\n\n\n")
    common = {
        "decode_from_file": str(tmp_path / "in.txt"),
        "terminology": str(tmp_path / "terms.tsv"),
        "prefix_file": str(tmp_path / "prefix.txt"),
        "beam_size": 2,
    }
    text_out, json_out = tmp_path / "out.txt", tmp_path / "out.jsonl"
    config = decode_flags(
        output_dir=str(tmp_path / "out"), decode_to_file=str(text_out), alignment=True, **common
    )
    assert run_decode(*config) == 3
    lines = text_out.read_text().split("\n")[:-1]
    texts = [line.split(" ||| ")[0] for line in lines]
    assert texts[0].split()[0] == "0" and texts[1] == "" and " 9 9 " in f" {texts[2]} "
    for line, source in zip(lines, ["1 2 3", "", "4 5 6"], strict=True):
        text, alignment = line.split(" ||| ")
        pairs = [tuple(map(int, p.split("-"))) for p in alignment.split()]
        assert all(i < len(source.split()) and j < len(text.split()) for i, j in pairs)
        assert bool(pairs) == bool(source)
    config = decode_flags(
        output_dir=str(tmp_path / "out"),
        decode_to_file=str(json_out),
        output_format="jsonl",
        **common,
    )
    assert run_decode(*config) == 3
    records = [json.loads(line) for line in json_out.read_text().split("\n")[:-1]]
    assert [len(r["hypotheses"]) for r in records] == [1, 0, 1]
    best = records[2]["hypotheses"][0]
    assert best["text"] == texts[2] and best["alignment"] == lines[2].split(" ||| ")[1]
    assert 0.0 <= best["confidence"] <= 1.0
    assert math.fsum(map(math.log, best["token_probs"])) == pytest.approx(
        best["log_prob"], abs=1e-4
    )
    (tmp_path / "prefix.txt").write_text("0\n")
    config = decode_flags(output_dir=str(tmp_path / "out"), decode_to_file=str(json_out), **common)
    monkeypatch.setattr(RunFlags, "restore", lambda self: pytest.fail("read before the model"))
    with pytest.raises(ValueError, match="--prefix_file .*prefix.txt has 1 lines but the input"):
        run_decode(*config)


def test_score_file_as_json_lines_describes_each_given_target(tmp_path):
    write_tiny_run(tmp_path, max_positions=32, seed=5)
    (tmp_path / "in.txt").write_text("1 2 3\n\n4 5 6 7\n")
    (tmp_path / "ref.txt").write_text("3 2 1\n5\n7 6\n")
    common = {"decode_from_file": str(tmp_path / "in.txt"), "score_file": str(tmp_path / "ref.txt")}
    plain, described = tmp_path / "scores.txt", tmp_path / "scores.jsonl"
    run_decode(*decode_flags(output_dir=str(tmp_path / "out"), decode_to_file=str(plain), **common))
    config = decode_flags(
        output_dir=str(tmp_path / "out"),
        decode_to_file=str(described),
        output_format="jsonl",
        **common,
    )
    assert run_decode(*config) == 3
    scores = plain.read_text().split("\n")[:-1]
    records = [json.loads(line)["hypotheses"] for line in described.read_text().splitlines()]
    assert scores[1] == "" and records[1] == []
    for score, record, target in zip(scores, records, ["3 2 1", "", "7 6"], strict=True):
        if not target:
            continue
        (found,) = record
        assert found["text"] == target and found["tokens"] == [*target.split(), "</s>"]
        assert found["log_prob"] == pytest.approx(float(score), abs=1e-5)
        total = math.fsum(map(math.log, found["token_probs"]))
        assert total == pytest.approx(found["log_prob"], abs=1e-4)
        assert 0.0 <= found["confidence"] <= 1.0 and found["alignment"]


def test_a_prefix_of_characters_the_vocabulary_lacks_is_warned_of_once(translator, caplog):
    guides = [Guide("7 Жы"), Guide(), Guide("", ("8 Ж", "€")), Guide("9")]
    with caplog.at_level(logging.WARNING):
        found = translator.hypotheses(["1 2", "3", "4 4", "5"], guides=guides)
    assert len(found) == 4 and all(found)
    messages = [r.getMessage() for r in caplog.records if "vocabulary lacks" in r.getMessage()]
    assert messages == [
        "the prefix or constraints of line 1, line 3 hold characters the vocabulary lacks, read "
        "as the unknown piece (shown as ⁇): 'Ж' 'ы' '€'"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        translator.hypotheses(["1 2"], guides=[Guide("7 8")])
    assert not [r for r in caplog.records if "vocabulary lacks" in r.getMessage()]
