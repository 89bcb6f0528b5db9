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


@modelapi(name="hylotest")
class HyloTestModel(ModelAPI):
    """Answers ``<n>`` to prompts ``what is <n>`` when ``n`` is even, ``wrong`` otherwise."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),
        **model_args: Any,
    ) -> None:
        super().__init__(model_name, base_url, api_key, [], config)

    async def generate(
        self,
        input: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        text = input[-1].text
        n = int(text.split()[-1])
        answer = str(n) if n % 2 == 0 else "wrong"
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
        dataset=[
            Sample(id=f"q{i}", input=f"what is {i}", target=str(i)) for i in range(n)
        ],
        solver=generate(),
        scorer=[match(), grade_cip(), grade_dict()],
    )


def make_logs(out: Path, *, n: int = 12, epochs: int = 2, formats: tuple[str, ...] = ("eval", "json")) -> list[Path]:
    """Write one log per format to ``out``; returns their paths."""
    paths: list[Path] = []
    for fmt in formats:
        logs = eval(
            arith(n=n),
            model="hylotest/det-1",
            log_dir=str(out / fmt),
            log_format=fmt,
            epochs=epochs,
            display="none",
            log_samples=True,
        )
        paths.extend(Path(lg.location) for lg in logs)
    return paths
