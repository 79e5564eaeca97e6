"""The model: the Transformer, its Keras layers, the label-smoothed loss and its FLOP count."""

from t2t_lite.model.transformer import Transformer

__all__ = ["Transformer"]
