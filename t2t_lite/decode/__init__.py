"""Decoding: model-agnostic searches, constraints, the Transformer's step, and the decode runner."""
