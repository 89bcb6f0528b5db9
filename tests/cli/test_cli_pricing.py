"""``hylo-analytics pricing import``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hylo_analytics import load_pricing
from hylo_analytics.cli import main

LLM = {
    "vendor": "openai",
    "models": [
        {
            "id": "gpt-4o",
            "name": "GPT-4o",
            "price_history": [
                {
                    "input": 2.5,
                    "output": 10,
                    "from_date": None,
                    "to_date": None,
                    "input_cached": 1.25,
                }
            ],
        },
        {"id": "gone", "name": "Gone", "price_history": []},
    ],
}


def test_pricing_import_writes_a_recorded_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "openai.json"
    src.write_text(json.dumps(LLM))
    out = tmp_path / "pricing.yaml"
    argv = ["pricing", "import", "--source", "llm-prices", str(src), "-o", str(out)]
    assert main(argv) == 0
    cap = capsys.readouterr()
    assert "wrote" in cap.out and "1 model(s)" in cap.out
    assert "not imported: gone: price_history: no current price" in cap.err
    table = load_pricing(out)
    assert table.provenance is not None
    assert table.provenance["selected_models"] == ["openai/gpt-4o"]
    assert table.provenance["file"] == "openai.json"
    # --strict: a problem means nothing is written
    out.unlink()
    assert main([*argv, "--strict"]) == 1
    assert not out.exists()


def test_pricing_import_bad_file_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "x.json"
    src.write_text("{not json")
    out = tmp_path / "p.yaml"
    assert main(["pricing", "import", "--source", "llm-prices", str(src), "-o", str(out)]) == 2
    assert f"{src}: not valid JSON for llm-prices" in capsys.readouterr().err
    assert not out.exists()
