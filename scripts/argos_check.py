"""`make argos-check`: a run exported with `t2t-export --format=argos`, installed and used by
argostranslate, its translations printed beside t2t-decode's for the same lines.

  python scripts/argos_check.py --output_dir=RUN [--languages=en,de] [--source=FILE]
      [--count=N] [--beam_size=1]

argostranslate pulls stanza and torch, so it lives in a virtual environment of its own
(`.bench/argos`, which `make argos-check` makes from scripts/argos_requirements.txt). Run by
t2t_lite's Python, this script exports the run into a temporary folder, decodes the lines with
t2t-decode (`--beam_size`, `--alpha=0`), then runs itself under that environment's Python
(`--translate`): argostranslate installs the package (`package.install_from_path`) into a
temporary packages folder and translates each line (`ARGOS_BEAM_SIZE` = `--beam_size`).

argostranslate splits each text into sentences with MiniSBD, whose model for the source language
it downloads on first use. The lines here are sentences already, and the check runs offline, so
the translation's sentence splitter is set to take each line as one sentence; the rest (the
package's metadata, its SentencePiece model, the CTranslate2 search, the detokenization) is
argostranslate's own. Greedy search (`--beam_size=1`) finds the same translations as t2t-decode's;
docs/serving.md says what differs at a wider beam and why.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.dirname(sys.executable)
ARGOS_PYTHON = os.path.join(HERE, "..", ".bench", "argos", "bin", "python")
# Translations printed whatever they are; after these, only those that differ.
SHOWN = 3
LINES = [
    "Click the OK button to close the dialog.",
    "Select the cells that you want to copy.",
    "This function returns the number of characters in a string.",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True, help="the trained run")
    parser.add_argument("--languages", default=None, help="FROM,TO (default: the problem's)")
    parser.add_argument("--source", default=None, help="lines to translate (default: three)")
    parser.add_argument("--count", type=int, default=None, help="the first lines of --source")
    parser.add_argument("--beam_size", type=int, default=1)
    parser.add_argument(
        "--compute_type",
        default="default",
        help="ARGOS_COMPUTE_TYPE: default (the package's weights, as t2t-decode), auto, int8, ...",
    )
    parser.add_argument("--translate", nargs=4, metavar=("PACKAGE", "FROM", "TO", "LINES"))
    args = parser.parse_args()
    if args.translate:  # under argostranslate's environment
        print(json.dumps(argos_translate(*args.translate, args.beam_size, args.compute_type)))
        return
    lines = LINES
    if args.source:
        with open(args.source, encoding="utf-8") as f:
            lines = [line.strip() for line in itertools.islice(f, args.count)]
    with tempfile.TemporaryDirectory() as work:
        package, pair = export(args.output_dir, args.languages, work)
        source = os.path.join(work, "source.txt")
        with open(source, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
        ours = decode(args.output_dir, source, args.beam_size, work)
        command = [ARGOS_PYTHON, __file__, "--output_dir", args.output_dir]
        command += ["--beam_size", str(args.beam_size), "--compute_type", args.compute_type]
        command += ["--translate", package, *pair, source]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            sys.exit(f"argos_check: argostranslate failed:\n{done.stderr[-3000:]}")
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"argostranslate installed {answer['package']} (its folder {answer['folder']})\n")
    theirs = answer["translations"]
    same = 0
    for i, (line, mine, other) in enumerate(zip(lines, ours, theirs, strict=True)):
        same += mine == other
        if i < SHOWN or mine != other:  # the first few, and every one that differs
            print(f"line {i + 1}:\nsource:         {line}\nt2t-decode:     {mine}")
            verdict = "the same" if mine == other else "differs"
            print(f"argostranslate: {other}\n                ({verdict})\n")
    print(
        f"{same} of {len(lines)} translations the same (beam {args.beam_size}, "
        f"ARGOS_COMPUTE_TYPE={args.compute_type})"
    )


def export(output_dir: str, languages: str | None, work: str) -> tuple[str, list[str]]:
    """t2t-export --format=argos into `work`; returns the package and its language pair."""
    command = [os.path.join(BIN, "t2t-export"), f"--output_dir={output_dir}"]
    command += [f"--export_dir={work}/export", "--format=argos"]
    command += [f"--argos_languages={languages}"] if languages else []
    done = run(command, work)
    folder = json.loads(done.stdout.strip().splitlines()[-1])["argos"]
    with open(os.path.join(folder, "t2t_export.json"), encoding="utf-8") as f:
        info = json.load(f)
    meta = info["metadata"]
    return os.path.join(folder, info["package"]), [meta["from_code"], meta["to_code"]]


def decode(output_dir: str, source: str, beam_size: int, work: str) -> list[str]:
    """t2t-decode's translations of `source`, beam `beam_size`, no length penalty."""
    target = os.path.join(work, "t2t_decode.txt")
    command = [os.path.join(BIN, "t2t-decode"), f"--output_dir={output_dir}"]
    command += [f"--decode_from_file={source}", f"--decode_to_file={target}"]
    command += [f"--beam_size={beam_size}", "--alpha=0"]
    run(command, work)
    with open(target, encoding="utf-8") as f:
        return f.read().splitlines()


def run(command: list[str], work: str) -> subprocess.CompletedProcess:
    """Runs a t2t command (printed, the temporary folder as $WORK); exits with its error line."""
    shown = " ".join([os.path.basename(command[0]), *command[1:]]).replace(work, "$WORK")
    print(f"$ {shown}", flush=True)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit((done.stderr.strip().splitlines() or ["failed"])[-1])
    return done


class OneSentence:
    """A sentence splitter that takes the whole text as one sentence (the lines are sentences)."""

    def split_sentences(self, text: str) -> list[str]:
        return [text]


def argos_translate(
    package: str, source: str, target: str, lines: str, beam: int, compute_type: str
) -> dict:
    """Installs `package` into a temporary packages folder and translates each line of `lines`
    from `source` to `target` with argostranslate (beam `beam`, CTranslate2's `compute_type`):
    {"package": its name, "folder": where it was installed, "translations": [...]}."""
    home = tempfile.mkdtemp(prefix="argos-")
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        os.environ[name] = os.path.join(home, name.lower())
    os.environ["ARGOS_PACKAGES_DIR"] = os.path.join(home, "packages")
    os.environ["ARGOS_BEAM_SIZE"] = str(beam)
    os.environ["ARGOS_COMPUTE_TYPE"] = compute_type
    import argostranslate.package
    import argostranslate.translate

    argostranslate.package.install_from_path(package)
    (installed,) = argostranslate.package.get_installed_packages()
    translation = argostranslate.translate.get_translation_from_codes(source, target)
    translation.underlying.sentencizer = OneSentence()  # no MiniSBD download (see the doc)
    with open(lines, encoding="utf-8") as f:
        translations = [translation.translate(line.strip()) for line in f]
    return {
        "package": str(installed),
        "folder": installed.package_path.name,
        "translations": translations,
    }


if __name__ == "__main__":
    main()
