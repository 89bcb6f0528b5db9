"""What a shared page leaves out: secret-looking keys' values, paths, home and host names."""

from __future__ import annotations

import json

import pytest

from hylo_analytics._redact import REDACTED, Redactor, redact_secrets, secret_key


@pytest.mark.parametrize(
    "key",
    ["api_key", "OPENAI_API_KEY", "apiKey", "x-api-key", "auth_token", "token", "client_secret",
     "Password", "db_passwd", "Authorization", "credentials", "private_key", "AWS_ACCESS_KEY"],
)  # fmt: skip
def test_secret_keys(key: str) -> None:
    assert secret_key(key)


@pytest.mark.parametrize(
    "key", ["max_tokens", "input_tokens", "key", "monkey", "secretary", "author", "keys", "model"]
)
def test_keys_that_are_not_secrets(key: str) -> None:
    assert not secret_key(key)


def test_secrets_in_nested_metadata_and_in_json_text() -> None:
    meta = {"model": "m", "model_args": {"api_key": "sk-1", "n": 2}, "max_tokens": 5,
            "headers": [{"Authorization": "Bearer x"}], "token": None}  # fmt: skip
    assert redact_secrets(meta) == {
        "model": "m", "model_args": {"api_key": REDACTED, "n": 2}, "max_tokens": 5,
        "headers": [{"Authorization": REDACTED}], "token": None,
    }  # fmt: skip
    assert json.loads(redact_secrets(json.dumps(meta))) == redact_secrets(meta)


def test_secrets_quoted_in_free_text() -> None:
    text = "RuntimeError(\"bad config {'api_key': 'sk-1', 'n': 3}\") --token=t0k secret: s max_tokens=5"
    assert redact_secrets(text) == (
        "RuntimeError(\"bad config {'api_key': '[redacted]', 'n': 3}\") --token=[redacted] "
        "secret: [redacted] max_tokens=5"
    )


def test_paths_home_and_host() -> None:
    r = Redactor(roots=("/data/runs/run-1",), home="/home/alice", host="lab-gpu-7")
    assert r.text("trace /data/runs/run-1/episodes/e1.jsonl: bad") == "trace episodes/e1.jsonl: bad"
    assert (
        r.text("FileNotFoundError: /home/alice/private/cfg.json.") == "FileNotFoundError: cfg.json."
    )
    assert r.text("C:\\Users\\alice\\cfg.json missing") == "cfg.json missing"
    assert r.text("ran on lab-gpu-7 in ~alice") == "ran on [host] in ~alice"
    assert r.text("see https://example.org/a/b, a/b/c and 0.5/1") == (
        "see https://example.org/a/b, a/b/c and 0.5/1"
    )
