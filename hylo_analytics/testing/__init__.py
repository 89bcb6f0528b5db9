"""Helpers for tests, notebooks and benchmarks: the synthetic data generator.

:func:`write_dataset` writes deterministic EvalLogs and traces of any size
(:class:`SynthConfig`); the bundled ``data/sample`` is one of them.
"""

from hylo_analytics.testing.synth import SynthConfig, write_dataset

__all__ = ["SynthConfig", "write_dataset"]
