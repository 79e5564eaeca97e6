"""The registry of problems: `@register_problem`, `get_problem`, and the options of every
registered problem as t2t-datagen's --help lists them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from t2t_lite.problems.base import NUM_PROCESSES_HELP, Problem
from t2t_lite.registry import Registry

PROBLEMS: Registry[type[Problem]] = Registry("problem")


def _snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def register_problem(
    name_or_class: str | type[Problem] | None = None,
) -> Callable[[type[Problem]], type[Problem]] | type[Problem]:
    """Registers a Problem subclass: `@register_problem("my_problem")` or bare
    `@register_problem` (uses the class's `name`, else its name in snake_case)."""

    def decorate(cls: type[Problem], name: str | None) -> type[Problem]:
        if not (isinstance(cls, type) and issubclass(cls, Problem)):
            raise TypeError(f"register_problem expects a Problem subclass, got {cls!r}")
        name = name or cls.__dict__.get("name") or _snake_case(cls.__name__)
        cls.name = name
        PROBLEMS.add(name, cls)
        return cls

    if isinstance(name_or_class, type):
        return decorate(name_or_class, None)
    return lambda cls: decorate(cls, name_or_class)


def _option_help(cls: type[Problem], option: str) -> str:
    for klass in cls.__mro__:
        text = vars(klass).get("option_help", {}).get(option)
        if text:
            return text
    return f"Problem option {option} (default {cls.default_options[option]!r})."


def describe_options() -> dict[str, str]:
    """Every option of the registered problems --> its help text and the problems that take it,
    e.g. {"tfds_dir": "tensorflow-datasets data_dir. [wmt14_ende, wmt14_enfr]"}; problems that
    describe a shared option differently each get their text."""
    problems_by_text: dict[str, dict[str, list[str]]] = {
        "num_processes": {NUM_PROCESSES_HELP: ["every problem"]}
    }
    for name in PROBLEMS:
        cls = PROBLEMS.get(name)
        for option in cls.default_options:
            text = _option_help(cls, option)
            problems_by_text.setdefault(option, {}).setdefault(text, []).append(name)
    return {
        option: " ".join(f"{text} [{', '.join(names)}]" for text, names in by_text.items())
        for option, by_text in sorted(problems_by_text.items())
    }


def options_by_problem() -> list[tuple[list[str], list[tuple[str, Any, str]]]]:
    """The registered problems' options for t2t-datagen's --help: (problem names, [(option,
    default, help text)]), problems with the same options and texts together."""
    groups: dict[tuple, list[str]] = {}
    for name in sorted(PROBLEMS):
        cls = PROBLEMS.get(name)
        options = tuple(
            (option, default, _option_help(cls, option))
            for option, default in sorted(cls.default_options.items())
        )
        groups.setdefault(options, []).append(name)
    every = (["every problem"], [("num_processes", None, NUM_PROCESSES_HELP)])
    return [*((names, list(options)) for options, names in groups.items()), every]


def get_problem(name: str) -> Problem:
    """An instance of the registered problem `name` (KeyError with close names otherwise)."""
    return PROBLEMS.get(name)()
