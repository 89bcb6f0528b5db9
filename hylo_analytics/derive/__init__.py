"""The derive stage: new evidence computed from stored scores, and requirements on it.

- :mod:`~hylo_analytics.derive.token_cost` (:func:`token_cost`) with the pricing table
  (:mod:`~hylo_analytics.derive.pricing`, :func:`load_pricing`);
- :mod:`~hylo_analytics.derive.baseline` (:func:`paired_baseline` on a frame) and
  :mod:`~hylo_analytics.derive.post_derive` (the same over the store's runs);
- :mod:`~hylo_analytics.derive.policies` (:func:`evaluate_policies`);
- :mod:`~hylo_analytics.derive.measure` (:func:`measure_callable`: repeated timing).
"""

from hylo_analytics.derive.baseline import BaselineResult, PairedBaseline, paired_baseline
from hylo_analytics.derive.measure import (
    Measurement,
    MeasurementBudget,
    measure_callable,
    record_measurement,
)
from hylo_analytics.derive.policies import (
    Between,
    Policy,
    PolicyEvaluation,
    commit_policy_results,
    evaluate_policies,
    parse_policies,
)
from hylo_analytics.derive.post_derive import StoreBaselineResult
from hylo_analytics.derive.pricing import PricingTable, load_pricing
from hylo_analytics.derive.token_cost import (
    TOKEN_COST_OUTPUT,
    TokenCostInputs,
    TokenCostResult,
    token_cost,
)

__all__ = [
    "TOKEN_COST_OUTPUT",
    "BaselineResult",
    "Between",
    "Measurement",
    "MeasurementBudget",
    "PairedBaseline",
    "Policy",
    "PolicyEvaluation",
    "PricingTable",
    "StoreBaselineResult",
    "TokenCostInputs",
    "TokenCostResult",
    "commit_policy_results",
    "evaluate_policies",
    "load_pricing",
    "measure_callable",
    "paired_baseline",
    "parse_policies",
    "record_measurement",
    "token_cost",
]
