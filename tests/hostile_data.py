"""Hostile names: a corpus of strings that break naive HTML, and two runs built from it.

Every payload that runs sets ``window.__pwned`` (and the page title), and every injected
element carries a ``data-pwned`` attribute, so a parser or a browser can tell that it got in.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
_PARENT_SRC, _CAND_SRC = "run-octo-ft-1.0.0-0000", "run-octo-ft-1.2.0-rc1-0002"

_RUN = "window.__pwned=1;document.title='pwned'"
CORPUS = [
    f"</script><script data-pwned>{_RUN}</script>",
    f'"><img src=x data-pwned onerror="{_RUN}">',
    f'\'><svg data-pwned onload="{_RUN}">',
    f"<!--<script data-pwned>{_RUN}</script>-->",
    "{} {0} {name} %s %(x)s",
    "rtl \u202egpj.exe\u202c mark",
    "esc \x1b[2J\x1b]0;owned\x07 seq",
    "amp &amp; &lt;b data-pwned&gt; \u2028 line \u2029 para",
    f"javascript:{_RUN}",
]
PARENT = "p" + CORPUS[1]
CANDIDATE = "c" + CORPUS[0] + CORPUS[6]
AGENT = CORPUS[2] + CORPUS[4]
BIG = (CORPUS[0] * (10_000_000 // len(CORPUS[0]) + 1))[:10_000_000]  # a 10 MB explanation


def task_names(n: int = 10) -> list[str]:
    """``n`` distinct hostile task ids, every corpus string among them."""
    return [f"{CORPUS[i % len(CORPUS)]}#t{i}" for i in range(n)]


def write_hostile_runs(folder: Path) -> tuple[str, str]:
    """The sample parent and candidate under hostile run, agent and task names, the
    candidate's first grade explaining itself in :data:`BIG`; returns (parent, candidate)."""
    tasks: dict[str, str] = {}
    for run_id, src, version in ((PARENT, _PARENT_SRC, CORPUS[3]), (CANDIDATE, _CAND_SRC, "2")):
        out = folder / src
        (out / "episodes").mkdir(parents=True, exist_ok=True)
        log = json.loads((SAMPLE / src / "evallog.json").read_text())
        log["run_id"] = run_id
        log["agent"].update(name=AGENT, version=version)
        for sample in log["samples"]:
            old = sample["task_id"]
            new = tasks.setdefault(old, task_names(len(tasks) + 1)[-1])
            sample["task_id"], sample["key"] = new, sample["key"].replace(old, new, 1)
            trace = sample.get("trace")
            if not trace:
                continue
            lines = (SAMPLE / src / trace).read_text().splitlines()
            events = [json.loads(line) for line in lines if line.strip()]
            for event in events:
                if "task_id" in event:
                    event["task_id"] = new
                if event.get("type") == "grade" and run_id == CANDIDATE and BIG not in tasks:
                    event["explanation"] = BIG
                    tasks[BIG] = sample["key"]  # remembered: which key holds it
            (out / trace).write_text("".join(json.dumps(e) + "\n" for e in events))
        (out / "evallog.json").write_text(json.dumps(log))
    return PARENT, CANDIDATE


def big_key(folder: Path) -> str:
    """The key of the candidate episode whose grade explanation is :data:`BIG`."""
    log = json.loads((folder / _CAND_SRC / "evallog.json").read_text())
    for sample in log["samples"]:
        trace = sample.get("trace")
        if trace and BIG[:100] in (folder / _CAND_SRC / trace).read_text()[:20_000_000]:
            return str(sample["key"])
    raise AssertionError("no sample holds the big explanation")


class Elements(HTMLParser):
    """Every start tag and its attributes, as a browser's tokenizer would see them."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def count(self, tag: str) -> int:
        return sum(t == tag for t, _ in self.tags)


def assert_nothing_injected(page: str, *, scripts: int, images: str | None = None) -> None:
    """No corpus element, no event-handler attribute, no ``javascript:`` link, exactly
    ``scripts`` script elements, and images only from ``images`` (a path prefix)."""
    found = Elements(page)
    for tag, attrs in found.tags:
        assert "data-pwned" not in attrs, f"injected <{tag} {attrs}>"
        handlers = [a for a in attrs if a.startswith("on")]
        assert not handlers, f"event handler {handlers} on <{tag}>"
        for name in ("href", "src", "action"):
            assert not (attrs.get(name) or "").strip().lower().startswith("javascript:"), attrs
        if tag == "img":
            assert images is not None and (attrs.get("src") or "").startswith(images), attrs
        assert tag not in ("iframe", "object", "embed", "base"), tag
    assert found.count("script") == scripts, f"{found.count('script')} scripts, {scripts} ours"
