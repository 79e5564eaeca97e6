"""A small explicit registry, shared by problems and hparams sets."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to objects.

    Registering a name twice raises; looking up a missing name raises a `KeyError` that lists the
    closest registered names. Nothing is registered implicitly: the modules that fill a registry
    are imported by name from their package's `__init__`, so an import error surfaces at once.
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str | None = None) -> Callable[[T], T]:
        """Decorator: `@REGISTRY.register()` uses the object's `__name__`."""

        def decorate(obj: T) -> T:
            self.add(name or obj.__name__, obj)
            return obj

        return decorate

    def add(self, name: str, obj: T) -> None:
        if name in self._items:
            raise KeyError(f"{self.kind} {name!r} is already registered")
        self._items[name] = obj

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self._items), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise KeyError(
                f"unknown {self.kind} {name!r}{hint} (registered: {len(self._items)}; "
                f"list them with t2t-info --list)"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)
