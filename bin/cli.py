"""What the t2t-* commands share: absl's app.run around a main that reads flags only.

`--help` lists the command's own flags (absl's console-script entry points otherwise list none),
and a user's mistake (a bad flag value, a missing file or run, a malformed input line) ends with
one line `t2t-decode: error: <message>` and exit status 2; a failure that is not the user's
(training interrupted, a loss that went non-finite) ends in the same kind of line with exit
status 1. Tracebacks are for bugs, or shown for every error with --verbose.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import textwrap
import traceback
from collections.abc import Callable

from absl import app, flags

from t2t_lite.extras import MissingExtraError

flags.DEFINE_boolean("verbose", False, "Show tracebacks and TensorFlow's own log lines.")

# What a user can cause and fix: wrong values, missing or unreadable files, unknown names, an
# optional package not installed (the message names the extra).
USER_ERRORS = (ValueError, OSError, KeyError, app.UsageError, MissingExtraError)


def command_name(module_name: str) -> str:
    """t2t_lite.bin.t2t_avg_checkpoints --> t2t-avg-checkpoints."""
    return module_name.rsplit(".", 1)[-1].replace("_", "-")


def _adopt_help(module_name: str) -> None:
    """Lists the command module's flags (and those it adopted) under `--help`, and its
    docstring as the usage text, whatever name the command was started by."""
    values = flags.FLAGS
    for flag in values.get_key_flags_for_module(module_name):
        values.register_key_flag_for_module(sys.argv[0], flag)
    values.register_key_flag_for_module(sys.argv[0], values["verbose"])
    main = sys.modules.get("__main__")
    if main is not None and not main.__doc__:
        main.__doc__ = sys.modules[module_name].__doc__


def _message(error: BaseException) -> str:
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])  # str(KeyError) adds quotes
    if isinstance(error, OSError) and error.filename and error.strerror:
        # "[Errno 2] No such file or directory: 'x'" --> "--reference: file not found: x"
        what = _OS_ERRORS.get(type(error), error.strerror[:1].lower() + error.strerror[1:])
        flag = _flag_holding(str(error.filename))
        return f"{flag + ': ' if flag else ''}{what}: {error.filename}"
    return str(error)


_OS_ERRORS = {
    FileNotFoundError: "file not found",
    FileExistsError: "already exists",
    IsADirectoryError: "a folder, not a file",
    NotADirectoryError: "not a folder",
    PermissionError: "permission denied",
}


def _flag_holding(path: str) -> str | None:
    """The --flag of the command whose value is `path` (or lists it), if one is."""
    values = flags.FLAGS
    for name in values.get_key_flags_for_module(sys.argv[0]):
        value = name.value
        if value == path or (isinstance(value, list) and path in value):
            return f"--{name.name}"
    return None


def run(main: Callable[[], None], failures: tuple[type[BaseException], ...] = ()) -> None:
    """Parses the flags, then calls `main()`. The commands take no positional arguments, so one
    (often a flag missing its `--`) is a usage error rather than silently ignored. `failures`
    are errors that end a command without being the user's mistake (a loss that went
    non-finite, an interrupted run): one line too, with exit status 1."""
    module = main.__module__
    if module == "__main__":  # python -m t2t_lite.bin.t2t_decode
        module = getattr(sys.modules["__main__"].__spec__, "name", module)
    name = command_name(module)
    _adopt_help(module)

    def main_with_argv(argv: list[str]) -> None:
        if len(argv) > 1:
            fail(name, f"unexpected arguments: {argv[1:]}")
        if not flags.FLAGS.verbose:
            _hide_library_info()
        try:
            main()
        except failures as error:
            if flags.FLAGS.verbose:
                traceback.print_exc()
            fail(name, _message(error), status=1)
        except USER_ERRORS as error:
            if flags.FLAGS.verbose:
                traceback.print_exc()
            fail(name, _message(error))
        except KeyboardInterrupt as stop:  # Ctrl-C, or a SIGTERM t2t-train's lock turned into it
            if flags.FLAGS.verbose:
                traceback.print_exc()
            fail(name, interrupted(stop), status=130 if str(stop) != "SIGTERM" else 143)

    app.run(main_with_argv, flags_parser=_flags_parser(name))


def interrupted(stop: KeyboardInterrupt) -> str:
    """The one line of a command stopped by a signal outside its own handling of it."""
    return (
        f"stopped by {str(stop) or 'SIGINT'} before it finished; run the same command again to "
        "go on (t2t-train resumes from its last checkpoint)"
    )


class _LibraryInfoHidden(logging.Filter):
    """Drops the INFO lines that TensorFlow and Keras log themselves ("Using MirroredStrategy",
    the saver's "Sharding callback duration"); their warnings and errors pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        return not any(part in record.pathname for part in _LIBRARY_PATHS)


_LIBRARY_PATHS = (f"{os.sep}tensorflow{os.sep}", f"{os.sep}keras{os.sep}")


def _hide_library_info() -> None:
    """Keeps the libraries' INFO lines out of the command's log (they return with --verbose)."""
    for logger in (logging.getLogger(), logging.getLogger("absl"), logging.getLogger("tensorflow")):
        logger.addFilter(_LibraryInfoHidden())
        for handler in logger.handlers:
            handler.addFilter(_LibraryInfoHidden())


def check_files(*names: str) -> None:
    """Refuses a file flag of `names` whose file does not exist, in one line naming the flag
    (`--decode_from_file: file not found: in.txt`), before a command loads anything."""
    for name in names:
        path = flags.FLAGS[name].value
        if path and not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)


def fail(name: str, message: str, status: int = 2) -> None:
    """Prints `name: error: message` on stderr and exits with `status` (2: the user's mistake)."""
    sys.stderr.write(f"{name}: error: {message}\n")
    sys.stderr.flush()
    sys.exit(status)


# More help after the flags, by command (t2t-datagen: its problems' options): the section's
# text, and the flags it describes instead of the flag list.
HELP_SECTIONS: dict[str, tuple[Callable[[], str], frozenset[str]]] = {}


def help_text(name: str) -> str:
    """`--help`: the command's text, then its flags (required ones marked), defaults as a user
    types them, and the command's own sections (`HELP_SECTIONS`). `--helpfull` is absl's."""
    main = sys.modules.get("__main__")
    lines = [(main.__doc__ or "").strip(), "", f"flags of {name} (--helpfull: every flag):"]
    section, described = HELP_SECTIONS.get(name, (None, frozenset()))
    own = sorted(flags.FLAGS.get_key_flags_for_module(sys.argv[0]), key=lambda f: f.name)
    for flag in own:
        if flag.name not in described:
            lines += flag_lines(flag)
    if section is not None:
        lines += ["", section().rstrip()]
    return "\n".join(lines) + "\n"


def flag_lines(flag: flags.Flag) -> list[str]:
    """`  --name: help (default: value)` wrapped at 100 columns; booleans as --[no]name."""
    shown = f"--[no]{flag.name}" if flag.boolean else f"--{flag.name}"
    text = (flag.help or "").strip()
    if isinstance(flag.parser, flags.EnumParser) and text.startswith("<"):
        text = text.split(">: ", 1)[-1]  # absl's "<a|b>: " prefix; the values are listed below
    if _required(flag):
        text = f"(required) {text}"
    if isinstance(flag, flags.MultiFlag) or flag.default is None or flag.default in ("", []):
        pass  # no default worth showing
    elif isinstance(flag.default, list):
        text += f" (default: {','.join(map(str, flag.default))})"
    else:
        text += f" (default: {flag.default})"
    if isinstance(flag.parser, flags.EnumParser):
        text += f" One of: {', '.join(flag.parser.enum_values)}."
    return textwrap.wrap(f"{shown}: {text}", 100, initial_indent="  ", subsequent_indent="      ")


def _required(flag: flags.Flag) -> bool:
    """Whether absl's `required=True` (`flags.mark_flag_as_required`) marked `flag`: it adds a
    validator refusing None."""
    refusal = f"Flag --{flag.name} must have a value other than None."
    return any(getattr(v, "message", "") == refusal for v in flag.validators)


def _flags_parser(name: str) -> Callable[[list[str]], list[str]]:
    """absl's flag parsing, with a bad value or an unknown flag as one line (exit status 2) and
    --help ending with status 0."""

    def parse(argv: list[str]) -> list[str]:
        if any(arg in ("--help", "-h", "-?", "--helpshort") for arg in argv[1:]):
            sys.stdout.write(help_text(name))
            sys.exit(0)
        try:
            return flags.FLAGS(argv)
        except flags.Error as error:
            fail(name, str(error))
        except SystemExit as stop:  # absl's --help and --helpfull print, then exit with 1
            if stop.code == 1 and any(arg.startswith(("--help", "-h", "-?")) for arg in argv):
                sys.exit(0)
            raise
        return []

    return parse
