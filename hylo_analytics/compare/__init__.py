"""The compare stage: paired comparisons as joins on the key, and their verdicts.

- :func:`compare_scores`: the engine, every candidate against one parent on a scores frame;
- :func:`compare_runs` (``Store.compare``): the engine over the store's resolved scores,
  behind the comparability gate (:class:`ComparabilityError`);
- :func:`pooled_compare` (``Store.pooled_compare``): one policy against another over
  several suites, one pooled effect beside the suite rows;
- :func:`paired_compare`: the two-run case (:class:`PairedComparison`), same engine;
- :mod:`~hylo_analytics.compare.verdicts`: ``improved | regressed | unchanged |
  inconclusive`` by :class:`StatisticalRule` or :class:`RelativeNoiseRule`;
- :func:`flip_scores` / :func:`flip_runs` (``Store.flips``): the keys that flipped, one row
  each, paired as the comparison pairs them;
- :func:`flip_matrix` (``Store.flip_matrix``): each key's outcome in each of a set of runs
  (:class:`FlipMatrix`): difficulty, keys that always fail, keys newly broken in the latest;
- :func:`plan_from_runs`: how many pairs a comparison needs (power planning);
- :func:`epochs_plan` (``Store.epochs_plan``): a difference's variance split into its
  within-item (epochs) and between-item parts, and the epochs or items that halve it;
- :func:`rank_policies` / :func:`rank_runs` (``Store.rank``): N policies ranked with the
  uncertainty of the ranking (pairwise matrix, rank sets, Bradley-Terry strengths);
- :func:`pareto_runs` (``Store.pareto``): the cost-quality Pareto front of N policies, each
  one's P(on the front) by a bootstrap of keys (:class:`ParetoFront`);
- :func:`calibrate_runs` (``Store.calibrate``): rates and paired differences from a few
  trusted grades and a judge's grades of every key, by PPI++ (:class:`Calibration`);
- :func:`critical_difference_scores` (``Store.critical_difference``): average ranks across
  tasks or suites, Friedman's test, Nemenyi or Wilcoxon-Holm cliques
  (:class:`CriticalDifference`);
- :func:`sequential_compare` / :class:`SequentialMonitor`: anytime-valid looks after batches;
- :func:`trend_scores` / :func:`trend_runs` (``Store.trend``): runs ordered by version, each
  task's rate per version and its regression point (:class:`Trend`).
"""

from hylo_analytics.compare.calibration import Calibration, calibrate_runs
from hylo_analytics.compare.critical_difference import (
    CriticalDifference,
    critical_difference_scores,
)
from hylo_analytics.compare.engine import COLUMNS, compare_scores
from hylo_analytics.compare.epochs import epochs_plan
from hylo_analytics.compare.flips import CHANGES, flip_runs, flip_scores
from hylo_analytics.compare.item_matrix import OUTCOMES, FlipMatrix, flip_matrix
from hylo_analytics.compare.paired import PairedComparison, paired_compare
from hylo_analytics.compare.pareto import ParetoFront, pareto_runs
from hylo_analytics.compare.planning import RunPlan, plan_from_runs
from hylo_analytics.compare.pooled import pooled_compare
from hylo_analytics.compare.pooled_runs import pooled_compare_runs
from hylo_analytics.compare.ranking import Ranking, rank_policies, rank_runs
from hylo_analytics.compare.runs import ComparabilityError, compare_runs
from hylo_analytics.compare.sequential import SequentialMonitor, sequential_compare
from hylo_analytics.compare.trend_runs import trend_runs
from hylo_analytics.compare.trends import Trend, trend_scores
from hylo_analytics.compare.verdicts import (
    VERDICTS,
    RelativeNoiseRule,
    StatisticalRule,
    add_verdicts,
)

__all__ = [
    "CHANGES",
    "COLUMNS",
    "OUTCOMES",
    "VERDICTS",
    "Calibration",
    "ComparabilityError",
    "CriticalDifference",
    "FlipMatrix",
    "PairedComparison",
    "ParetoFront",
    "Ranking",
    "RelativeNoiseRule",
    "RunPlan",
    "SequentialMonitor",
    "StatisticalRule",
    "Trend",
    "add_verdicts",
    "calibrate_runs",
    "compare_runs",
    "compare_scores",
    "critical_difference_scores",
    "epochs_plan",
    "flip_matrix",
    "flip_runs",
    "flip_scores",
    "paired_compare",
    "pareto_runs",
    "plan_from_runs",
    "pooled_compare",
    "pooled_compare_runs",
    "rank_policies",
    "rank_runs",
    "sequential_compare",
    "trend_runs",
    "trend_scores",
]
