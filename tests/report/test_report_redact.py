"""``report --redact``: a page to share leaves out paths, the home folder, the host name and,
always, values under secret-looking keys (issue 28, item 4)."""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics import report
from hylo_analytics.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _inspect_logs import generate_in_subprocess

CHECKOUT = Path(__file__).resolve().parents[2]
SPATIAL = "benchmark=libero_spatial"


def _host_named(text: str) -> bool:
    host = socket.gethostname()
    return bool(host) and re.search(rf"(?<![\w-]){re.escape(host)}(?![\w-])", text) is not None


def _no_whereabouts(text: str, *paths: Path) -> None:
    for p in (CHECKOUT, Path.home(), *paths):
        assert str(p) not in text, f"{p} is on the shared page"
    assert not _host_named(text)


@pytest.mark.slow
def test_redacted_report_of_the_real_data(real_dir: Path, tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    ha.open_store(store_dir, create=True).ingest(real_dir / "vla-eval-harness", progress=False)
    page = tmp_path / "shared.html"
    argv = ["report", "--store", str(store_dir), "--candidate", f"agent=pi05,{SPATIAL}",
            "--parent", f"agent=xvla,{SPATIAL}", "--redact", "-o", str(page)]  # fmt: skip
    assert main(argv) == 0
    text = page.read_text()
    assert "pi05" in text and "timeout" in text  # the content is all there
    _no_whereabouts(text, real_dir, tmp_path)


@pytest.fixture(scope="module")
def leaky_store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    """Real Inspect logs run with an API key and a token as model args; one run's error
    quotes them and an absolute path under the checkout."""
    root = tmp_path_factory.mktemp("leaky")
    generate_in_subprocess(root, "generate_leaky")
    store = ha.open_store(root / "store")
    store.ingest(root / "logs", progress=False)
    return store


@pytest.mark.slow
def test_report_never_shows_secrets_and_redact_drops_paths(
    leaky_store: ha.Store, tmp_path: Path
) -> None:
    cand, parent = "agent=hylotest/leaky-1", "agent=hylotest/det-1"
    plain = ha.build_report(leaky_store, cand, parent, metric="match").to_html()
    for secret in ("sk-LEAKED-KEY-123", "tok-LEAKED-456"):
        assert secret not in plain  # by default
    assert "[redacted]" in plain
    assert str(CHECKOUT / "cfg.json") in plain  # without --redact the error is shown whole
    page = report.write_report(leaky_store.parquet, cand, parent, tmp_path / "r.html", metric="match",
                               redact=True)  # fmt: skip
    text = page.read_text()
    assert "sk-LEAKED-KEY-123" not in text and "tok-LEAKED-456" not in text
    assert "read from cfg.json" in text  # the file name stays: the reader can act on it
    _no_whereabouts(text, leaky_store.root, Path(os.getcwd()))
