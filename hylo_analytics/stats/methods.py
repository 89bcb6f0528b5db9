"""The interval vocabulary: method names, their deprecated aliases, and the shared defaults.

One ``Literal`` names every interval the toolkit computes, whatever the data's shape; each
entry point accepts the subset that fits its data (:data:`ONE_SAMPLE_METHODS` for the mean of
a group, :data:`PAIRED_METHODS` for a paired difference). The name a user passes is the name
printed in the ``ci_method`` column (``percentile`` in, ``percentile`` out), except ``score``,
which names Tango's score interval of a paired 0/1 difference (``ci_method`` ``tango``).
``cr2`` is the cluster-robust interval (:mod:`~hylo_analytics.stats.clustered`): it needs the
clusters, so the verbs give it where ``cluster=`` is set (``auto`` then means it).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np

from hylo_analytics.errors import InputError

__all__ = [
    "CI_METHODS",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "ONE_SAMPLE_METHODS",
    "PAIRED_METHODS",
    "UNSET",
    "CIMethod",
    "Seed",
    "check_method",
    "renamed",
]

CIMethod = Literal[
    "auto", "wilson", "clopper_pearson", "score", "newcombe", "normal", "hall", "percentile",
    "bca", "studentized", "cr2", "none",
]  # fmt: skip
CI_METHODS: tuple[str, ...] = (
    "auto", "wilson", "clopper_pearson", "score", "newcombe", "normal", "hall", "percentile",
    "bca", "studentized", "cr2", "none",
)  # fmt: skip
# the interval of one group's mean (aggregate) and of a paired difference (compare)
ONE_SAMPLE_METHODS: tuple[str, ...] = (
    "auto", "wilson", "clopper_pearson", "normal", "hall", "percentile", "bca", "studentized",
    "cr2", "none",
)  # fmt: skip
PAIRED_METHODS: tuple[str, ...] = (
    "auto", "score", "newcombe", "percentile", "bca", "studentized", "normal", "cr2", "none",
)  # fmt: skip
# old name -> the name in CI_METHODS; accepted with a DeprecationWarning for one release
_ALIASES = {"bootstrap": "percentile"}

Seed = int | np.random.Generator | None
"""An int, ``None`` (fresh entropy) or a :class:`numpy.random.Generator`."""
DEFAULT_SEED = 0
"""Every verb's seed: the same call gives the same interval."""
DEFAULT_RESAMPLES = 10_000


def check_method(name: str, allowed: Sequence[str], where: str) -> str:
    """``name`` as a method of ``allowed``, an old alias translated (with a warning)."""
    if name in _ALIASES:
        new = _ALIASES[name]
        warnings.warn(
            f"{where}: ci={name!r} is deprecated: pass ci={new!r} (the same interval, named "
            "as its ci_method column)",
            DeprecationWarning,
            stacklevel=3,
        )
        name = new
    if name not in allowed:
        raise InputError(f"{where}: unknown ci method {name!r}; known: {', '.join(allowed)}")
    return name


def renamed(
    old: str, new: str, old_value: object, new_value: object, where: str, default: object
) -> object:
    """The value of a renamed parameter: ``new_value``, or ``old_value`` (warning) when the
    old name was given (``old_value`` is not :data:`UNSET`) and the new one left at ``default``."""
    if old_value is UNSET:
        return new_value
    warnings.warn(
        f"{where}: {old}= is deprecated: pass {new}= (the same option)",
        DeprecationWarning,
        stacklevel=3,
    )
    if new_value != default and new_value != old_value:
        raise InputError(f"{where}: {old}= and {new}= disagree; pass {new}= only")
    return old_value


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


UNSET: object = _Unset()
