"""A shim for tools that look for setup.py: everything is declared in pyproject.toml."""

from setuptools import setup

setup()
