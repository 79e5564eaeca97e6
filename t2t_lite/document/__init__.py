"""Whole documents: their layout, sentences and inline markup, around any translation
engine."""
