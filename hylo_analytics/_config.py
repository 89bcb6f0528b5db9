"""Configuration errors that name the key path, and the small validators that raise them.

Every YAML/dict section (pricing, derive, policies, the analysis spec) is checked with these,
so an error always reads ``<key path>: expected <what>, got <what>`` whatever the section.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from hylo_analytics.errors import ConfigError

__all__ = [
    "ConfigError",
    "expect_bool",
    "expect_list",
    "expect_mapping",
    "expect_number",
    "expect_str",
]


def _got(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}"


def expect_mapping(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(path, f"expected a mapping, got {_got(value)}")
    for k in value:
        if not isinstance(k, str):
            raise ConfigError(path, f"expected string keys, got key {_got(k)}")
    return value


def expect_list(value: object, path: str) -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise ConfigError(path, f"expected a list, got {_got(value)}")
    return value


def expect_str(value: object, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(path, f"expected a non-empty string, got {_got(value)}")
    return value


def expect_bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(path, f"expected true or false, got {_got(value)}")
    return value


def expect_number(value: object, path: str, *, minimum: float | None = None) -> float:
    # bool is an int in Python; `true` where a number belongs is a mistake worth naming.
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigError(path, f"expected a number, got {_got(value)}")
    if minimum is not None and value < minimum:
        raise ConfigError(path, f"expected a number >= {minimum}, got {value!r}")
    return float(value)


def check_keys(mapping: Mapping[str, Any], allowed: Sequence[str], path: str) -> None:
    """Unknown keys are errors: a misspelt key silently ignored is a wrong result."""
    unknown = sorted(set(mapping) - set(allowed))
    if unknown:
        where = f"{path}.{unknown[0]}" if path else unknown[0]
        raise ConfigError(where, f"unknown key; expected one of {sorted(allowed)}")
