"""The epochs plan of stored runs: the variance split of a paired difference read from a
literal store by hand, a policy's runs pooled per item, the cases no epochs can halve."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from flip_data import E, commit, episode_rows, run_row
from repeated_data import CELLS, epochs_store, literal_store

import hylo_analytics as ha
from hylo_analytics.compare import epochs_plan
from hylo_analytics.compare.epochs import PLAN_COLUMNS
from hylo_analytics.stats.repeated import epochs_to_halve, variance_split, width_at


@pytest.fixture(scope="module")
def literal(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    return literal_store(tmp_path_factory.mktemp("epochs-plan") / "store")


def _moments(run: str) -> tuple[list[float], list[float], list[float]]:
    """Each key's valid epochs of ``run`` (errored ones left out): mean, var (ddof 1), n."""
    means, variances, counts = [], [], []
    for key in sorted(CELLS):
        x = np.array([v for v in CELLS[key][run] if v != E], dtype=float)
        means.append(x.mean())
        variances.append(x.var(ddof=1) if len(x) > 1 else np.nan)
        counts.append(len(x))
    return means, variances, counts


def test_the_split_by_hand(literal: ha.Store) -> None:
    out = literal.epochs_plan("r-a", "r-b", errors="exclude")
    assert out.columns == list(PLAN_COLUMNS) and out.height == 1
    row = out.row(0, named=True)
    want = variance_split([0] * 4, *_moments("r-a"), *_moments("r-b"))
    assert row["n_items"] == 4 and row["n_unpaired"] == 0
    for col in ("estimate", "var_total", "var_within", "var_between", "ci_width", "epochs"):
        assert row[col] == pytest.approx(float(getattr(want, col)[0])), col
    assert row["items_to_halve"] == 16 and row["errors"] == "exclude"
    factor, count = epochs_to_halve(want)
    if np.isfinite(factor[0]):
        assert row["epochs_to_halve"] == int(count[0])
        assert row["width_at_halving_epochs"] <= row["ci_width"] / 2 + 1e-12
    else:
        assert row["epochs_to_halve"] is None and "no number of epochs" in row["note"]
    # the mean difference is the paired one: mean over keys of the keys' differences
    a, b = _moments("r-a")[0], _moments("r-b")[0]
    assert row["estimate"] == pytest.approx(np.mean(np.subtract(a, b)))


def test_one_side_and_single_epochs(literal: ha.Store) -> None:
    row = literal.epochs_plan("r-c").row(0, named=True)
    assert row["parent"] is None and row["n_items"] == 4
    # r-c: t1#0 has one epoch: the run's pooled within variance stands in, and says so
    assert row["n_single"] == 1 and "pooled within variance" in row["note"]
    means, variances, counts = _moments("r-c")
    want = variance_split([0] * 4, means, variances, counts)
    assert row["var_within"] == pytest.approx(float(want.var_within[0]))
    with pytest.raises(ValueError, match="on both sides"):
        literal.epochs_plan("r-a", ["r-a", "r-b"])


def _fixed(root: Path, epochs: int, flip: bool, keys: int = 20) -> ha.Store:
    """Two runs on ``keys`` keys: the candidate solves the even keys every epoch, the parent
    the odd ones (``flip``: every difference is +-1, no epoch noise), or both solve every
    key half the time (``flip`` False: all noise, no difference between items)."""
    rng = np.random.default_rng(7)
    runs = [run_row("c", "2.0", "hylo.evallog/v0.1"), run_row("p", "1.0", "hylo.evallog/v0.1",
                                                             at=1)]  # fmt: skip
    samples, scores = [], []
    for i in range(keys):
        for run in ("c", "p"):
            if flip:
                cell = tuple([int((i % 2 == 0) == (run == "c"))] * epochs)
            else:
                cell = tuple(int(v) for v in rng.random(epochs) < 0.5)
            got = episode_rows(run, f"t{i % 4}#{i}", cell)
            samples += got[0]
            scores += got[1]
    return commit(root, runs, samples, scores)


def test_between_only_cannot_be_halved_by_epochs(tmp_path: Path) -> None:
    row = _fixed(tmp_path / "s", 4, flip=True).epochs_plan("c", "p").row(0, named=True)
    assert row["var_within"] == 0.0 and row["within_share"] == 0.0
    assert row["epochs_factor"] is None and row["epochs_to_halve"] is None
    assert row["floor_width"] == pytest.approx(row["ci_width"])
    assert "no number of epochs halves" in row["note"] and "80 items would" in row["note"]


def test_within_only_halves_with_about_four_times_the_epochs(tmp_path: Path) -> None:
    row = _fixed(tmp_path / "s", 4, flip=False, keys=400).epochs_plan("c", "p").row(0, named=True)
    b, w = row["var_between"], row["var_total"] - row["var_between"]
    assert row["within_share"] > 0.75 and row["epochs_factor"] == pytest.approx(4 * w / (w - 3 * b))
    assert 16 <= row["epochs_to_halve"] < 40
    assert row["width_at_halving_epochs"] <= row["ci_width"] / 2


def test_policies_pool_their_runs_per_item(tmp_path: Path) -> None:
    store, values = epochs_store(tmp_path / "s", 40, 60, 3, agents=2)  # 20 runs per policy
    row = epochs_plan(store, "agent=policy-000", "agent=policy-001").row(0, named=True)
    a, b = values[0::2].transpose(1, 0, 2).reshape(60, -1), values[1::2].transpose(1, 0, 2)
    b = b.reshape(60, -1)
    want = variance_split(np.zeros(60, int), a.mean(1), a.var(1, ddof=1), np.full(60, 60),
                          b.mean(1), b.var(1, ddof=1), np.full(60, 60))  # fmt: skip
    assert row["epochs"] == 60 and row["n_items"] == 60
    for col in ("estimate", "var_total", "var_within", "var_between"):
        assert row[col] == pytest.approx(float(getattr(want, col)[0]), rel=1e-9), col
    factor, _ = epochs_to_halve(want)
    if np.isfinite(factor[0]):
        assert row["width_at_halving_epochs"] == pytest.approx(
            float(width_at(want, np.ceil(factor[0] * 60 - 1e-9))[0])
        )
