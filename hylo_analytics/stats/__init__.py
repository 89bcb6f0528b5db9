"""The statistics engine: pure numpy/scipy functions, vectorized over groups.

Every statistic the toolkit reports is computed here, once, and every caller (``aggregate``,
``compare``, the report, the CLI) calls these functions; the SQL views take their interval
constants from here too. Every interval of ``aggregate`` and ``compare`` comes through one
entry point, :mod:`~hylo_analytics.stats.interval` (:func:`mean_interval`,
:func:`paired_interval`), named by one vocabulary (:mod:`~hylo_analytics.stats.methods`:
``CIMethod``). One vocabulary throughout:

- ``method``: an interval's name (:data:`CI_METHODS`; ``ci=`` in the verbs);
- ``level``: two-sided coverage of an interval (default :data:`DEFAULT_LEVEL`, 0.95);
- ``n_resamples``: bootstrap resamples (default :data:`DEFAULT_RESAMPLES`);
- ``seed``: an int, ``None`` or a :class:`numpy.random.Generator` (default
  :data:`DEFAULT_SEED`, 0); the same seed and inputs give the same result;
- ``reducer``: how the epochs of one key are reduced (:mod:`~hylo_analytics.stats.reducers`);
- ``alternative``: ``"greater"`` (the candidate is better) or ``"two-sided"``.

Modules: :mod:`~hylo_analytics.stats.closed_form` (Wilson, Clopper-Pearson, normal, clustered
standard errors), :mod:`~hylo_analytics.stats.bootstrap` (percentile and BCa, stratified, for
means and paired differences alike), :mod:`~hylo_analytics.stats.paired` (Tango and Newcombe intervals for paired proportions, the
score test of equivalence), :mod:`~hylo_analytics.stats.significance` (McNemar,
Wilcoxon, Holm, Benjamini-Hochberg), :mod:`~hylo_analytics.stats.pooled` (a difference pooled
over suites: the stratified sign-flip test, MOVER, the stratified paired bootstrap),
:mod:`~hylo_analytics.stats.reducers` (epochs of a key),
:mod:`~hylo_analytics.stats.repeated` (repeated samples of an item: pass@k and pass^k curves,
the within / between split of a difference and the epochs that halve its interval),
:mod:`~hylo_analytics.stats.summaries` (across tasks: IQM, performance profiles, probability of
improvement, as rliable), :mod:`~hylo_analytics.stats.pareto` (cost-quality Pareto fronts and
each policy's P(on the front) by a bootstrap of keys),
:mod:`~hylo_analytics.stats.critical_difference` (average ranks across blocks, Friedman,
Nemenyi, Wilcoxon-Holm cliques: Demšar's diagram), :mod:`~hylo_analytics.stats.shrinkage`
(small-n pooling: per-task rates shrunk toward their suite's
:mod:`~hylo_analytics.stats.beta_binomial` prior), :mod:`~hylo_analytics.stats.clustered` (CR2
cluster-robust inference on a mean or paired difference, Bell-McCaffrey df: ``cluster=``).
"""

from hylo_analytics.stats.beta_binomial import BetaBinomialFit, fit_beta_binomial
from hylo_analytics.stats.bootstrap import (
    BootstrapMethod,
    BootstrapTest,
    bootstrap_ci,
    bootstrap_means,
    bootstrap_test,
)
from hylo_analytics.stats.closed_form import (
    DEFAULT_LEVEL,
    StatisticsWarning,
    clopper_pearson,
    clustered_stderr,
    hall_ci,
    normal_ci,
    wilson,
    z_value,
)
from hylo_analytics.stats.clustered import (
    ClusterRobust,
    cluster_robust,
    cluster_robust_over,
    cluster_totals,
    pool_strata,
)
from hylo_analytics.stats.critical_difference import (
    CriticalDifferenceStats,
    Friedman,
    block_ranks,
    critical_difference_test,
    friedman_test,
    nemenyi_cd,
    nemenyi_p,
    wilcoxon_pairs,
)
from hylo_analytics.stats.interval import (
    IntervalSpec,
    PairedInterval,
    mean_interval,
    paired_interval,
)
from hylo_analytics.stats.methods import (
    CI_METHODS,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    CIMethod,
    Seed,
)
from hylo_analytics.stats.paired import newcombe_ci, tango_ci, tango_p
from hylo_analytics.stats.pareto import ParetoBootstrap, pareto_bootstrap, pareto_front
from hylo_analytics.stats.pooled import (
    PooledBootstrap,
    SignFlip,
    Weighting,
    mover_ci,
    pooled_bootstrap,
    sign_flip_p,
    suite_weights,
)
from hylo_analytics.stats.ppi import PPIEstimate, ppi_mean, ppi_paired
from hylo_analytics.stats.reducers import Reducer, at_least, pass_at_k, reducer
from hylo_analytics.stats.repeated import (
    PassCurves,
    VarianceSplit,
    epochs_to_halve,
    pass_at,
    pass_curves,
    pass_hat,
    variance_split,
    width_at,
)
from hylo_analytics.stats.shrinkage import ShrunkRates, shrink_rates
from hylo_analytics.stats.significance import (
    Alternative,
    benjamini_hochberg,
    holm,
    mcnemar_exact,
    mcnemar_p,
    signed_rank_p,
    wilcoxon_p,
)
from hylo_analytics.stats.summaries import (
    TaskSummary,
    interquartile_mean,
    performance_profile,
    probability_of_improvement,
    probability_of_improvement_ci,
    summarize_tasks,
)

__all__ = [
    "CI_METHODS",
    "DEFAULT_LEVEL",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "Alternative",
    "BetaBinomialFit",
    "BootstrapMethod",
    "BootstrapTest",
    "CIMethod",
    "ClusterRobust",
    "CriticalDifferenceStats",
    "Friedman",
    "IntervalSpec",
    "PPIEstimate",
    "PairedInterval",
    "ParetoBootstrap",
    "PassCurves",
    "PooledBootstrap",
    "Reducer",
    "Seed",
    "ShrunkRates",
    "SignFlip",
    "StatisticsWarning",
    "TaskSummary",
    "VarianceSplit",
    "Weighting",
    "at_least",
    "benjamini_hochberg",
    "block_ranks",
    "bootstrap_ci",
    "bootstrap_means",
    "bootstrap_test",
    "clopper_pearson",
    "cluster_robust",
    "cluster_robust_over",
    "cluster_totals",
    "clustered_stderr",
    "critical_difference_test",
    "epochs_to_halve",
    "fit_beta_binomial",
    "friedman_test",
    "hall_ci",
    "holm",
    "interquartile_mean",
    "mcnemar_exact",
    "mcnemar_p",
    "mean_interval",
    "mover_ci",
    "nemenyi_cd",
    "nemenyi_p",
    "newcombe_ci",
    "normal_ci",
    "paired_interval",
    "pareto_bootstrap",
    "pareto_front",
    "pass_at",
    "pass_at_k",
    "pass_curves",
    "pass_hat",
    "performance_profile",
    "pool_strata",
    "pooled_bootstrap",
    "ppi_mean",
    "ppi_paired",
    "probability_of_improvement",
    "probability_of_improvement_ci",
    "reducer",
    "shrink_rates",
    "sign_flip_p",
    "signed_rank_p",
    "suite_weights",
    "summarize_tasks",
    "tango_ci",
    "tango_p",
    "variance_split",
    "width_at",
    "wilcoxon_p",
    "wilcoxon_pairs",
    "wilson",
    "z_value",
]
