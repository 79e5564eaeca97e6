# Every target creates .venv and installs the package into it when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test test-slow lint demo demo-student demo-parse install clean bench bench-envs docs-outputs docs argos-check

install: $(STAMP)

# Every extra (pyproject.toml, [project.optional-dependencies]) and the test tools (the docs site's among them).
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[all,test]'
	touch $(STAMP)

# The fast tier on two workers. A test file stays on one worker, so its module fixtures are built
# once; a session fixture (tests/reverse_words.py) is built at most once per worker. The files go
# out longest first (tests/file_order.py), in the order xdist is told to keep.
test: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder \
		-m 'not slow' --durations=15 tests

test-slow: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest -q -m slow tests

# GUM constituency parsing on the CPU: train, decode, EVALB F1 (about 30 minutes).
demo-parse: $(STAMP)
	bash scripts/demo_parse.sh

# ruff, then the import tiers (pyproject.toml, [tool.importlinter]) on an installed copy of the
# package: pyproject.toml's [tool.setuptools] maps problems/, hparams/ and bin/ into t2t_lite/,
# which import-linter only sees in an installed tree.
LINT_DIR := build/lint

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	rm -rf $(LINT_DIR)
	$(PY) -m pip install -q --no-deps --no-build-isolation --target $(LINT_DIR) .
	cd $(LINT_DIR) && PYTHONPATH=. ../../$(VENV)/bin/lint-imports --no-cache \
		--config ../../pyproject.toml

# The README's quick-start output and docs/tour.md's, remade by running their commands (about
# 4 minutes; on an idle machine, since they show step rates).
docs-outputs: $(STAMP)
	$(PY) scripts/docs_outputs.py

# The documentation site in site/ (mkdocs.yml), offline: the guides, and the API reference from
# the docstrings of an installed copy (build/docs, where problems/, hparams/ and bin/ sit inside
# t2t_lite/ as [tool.setuptools] maps them). Strict: a broken link or anchor, or a symbol the
# reference names that is gone, fails it. tests/test_site.py builds it too.
DOCS_DIR := build/docs

docs: $(STAMP)
	rm -rf $(DOCS_DIR)
	$(PY) -m pip install -q --no-deps --no-build-isolation --target $(DOCS_DIR) .
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) build site *.egg-info

# The whole path on the real offline corpus (see docs/demo.md); resumable.
demo: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) scripts/demo.py $(DEMO_ARGS)

# make demo's teacher distilled into a 6 + 1-layer student that starts from the teacher's layers,
# trained on the teacher's translations and compared with it (docs/demo.md); resumable. STUDENT_ARGS="--work_dir=..." passes options.
demo-student: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) scripts/demo_student.py $(STUDENT_ARGS)

# Benchmarks against the peers (bench/README in bench/run_bench.py). Each peer gets its own
# virtual environment in .bench/, created when missing, since their TensorFlow versions differ.
BENCH_DIR := .bench
PEERS := model_garden opennmt keras_hub torch ctranslate2
PEER_STAMPS := $(foreach p,$(PEERS),$(BENCH_DIR)/$(p)/.installed)

$(BENCH_DIR)/%/.installed: bench/peers/requirements/%.txt
	test -x $(BENCH_DIR)/$*/bin/python || $(PYTHON) -m venv $(BENCH_DIR)/$*
	$(BENCH_DIR)/$*/bin/python -m pip install -q -r $<
	touch $@

bench-envs: $(STAMP) $(PEER_STAMPS)

bench: bench-envs
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) bench/run_bench.py --output=bench/RESULTS.md

# t2t-export --format=argos checked with argostranslate itself (docs/serving.md), which pulls
# stanza and torch: its own virtual environment, .bench/argos. ARGOS_ARGS="--output_dir=RUN ..."
# names the run (scripts/argos_check.py --help).
$(BENCH_DIR)/argos/.installed: scripts/argos_requirements.txt
	test -x $(BENCH_DIR)/argos/bin/python || $(PYTHON) -m venv $(BENCH_DIR)/argos
	$(BENCH_DIR)/argos/bin/python -m pip install -q -r $<
	touch $@

argos-check: $(STAMP) $(BENCH_DIR)/argos/.installed
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) scripts/argos_check.py $(ARGOS_ARGS)
