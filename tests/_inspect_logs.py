"""Generate real Inspect AI logs offline, with a small deterministic model of our own.

Inspect's built-in mock model counts tokens with a tokenizer it downloads; ours answers from
the prompt (echoing a digit-sum answer for half the samples) and reports fixed token usage,
so every log is reproducible and needs no network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inspect_ai import Task, eval, task
from inspect_ai.dataset import Sample
from inspect_ai.model import (
    ChatMessage,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    modelapi,
)
from inspect_ai.scorer import (
    CORRECT,
    INCORRECT,
    PARTIAL,
    Score,
    Target,
    accuracy,
    match,
    mean,
    scorer,
)
from inspect_ai.solver import TaskState, generate
from inspect_ai.tool import ToolChoice, ToolInfo

_FLAKY_CALLS: dict[int, int] = {}  # calls per prompt number, for the flaky model


@modelapi(name="hylotest")
class HyloTestModel(ModelAPI):
    """Answers ``<n>`` to prompts ``what is <n>`` when ``n`` is even, ``wrong`` otherwise."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig | None = None,
        **model_args: Any,
    ) -> None:
        super().__init__(model_name, base_url, api_key, [], config or GenerateConfig())
        self.model_args = {"api_key": api_key, **model_args}

    async def generate(
        self,
        input: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        text = input[-1].text
        n = int(text.split()[-1])
        if self.model_name.startswith("crash") and n == 5:
            raise RuntimeError("hylotest model crashed on purpose at n=5")
        if self.model_name.startswith("leaky") and n == 5:  # an error quoting its config
            raise RuntimeError(
                f"bad config {self.model_args!r} read from {Path.cwd() / 'cfg.json'}"
            )
        answer = str(n) if n % 2 == 0 else "wrong"
        if self.model_name.startswith("flaky"):  # right in some epochs of a sample only
            _FLAKY_CALLS[n] = calls = _FLAKY_CALLS.get(n, 0) + 1
            answer = str(n) if (7 * n + 3 * calls) % 10 < n % 10 else "wrong"
        if self.model_name.startswith("odd"):  # right where det is wrong: every key flips
            answer = str(n) if n % 2 else "wrong"
        out = ModelOutput.from_content(model=self.model_name, content=answer)
        out.usage = ModelUsage(
            input_tokens=10 + n,
            output_tokens=len(answer),
            total_tokens=10 + n + len(answer),
            input_tokens_cache_read=n % 3,
            input_tokens_cache_write=1,
        )
        return out


@scorer(metrics=[accuracy()])
def grade_cip() -> Any:
    """C / I / P letter grades: P when the number is a multiple of 3 and the answer is wrong."""

    async def score(state: TaskState, target: Target) -> Score:
        got = state.output.completion.strip()
        n = int(target.text)
        if got == target.text:
            return Score(value=CORRECT, answer=got)
        return Score(value=PARTIAL if n % 3 == 0 else INCORRECT, answer=got)

    return score


@scorer(metrics={"*": [mean()]})
def grade_dict() -> Any:
    """A dict-valued score: one metric per key."""

    async def score(state: TaskState, target: Target) -> Score:
        n = int(target.text)
        return Score(value={"len": float(len(state.output.completion)), "parity": n % 2})

    return score


@task
def arith(n: int = 12) -> Task:
    return Task(
        dataset=[Sample(id=f"q{i}", input=f"what is {i}", target=str(i)) for i in range(n)],
        solver=generate(),
        scorer=[match(), grade_cip(), grade_dict()],
    )


def make_logs(
    out: Path,
    *,
    n: int = 12,
    epochs: int = 2,
    formats: tuple[str, ...] = ("eval", "json"),
    model: str = "hylotest/det-1",
) -> list[Path]:
    """Write one log per format to ``out``; returns their paths.

    ``model="hylotest/crash"`` raises on sample ``q5``: the run ends with status ``error``
    holding the samples finished before the crash.
    """
    paths: list[Path] = []
    for fmt in formats:
        logs = eval(
            arith(n=n),
            model=model,
            log_dir=str(out / fmt),
            log_format=fmt,
            epochs=epochs,
            display="none",
            log_samples=True,
            max_connections=1,
            max_samples=1,
        )
        paths.extend(Path(lg.location) for lg in logs)
    return paths


EPOCHS = 6  # of generate_epochs' run; its reducers are Inspect's pass_at_k and pass_k_k


def generate_epochs(root: Path) -> dict[str, Path]:
    """One run of a flaky model (each sample right in some of its epochs), reduced by
    Inspect's own ``pass_at_k`` and ``pass_k_k`` for k = 1 .. :data:`EPOCHS`."""
    from inspect_ai import Epochs

    reducers = [f"{name}_{k}" for name in ("pass_at", "pass_k") for k in range(1, EPOCHS + 1)]
    [lg] = eval(
        arith(n=12),
        model="hylotest/flaky-1",
        log_dir=str(root / "epochs"),
        log_format="eval",
        epochs=Epochs(EPOCHS, reducers),
        display="none",
        log_samples=True,
        max_connections=1,
        max_samples=1,
    )
    return {"epochs": Path(lg.location)}


def strip_to_journal(src: Path, dst: Path) -> Path:
    """An ``.eval`` as a killed process leaves it: only the journal and sample files.

    Members are rewritten deflated (Python's zipfile cannot write zstd), so this also
    exercises the reader's non-zstd path.
    """
    import zipfile

    from hylo_analytics.ingest.inspect import read_zip_member

    data = src.read_bytes()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            if info.filename in ("header.json", "summaries.json", "reductions.json"):
                continue
            zout.writestr(info.filename, read_zip_member(data, zin, info))
    return dst


def generate_all(root: Path) -> dict[str, Path]:
    """The test set: a clean and a crashed run, each as .eval and .json, and a journal-only
    .eval. Call in a fresh process (see ``generate_in_subprocess``)."""
    ok_eval, ok_json = make_logs(root / "ok")
    bad_eval, bad_json = make_logs(root / "crash", model="hylotest/crash")
    started = strip_to_journal(ok_eval, root / "started.eval")
    return {
        "ok_eval": ok_eval,
        "ok_json": ok_json,
        "crash_eval": bad_eval,
        "crash_json": bad_json,
        "started": started,
    }


def generate_leaky(root: Path) -> dict[str, Path]:
    """A clean run and one whose sample q5 fails with an error quoting the model's config (an
    API key and a token, given as model args) and an absolute path: what a shared report
    must not show."""
    secrets = {"api_key": "sk-LEAKED-KEY-123", "token": "tok-LEAKED-456"}
    out: dict[str, Path] = {}
    for name in ("det-1", "leaky-1"):
        [lg] = eval(
            arith(n=12),
            model=f"hylotest/{name}",
            model_args=secrets,
            log_dir=str(root / "logs"),
            log_format="json",
            display="none",
            log_samples=True,
            max_connections=1,
            max_samples=1,
            fail_on_error=False,
        )
        out[name] = Path(lg.location)
    return out


# a prompt as hostile as a log can be: markup, an OSC title change, a screen clear, a bidi
# override; the model still reads the number at its end
HOSTILE_PROMPT = "what is <script>alert('x')</script>\x1b]0;pwned\x07\x1b[2J\u202e"


@task
def hostile_arith(n: int = 4) -> Task:
    return Task(
        dataset=[
            Sample(id=f"h{i}", input=f"{HOSTILE_PROMPT} {i}", target=str(i)) for i in range(n)
        ],
        solver=generate(),
        scorer=[match()],
    )


def generate_transcripts(root: Path) -> dict[str, Path]:
    """Two runs of the hostile task whose successes are opposite on every sample: ``det``
    (an .eval log) and ``odd`` (a .json log)."""
    out: dict[str, Path] = {}
    for name, fmt in (("det-1", "eval"), ("odd-1", "json")):
        [lg] = eval(
            hostile_arith(),
            model=f"hylotest/{name}",
            log_dir=str(root / name),
            log_format=fmt,
            display="none",
            log_samples=True,
            max_connections=1,
            max_samples=1,
        )
        out[name.split("-")[0]] = Path(lg.location)
    return out


def generate_in_subprocess(root: Path, which: str = "generate_all") -> dict[str, Path]:
    """Run Inspect in a child process: its event loop leaves ResourceWarnings behind, which
    the test suite (filterwarnings = error) must not inherit, and its registry stays out."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
        "import _inspect_logs; make = getattr(_inspect_logs, sys.argv[3]);"
        "print(json.dumps({k: str(v) for k, v in make(Path(sys.argv[2])).items()}))"
    )
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code, str(Path(__file__).parent), str(root), which],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return {k: Path(v) for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}


def shared_logs(factory: Any) -> dict[str, Path]:
    """The logs of :func:`generate_all`, generated once per test run (8-9 s of Inspect) and
    read by every test file that needs them, on any xdist worker: no reader writes to them.

    They live beside the workers' own temp folders (the run's, not an earlier run's),
    generated under a file lock by whichever worker asks first."""
    import fcntl
    import json
    import os

    base = Path(factory.getbasetemp()).resolve()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, listed = root / "inspect-logs-shared", root / "inspect-logs-shared.json"
    with open(root / "inspect-logs-shared.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not listed.exists():
            logs = generate_in_subprocess(folder)
            listed.write_text(json.dumps({k: str(v) for k, v in logs.items()}))
    return {k: Path(v) for k, v in json.loads(listed.read_text()).items()}
