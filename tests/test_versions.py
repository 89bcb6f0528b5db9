"""Natural version order: numbers as numbers, pre-releases before their release."""

from __future__ import annotations

import polars as pl

from hylo_analytics._versions import natural_sorted, version_key, version_ranks


def test_numbers_compare_as_numbers() -> None:
    got = natural_sorted(["2.294.0", "2.3.0", "2.10.0", "1.0.0", "2.1999.0"])
    assert got == ["1.0.0", "2.3.0", "2.10.0", "2.294.0", "2.1999.0"]


def test_pre_releases_come_before_their_release() -> None:
    got = natural_sorted(["1.2.0", "1.2.0-rc1", "1.2.0.post1", "1.2.0rc2", "1.2.0-beta", "1.1.9"])
    assert got == ["1.1.9", "1.2.0-beta", "1.2.0-rc1", "1.2.0rc2", "1.2.0", "1.2.0.post1"]
    assert version_key("1.2.0-dev3") < version_key("1.2.0a1") < version_key("1.2.0")


def test_a_leading_v_and_case_are_ignored_and_empty_comes_first() -> None:
    assert version_key("v1.2") == version_key("1.2") == version_key("V1.2")
    assert natural_sorted(["1.0", None, "", "0.9"]) == [None, "", "0.9", "1.0"]


def test_ranks_of_a_column() -> None:
    col = pl.Series("agent_version", ["2.10.0", "2.9.0", None, "2.9.0", "1.2.0-rc1", "1.2.0"])
    assert version_ranks(col).to_list() == [4, 3, 0, 3, 1, 2]
    assert version_ranks(col.drop_nulls()).to_list() == [3, 2, 2, 0, 1]
