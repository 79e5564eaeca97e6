"""The printed outputs of the README's quick start and docs/tour.md, made by running their
commands, so that they show what the software prints now: `make docs-outputs` (about 4
minutes; run it on an otherwise idle machine, since the blocks show step rates).

A page marks each block this script writes with a line `<!-- output: NAME -->` right before its
fence; the script runs NAME's commands in a temporary folder and replaces the block's text.
Log lines lose their date, time and thread (`model_choice.py] model choice: ...`; the README's
blocks keep the message alone); TensorFlow's start-up lines and most progress lines are left out
(`...` marks where). tests/test_docs.py checks that every marked block has its commands here.

  python scripts/docs_outputs.py [--only=quick-start,tour]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = os.path.dirname(sys.executable)
MARKER = re.compile(r"^<!-- output: ([\w-]+) -->\n```\n(.*?)^```", re.M | re.S)
# An absl log line: level, date, time, thread, file:line] message.
ABSL = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ ([\w.]+):\d+\] (.*)$")
# The lines a block keeps of training's progress: the first progress line, then one per 1,000
# steps, each with the budget line after it.
PROGRESS = re.compile(r"^step (\d+)(/\d+)? loss ")
QS, TOUR = "/tmp/qs", "/tmp/tour"


def run(command: str, cwd: str) -> list[tuple[str, str]]:
    """Runs a shell command line of t2t-* commands (this environment's); returns its output as
    (file, message) pairs, file "" for lines that are not absl's."""
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"], TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(
        command, shell=True, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, check=False,
    )  # fmt: skip
    if done.returncode:
        sys.exit(f"docs_outputs: error: `{command}` failed ({done.returncode}):\n{done.stdout}")
    lines = []
    for line in done.stdout.splitlines():
        match = ABSL.match(line)
        lines.append((match.group(1), match.group(2)) if match else ("", line))
    return lines


def keep_progress(lines: list[tuple[str, str]], every: int = 1000) -> list[tuple[str, str]]:
    """The lines without most of training's progress: the first progress line and one per
    `every` steps, each with the budget's line that follows it; `...` where lines are left out."""
    kept, seen, skipped, budget_wanted = [], False, False, False
    for file, message in lines:
        progress = PROGRESS.match(message)
        if progress:
            keep = budget_wanted = not seen or int(progress.group(1)) % every == 0
            seen = True
        else:
            keep = budget_wanted or not message.startswith("budget: ")
            budget_wanted = False
        if not keep:
            skipped = True
            continue
        if skipped:
            kept.append(("", "..."))
            skipped = False
        kept.append((file, message))
    return kept


def text(commands: list[tuple[str, Callable]], cwd: str, prefixes: bool) -> str:
    """Each command (with `$ `) and the lines its filter keeps."""
    out = []
    for command, keep in commands:
        out.append("$ " + command)
        for file, message in keep(run(command, cwd)):
            out.append(f"{file}] {message}" if file and prefixes else message)
    return "\n".join(out) + "\n"


def _everything(lines):
    return lines


def _printed(lines):
    """What a command prints on stdout (no log lines)."""
    return [(f, m) for f, m in lines if not f]


def _last(lines):
    return lines[-1:]


def _quick_start() -> str:
    train = (
        f"t2t-train --problem=algorithmic_reverse --data_dir={QS}/data --output_dir={QS}/run "
        "--train_minutes=2"
    )
    decode = f"printf '1 2 3 4 5\\n9 8 7 6\\n4 4 2 6 1 3 0 7\\n' | t2t-decode --output_dir={QS}/run"
    commands = [
        (f"t2t-datagen --problem=algorithmic_reverse --data_dir={QS}/data", _last),
        (train, keep_progress),
        (decode, _printed),
    ]
    return text(commands, "/", prefixes=False)


def _tour() -> dict[str, str]:
    data = (
        f"t2t-datagen --problem=algorithmic_reverse --data_dir={TOUR}/data "
        "--problem_options=max_sequence_length=6,train_size=2000,dev_size=200"
    )
    train = (
        f"t2t-train --problem=algorithmic_reverse --hparams_set=transformer_tiny "
        "--hparams=warmup_steps=60,learning_rate=0.6,batch_size=2048,jit_compile=true "
        f"--data_dir={TOUR}/data --output_dir={TOUR}/run --train_steps=300 --eval_every=100"
    )
    decode = (
        f"printf '1 2 3 4 5\\n9 8 7\\n4 4 2 6 1 3\\n' > {TOUR}/in.txt && t2t-decode "
        f"--output_dir={TOUR}/run --decode_from_file={TOUR}/in.txt "
        f"--decode_to_file={TOUR}/out.txt && cat {TOUR}/out.txt"
    )
    export = (
        f"t2t-export --output_dir={TOUR}/run --export_dir={TOUR}/export --beam_size=2 --alpha=0.6"
    )
    blocks = {
        "tour-data": text([(data, keep_progress)], "/", True),
        "tour-train": text([(train, lambda lines: keep_progress(lines, 200))], "/", True),
        "tour-decode": text([(decode, _everything)], "/", True),
        "tour-export": text([(export, _everything)], "/", True),
    }
    blocks["tour-query"] = _query(f"{TOUR}/export")
    return blocks


def _query(export_dir: str) -> str:
    sys.path.insert(0, str(REPO / "scripts"))
    from screenshot_serve import serving

    with serving(
        [f"--export_dir={export_dir}", "--model_name=reverse"], f"{TOUR}/serve.log"
    ) as url:
        os.environ["URL"] = url.rstrip("/")
        commands = [
            "printf '1 2 3 4 5\\n9 8 7\\n' | t2t-query --server=$URL --model=reverse",
            "printf '1 2 3 4 5\\n9 8 7\\n' | t2t-query --server=$URL --model=reverse "
            "--signature_name=nbest",
            'curl -s -d \'{"instances": ["1 2 3 4 5", "9 8 7"]}\' $URL/v1/models/reverse:predict',
        ]
        return text([(c, _everything) for c in commands], "/", True)


GENERATORS: dict[str, Callable[[], dict[str, str]]] = {
    "quick-start": lambda: {"quick-start": _quick_start()},
    "tour": _tour,
}
NAMES = {"quick-start": "quick-start"} | {
    f"tour-{step}": "tour" for step in ("data", "train", "decode", "export", "query")
}
PAGES = [REPO / "README.md", REPO / "docs" / "tour.md"]


def marked_blocks(page: Path) -> list[str]:
    """The names of the blocks `page` marks."""
    return [name for name, _ in MARKER.findall(page.read_text(encoding="utf-8"))]


def write(blocks: dict[str, str]) -> None:
    for page in PAGES:
        source = page.read_text(encoding="utf-8")

        def replace(match: re.Match) -> str:
            name = match.group(1)
            body = blocks.get(name, match.group(2))
            return f"<!-- output: {name} -->\n```\n{body}```"

        page.write_text(MARKER.sub(replace, source), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="Comma-separated generators: quick-start, tour.")
    args = parser.parse_args()
    wanted = args.only.split(",") if args.only else list(GENERATORS)
    blocks: dict[str, str] = {}
    for name in wanted:
        for folder in {"quick-start": [QS], "tour": [TOUR]}[name]:
            subprocess.run(["rm", "-rf", folder], check=True)
            os.makedirs(folder)
        print(f"docs_outputs: running {name}", flush=True)
        blocks.update(GENERATORS[name]())
    write(blocks)
    print("docs_outputs: wrote " + ", ".join(sorted(blocks)))


if __name__ == "__main__":
    main()
