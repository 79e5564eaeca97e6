"""Evaluation metrics: BLEU as sacreBLEU and as the paper reports it, and EVALB bracket F1."""
