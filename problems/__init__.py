"""Problems: where the text comes from, which vocabulary, which metric.

Every module that registers problems is imported here by name, so a broken one fails loudly.
"""

from t2t_lite.problems import (  # noqa: F401  (each registers its problems)
    algorithmic,
    lohelp,
    parsing,
    translate,
)
from t2t_lite.problems.base import METRICS, Problem, datagen_options, read_metadata
from t2t_lite.problems.registry import (
    PROBLEMS,
    describe_options,
    get_problem,
    options_by_problem,
    register_problem,
)
from t2t_lite.problems.usr_dir import import_usr_dir

__all__ = [
    "METRICS",
    "PROBLEMS",
    "Problem",
    "datagen_options",
    "describe_options",
    "get_problem",
    "import_usr_dir",
    "options_by_problem",
    "read_metadata",
    "register_problem",
]
