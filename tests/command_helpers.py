"""One way for a test to run Python in a fresh process: a command's module (`-m
t2t_lite.bin.t2t_export ...`), a helper script or a piece of code, its exit status checked, and
the JSON of its last output line read, as the commands print their reports.

A process is forked from a warm one (multiprocessing's forkserver, one per pytest worker) that has
imported t2t_lite, TensorFlow and Keras and nothing else: the command's own modules, its flags,
TensorFlow's runtime and every device are new in each, as in an interpreter started from nothing,
without TensorFlow's 4 s of imports each time. What a warm process cannot be is started from
nothing (`fresh=True`, and by itself): one with interpreter options, or whose environment sets a
variable that TensorFlow, oneDNN or Python read as they start differently from the warm one, and
one that looks at how TensorFlow starts (its start-up lines, --verbose).
"""

from __future__ import annotations

import atexit
import builtins
import json
import multiprocessing
import multiprocessing.forkserver
import os
import re
import runpy
import subprocess
import sys
import tempfile
import traceback

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
# What the warm process imports: the package (whose import holds back TensorFlow's start-up
# lines), then TensorFlow and Keras, as a command imports them.
PRELOAD = ["t2t_lite", "tensorflow", "keras"]
# Variables read as the interpreter, TensorFlow, oneDNN or the allocators start.
_START_VARIABLES = re.compile(
    r"^(TF_|TENSORFLOW|ONEDNN|DNNL|MKL|OMP_|KMP_|OPENBLAS|CUDA|XLA|KERAS|PYTHON(?!PATH$)|LD_|MALLOC|ABSL)"
)
_warm: dict = {}


def _start_environment(env) -> dict:
    return {k: v for k, v in env.items() if _START_VARIABLES.match(k)}


def _start_forkserver() -> None:
    """Starts the forkserver with PRELOAD in the environment ENV, whatever a test has set in
    os.environ when the first process is asked for: its imports read ENV's variables."""
    multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(ENV)
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _warm_context():
    """The forkserver context, started on first use, and what it started with."""
    if not _warm:
        _start_forkserver()
        context = multiprocessing.get_context("forkserver")
        bare = {k: v for k, v in ENV.items() if k != "PYTHONPATH"}
        fresh_path = subprocess.run(
            [sys.executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"],
            capture_output=True, text=True, env=bare, check=True,
        ).stdout  # fmt: skip
        _warm.update(context=context, env=_start_environment(ENV), sys_path=json.loads(fresh_path))
    return _warm


def _can_be_warm(args: tuple[str, ...], env: dict) -> bool:
    if not args or (args[0].startswith("-") and args[0] not in ("-m", "-c")):
        return False  # interpreter options
    return _start_environment(env) == _warm_context()["env"]


def _exit_status(code) -> int:
    """The status `raise SystemExit(code)` leaves, as the interpreter gives it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _run_main(args: list[str], sys_path: list[str]) -> None:
    """Runs `python ARGS` (-m MODULE, -c CODE or a script) in this process as `__main__`."""
    if args[0] == "-m":
        sys.argv, sys.path[:] = [args[1], *args[2:]], [os.getcwd(), *sys_path]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif args[0] == "-c":
        sys.argv, sys.path[:] = ["-c", *args[2:]], ["", *sys_path]
        code = compile(args[1], "<string>", "exec")
        exec(code, {"__name__": "__main__", "__builtins__": builtins})
    else:
        script = os.path.abspath(args[0])
        sys.argv, sys.path[:] = list(args), [os.path.dirname(script), *sys_path]
        runpy.run_path(script, run_name="__main__")


def _child(args, env, cwd, paths, sys_path) -> None:
    """In the forked process: the environment, folder and standard streams of the command,
    then the command, ending as the interpreter would."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys_path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p] + sys_path
    for fd, path in enumerate(paths):
        opened = os.open(path, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = open(0, closefd=False)
    try:
        _run_main(args, sys_path)
        status = 0
    except SystemExit as exit_:
        status = _exit_status(exit_.code)
    except BaseException:
        traceback.print_exc()
        status = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _run_warm(args, env, timeout, stdin, cwd) -> subprocess.CompletedProcess:
    warm = _warm_context()
    with tempfile.TemporaryDirectory() as folder:
        paths = [os.path.join(folder, name) for name in ("stdin", "stdout", "stderr")]
        for path, text in zip(paths, (stdin or "", "", ""), strict=True):
            with open(path, "w") as f:
                f.write(text)
        child = warm["context"].Process(
            target=_child, args=(list(args), dict(env), cwd or os.getcwd(), paths, warm["sys_path"])
        )
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired([sys.executable, *args], timeout)
        out, err = (open(p, encoding="utf-8", errors="replace").read() for p in paths[1:])
    return subprocess.CompletedProcess([sys.executable, *args], child.exitcode, out, err)


def run(
    *args: str,
    env: dict | None = None,
    timeout: float = 300,
    stdin: str | None = None,
    cwd: str | None = None,
    fresh: bool = False,
) -> subprocess.CompletedProcess:
    """`python ARGS...` in a new process, forked from the warm one unless `fresh` or it cannot
    be (the module's docstring); its exit status and output, as subprocess.run gives them."""
    env = ENV if env is None else env
    if not fresh and _can_be_warm(args, env):
        return _run_warm(args, env, timeout, stdin, cwd)
    return subprocess.run(
        [sys.executable, *args], input=stdin, capture_output=True, text=True, env=env,
        timeout=timeout, cwd=cwd,
    )  # fmt: skip


def run_python(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """`python ARGS...` as `run` runs it; the exit status must be 0 (the end of stderr is the
    message when it is not)."""
    done = run(*args, **kwargs)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def last_json(stdout: str):
    """The JSON value on the last line of a process's output."""
    return json.loads(stdout.strip().splitlines()[-1])


def run_json(*args: str, **kwargs):
    """`python ARGS...` as `run_python` runs it; the JSON of its last output line."""
    return last_json(run_python(*args, **kwargs).stdout)


def python_json(code: str, **kwargs):
    """The JSON of the last line that `python -c CODE` prints, in a new process."""
    return run_json("-c", code, **kwargs)


def command(name: str, *flags: str, **kwargs) -> subprocess.CompletedProcess:
    """The command NAME (t2t_decode or t2t-decode) with FLAGS, as `python -m
    t2t_lite.bin.t2t_decode FLAGS...`, run as `run` runs it."""
    return run("-m", "t2t_lite.bin." + name.replace("-", "_"), *flags, **kwargs)
