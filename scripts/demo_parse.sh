#!/usr/bin/env bash
# `make demo-parse`: parse GUM end to end on the CPU in at most ~30 minutes.
#   datagen (GUM's document split) -> t2t-train with a time budget (the schedule fitted to the
#   minutes; the better of the last, averaged and EMA weights kept in run/final) -> t2t-decode
#   (constrained: well-formed trees over the source words; the beam and length penalty the end of
#   the budget chose on the dev documents) -> t2t-evalb against the gold trees.
# Settings (environment): GUM_DIR (a folder of GUM's *.ptb files; default: fetched by
# scripts/fetch_gum.py into ~/.cache/t2t_lite, checked and resumable), DEMO_DIR, TRAIN_MINUTES,
# BEAM_SIZE (unset: the run's tuned search), HPARAMS, PROBLEM_OPTIONS
# (datagen's --problem_options, e.g. vocab_size=8000: another DEMO_DIR, as the data differs).
set -euo pipefail

cd "$(dirname "$0")/.."
DEMO_DIR=${DEMO_DIR:-/tmp/t2t_demo_parse}
TRAIN_MINUTES=${TRAIN_MINUTES:-27}  # with datagen and decoding, within 30 minutes
BEAM_SIZE=${BEAM_SIZE:-}  # set: decode with this beam instead of the one the run tuned on dev
HPARAMS=${HPARAMS:-}
PROBLEM_OPTIONS=${PROBLEM_OPTIONS:-}
BIN=.venv/bin
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}

if [ -z "${GUM_DIR:-}" ]; then
    GUM_DIR=$("$BIN/python" scripts/fetch_gum.py) || exit 2  # its error line says what to do
elif ! ls "$GUM_DIR"/*.ptb > /dev/null 2>&1; then
    echo "demo-parse: error: GUM_DIR=$GUM_DIR holds no *.ptb files: point it at GUM's const/" \
        "folder, or unset it to fetch the trees" >&2
    exit 2
fi
start=$(date +%s)
stamp() { echo "demo-parse: [$(( $(date +%s) - start ))s] $*"; }

stamp "datagen into $DEMO_DIR/data"
# No vocab_size: the vocabulary is sized from the training trees (every word seen at least 3
# times, and the signatures of the rarer ones; docs/parsing.md, "Vocabulary").
"$BIN/t2t-datagen" --problem=parsing_trees --data_dir="$DEMO_DIR/data" --gum_dir="$GUM_DIR" \
    --problem_options="$PROBLEM_OPTIONS"

# --train_minutes fits the learning-rate schedule to the minutes (docs/training.md, "Training on
# a time budget") and ends with the end-of-run choice in run/final, which t2t-decode then reads.
rm -rf "$DEMO_DIR/run"  # a fresh, timed run each time (the data is reused)
# No --hparams_set: the budget's choice from the parsing ladder (transformer_parsing_small alone).
stamp "training the budget's choice of model for $TRAIN_MINUTES minutes"
"$BIN/t2t-train" --problem=parsing_trees --hparams="$HPARAMS" \
    --data_dir="$DEMO_DIR/data" --output_dir="$DEMO_DIR/run" --train_minutes="$TRAIN_MINUTES" \
    --eval_every=500 --eval_batches=10 --save_every=500 --log_every=100

# Unless BEAM_SIZE says, t2t-decode uses the search the end of the budget tuned on the dev
# documents (run/search.json: beam 21 or 48, alpha 0.0, 0.3 or 0.6; docs/parsing.md), and its
# log names it.
search="the search tuned on dev: $DEMO_DIR/run/search.json"
beam_flag=()
if [ -n "$BEAM_SIZE" ]; then
    beam_flag=(--beam_size="$BEAM_SIZE")
    search="beam $BEAM_SIZE"
fi
stamp "decoding the $(wc -l < "$DEMO_DIR/data/test.source.txt") test sentences ($search)"
"$BIN/t2t-decode" --output_dir="$DEMO_DIR/run" "${beam_flag[@]}" \
    --decode_from_file="$DEMO_DIR/data/test.source.txt" \
    --decode_to_file="$DEMO_DIR/test.decoded.trees"

stamp "scoring with t2t-evalb"
"$BIN/t2t-evalb" --gold="$DEMO_DIR/data/test.gold.trees" --test="$DEMO_DIR/test.decoded.trees" \
    --summary_only --max_errors=-1
stamp "done"
