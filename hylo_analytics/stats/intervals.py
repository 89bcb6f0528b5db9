"""Deprecated: the old name of :mod:`hylo_analytics.stats.closed_form`, kept for one release.

It sat one letter from :mod:`hylo_analytics.stats.interval` (the one interval entry point);
importing it warns and gives the same objects as the new name.
"""

from __future__ import annotations

import warnings

from hylo_analytics.stats.closed_form import *  # noqa: F403
from hylo_analytics.stats.closed_form import __all__ as __all__

warnings.warn(
    "hylo_analytics.stats.intervals is renamed hylo_analytics.stats.closed_form (the closed "
    "forms; hylo_analytics.stats.interval is the entry point): import the new name, the old "
    "one goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
