"""A --usr_dir for the multi-worker test of the budget's choice of model: algorithmic_reverse with
two sets to choose from, timed in a budget of seconds too."""

from t2t_lite.problems.algorithmic import AlgorithmicReverse
from t2t_lite.problems.registry import register_problem
from t2t_lite.train import model_choice

model_choice.PROBE_MIN_MINUTES = 0.0


@register_problem("reverse_two_rungs")
class ReverseTwoRungs(AlgorithmicReverse):
    budget_ladder = ("transformer_tiny", "transformer_budget_xs")
