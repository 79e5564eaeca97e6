"""The problem registry, the decorator, --usr_dir, and a custom text-pair problem."""

import sys
import textwrap

import pytest

from t2t_lite.hparams import get_hparams
from t2t_lite.problems import (
    PROBLEMS,
    Problem,
    describe_options,
    get_problem,
    import_usr_dir,
    register_problem,
)


def test_builtin_problems_and_their_defaults():
    for name in ("algorithmic_copy", "algorithmic_reverse"):
        assert name in PROBLEMS
    problem = get_problem("algorithmic_reverse")
    assert problem.metric == "accuracy" and problem.has_inputs
    assert problem.decode_defaults.beam_size == 1


def test_every_translation_problem_names_its_language_pair():
    # Model cards, Argos packages and sentence splitting read the pair from these attributes.
    pairs = {
        name: (PROBLEMS.get(name).source_language, PROBLEMS.get(name).target_language)
        for name in PROBLEMS
        if name.startswith("translate_")
    }
    assert pairs["translate_ende_lohelp"] == ("en", "de")
    assert pairs["translate_enfr_lohelp"] == ("en", "fr")
    assert all(source and target for source, target in pairs.values()), pairs


def test_missing_name_suggests_close_ones():
    with pytest.raises(KeyError, match="did you mean 'algorithmic_reverse'"):
        get_problem("algorithmic_revers")


def test_decorator_forms_and_duplicates():
    @register_problem
    class MyTestOnlyProblem(Problem):
        pass

    assert MyTestOnlyProblem.name == "my_test_only_problem"
    assert isinstance(get_problem("my_test_only_problem"), MyTestOnlyProblem)
    with pytest.raises(KeyError, match="already registered"):
        register_problem("my_test_only_problem")(type("Other", (Problem,), {}))
    with pytest.raises(TypeError, match="expects a Problem subclass"):
        register_problem("not_a_problem")(int)


def test_describe_options_names_the_problems_of_each_option():
    @register_problem("options_test_base")
    class Base(Problem):
        default_options = {"corpus_dir": "", "size_limit": 5}
        option_help = {"corpus_dir": "Folder of the corpus."}

    @register_problem("options_test_child")
    class Child(Base):  # inherits the help; adds an option without one
        default_options = {**Base.default_options, "lowercase": False}

    described = describe_options()
    both = "[options_test_base, options_test_child]"
    assert described["corpus_dir"] == f"Folder of the corpus. {both}"
    assert described["size_limit"] == f"Problem option size_limit (default 5). {both}"
    child = "[options_test_child]"
    assert described["lowercase"] == f"Problem option lowercase (default False). {child}"
    # A shared option that problems describe differently gets each description.
    assert "[translate_ende_lohelp, translate_enfr_lohelp]" in described["raw_dir"]
    assert "[wmt14_ende, wmt14_enfr]" in described["raw_dir"]


def test_usr_dir_registers_a_custom_text_pair_problem(tmp_path):
    package = tmp_path / "my_t2t_usr"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent("""
        from t2t_lite.problems import Problem, register_problem

        @register_problem("usr_upper_case")
        class UpperCase(Problem):
            vocab_type = "words"
            vocab_size = 20
            examples_per_shard = 7

            def text_pairs(self, split, options):
                words = ["ab", "cd", "ef"] if split == "train" else ["ab"]
                for i in range(20):
                    yield " ".join(words[: 1 + i % 3]), " ".join(words[: 1 + i % 3]).upper()
    """)
    )
    import_usr_dir(str(package))
    problem = get_problem("usr_upper_case")
    data_dir = str(tmp_path / "data")
    meta = problem.generate_data(data_dir)
    assert meta["splits"]["train"]["shards"] == [f"train-0000{i}.tfrecord" for i in range(3)]
    tok = problem.tokenizer(data_dir)
    assert tok.decode_py(tok.encode_py("ab CD")) == "ab CD"
    batches = list(
        problem.make_dataset(
            data_dir, "test", get_hparams("transformer_tiny"), shuffle=False, repeat=False
        )
    )
    assert sum(b["inputs"].shape[0] for b in batches) == 20


def test_usr_dir_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="--usr_dir .*missing does not exist"):
        import_usr_dir(str(tmp_path / "missing"))
    (tmp_path / "no_init").mkdir()
    with pytest.raises(ValueError, match="folder without __init__.py"):
        import_usr_dir(str(tmp_path / "no_init"))
    (tmp_path / "broken_usr.py").write_text("import no_such_module_here\n")
    with pytest.raises(ModuleNotFoundError, match="no_such_module_here"):
        import_usr_dir(str(tmp_path / "broken_usr.py"))


def test_usr_dir_named_like_a_loaded_module_is_imported(tmp_path):
    """Issue 17: `--usr_dir=.../json.py` was silently skipped because `json` is loaded."""
    usr = tmp_path / "json.py"
    usr.write_text(
        textwrap.dedent("""
        from t2t_lite.problems import Problem, register_problem

        @register_problem("usr_named_json")
        class NamedJson(Problem):
            def text_pairs(self, split, options):
                yield "a", "b"
    """)
    )
    module = import_usr_dir(str(usr))
    assert get_problem("usr_named_json").name == "usr_named_json"
    assert module.__name__.startswith("t2t_usr_dir_json_") and sys.modules["json"] is not module
    assert import_usr_dir(str(usr)) is module  # once per path: no second registration
