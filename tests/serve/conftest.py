"""What the export tests share, built once per session and read-only to the tests."""

from __future__ import annotations

import pytest
from reverse_words import ReverseWords, train_reverse_words


@pytest.fixture(scope="session")
def reverse_words(tmp_path_factory) -> ReverseWords:
    """The run trained to reverse word order (tests/reverse_words.py); restore it per module."""
    return train_reverse_words(tmp_path_factory.mktemp("reverse_words"))
