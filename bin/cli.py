"""What the t2t-* commands share: absl's app.run around a main that reads flags only."""

from __future__ import annotations

from collections.abc import Callable

from absl import app


def run(main: Callable[[], None]) -> None:
    """Parses the flags, then calls `main()`. The commands take no positional arguments, so one
    (often a flag missing its `--`) is a usage error rather than silently ignored."""

    def main_with_argv(argv: list[str]) -> None:
        if len(argv) > 1:
            raise app.UsageError(f"unexpected arguments: {argv[1:]}")
        main()

    app.run(main_with_argv)
