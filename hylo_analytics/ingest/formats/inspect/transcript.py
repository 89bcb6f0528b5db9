"""One Inspect sample's transcript, read from its source log on demand.

Ingest keeps an Inspect log's summaries (ids, epochs, scores, errors, token usage), never its
messages: a transcript is most of a log's bytes and is looked at for a handful of episodes.
:func:`read_transcript` reads one sample back from the log file the run was ingested from
(``runs.source_path``), when a page asks for it: from an ``.eval`` the zip member
``samples/<id>_epoch_<n>.json`` alone (through the ingest's own bounded zip reader, zstd
included), from a ``.json`` log the matching entry of ``samples``. ``inspect_ai`` is not
needed (it is not a dependency of this package); its reader
``inspect_ai.log.read_eval_log_sample`` reads the same sample (the tests compare them).

A log that has moved, been deleted or changed since ingest raises
:class:`TranscriptUnavailable` with a message that says which and what to do; nothing here
returns markup: every string is the log's, for the caller to escape.
"""

from __future__ import annotations

import json
import mmap
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hylo_analytics.errors import ArchiveError
from hylo_analytics.ingest.formats.inspect import EVAL_FORMAT, JSON_FORMAT, read_zip_member

__all__ = [
    "FORMATS",
    "MAX_JSON_BYTES",
    "MAX_MESSAGES",
    "Message",
    "SampleScore",
    "ToolCall",
    "Transcript",
    "TranscriptUnavailable",
    "read_transcript",
]

#: The source formats whose samples have a transcript to read.
FORMATS = (EVAL_FORMAT, JSON_FORMAT)
#: A ``.json`` log is parsed whole to find one sample: larger ones are refused.
MAX_JSON_BYTES = 512 << 20
#: Messages kept of one sample (the rest are counted, not shown).
MAX_MESSAGES = 2_000


class TranscriptUnavailable(LookupError):
    """The sample's transcript cannot be read from its log; the message says why."""


@dataclass(frozen=True)
class ToolCall:
    """A call the model asked for: ``function`` with its ``arguments`` as JSON text."""

    id: str | None
    function: str
    arguments: str


@dataclass(frozen=True)
class Message:
    """One chat message: ``role`` (system, user, assistant, tool), its text, the tool calls
    of an assistant message, and for a tool message the call it answers and its error."""

    role: str
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    function: str | None = None
    error: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class SampleScore:
    """One scorer's score of the sample: its value (JSON text), answer and explanation."""

    scorer: str
    value: str
    answer: str | None
    explanation: str | None


@dataclass(frozen=True)
class Transcript:
    """A sample as Inspect's viewer shows it: messages, scores, the error, if any."""

    path: str
    sample_id: str
    epoch: int
    messages: tuple[Message, ...]
    scores: tuple[SampleScore, ...]
    target: str | None
    error: str | None
    n_messages: int  # in the log; ``messages`` holds at most MAX_MESSAGES of them


def read_transcript(path: str | Path, sample_id: str, epoch: int) -> Transcript:
    """Sample ``sample_id``, epoch ``epoch``, of the Inspect log at ``path``.

    Raises :class:`TranscriptUnavailable` when the file is gone, unreadable, not an Inspect
    log, or holds no such sample.
    """
    p = Path(path)
    if not p.is_file():
        raise TranscriptUnavailable(
            f"the transcript is read from the run's log on demand, and {p} is not there any "
            "more (moved or deleted since ingest): ingest the log again from where it is now"
        )
    try:
        zipped = _is_zip(p)
        if not zipped and p.stat().st_size > MAX_JSON_BYTES:
            raise TranscriptUnavailable(
                f"{p} is a .json log of more than {MAX_JSON_BYTES >> 20} MB: too large to "
                "parse for one transcript (an .eval log is read one sample at a time)"
            )
        doc = _eval_sample(p, sample_id, epoch) if zipped else _json_sample(p, sample_id, epoch)
    except OSError as exc:
        raise TranscriptUnavailable(f"cannot read {p}: {exc.strerror or exc}") from exc
    except (ArchiveError, zipfile.BadZipFile, ValueError, MemoryError) as exc:
        raise TranscriptUnavailable(f"cannot read the transcript from {p}: {exc}") from exc
    if doc is None:
        raise TranscriptUnavailable(
            f"{p} holds no sample {sample_id!r} at epoch {epoch} (was the file changed since "
            "ingest? ingest it again)"
        )
    return _transcript(doc, str(p), sample_id, epoch)


def _is_zip(p: Path) -> bool:
    with p.open("rb") as fh:
        return fh.read(2) == b"PK"


def _eval_sample(p: Path, sample_id: str, epoch: int) -> dict[str, Any] | None:
    """The sample's member of an ``.eval`` zip, or None. The file is mapped, not read: only
    the central directory and the member's own bytes are touched, however large the log."""
    name = f"samples/{sample_id}_epoch_{epoch}.json"
    with p.open("rb") as fh, zipfile.ZipFile(fh) as zf:
        try:
            info = zf.getinfo(name)
        except KeyError:
            return None
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            raw = read_zip_member(mapped, zf, info)  # type: ignore[arg-type]
    doc = json.loads(raw)
    return doc if isinstance(doc, dict) else None


def _json_sample(p: Path, sample_id: str, epoch: int) -> dict[str, Any] | None:
    """The sample's entry in a ``.json`` log's ``samples``, or None."""
    doc = json.loads(p.read_bytes())
    samples = doc.get("samples") if isinstance(doc, dict) else None
    for s in samples or []:
        if isinstance(s, dict) and str(s.get("id")) == sample_id and s.get("epoch") == epoch:
            return s
    return None


def _transcript(doc: dict[str, Any], path: str, sample_id: str, epoch: int) -> Transcript:
    attachments = _of(doc, "attachments", dict)
    raw = _of(doc, "messages", list)
    messages = tuple(_message(m, attachments) for m in raw[:MAX_MESSAGES] if isinstance(m, dict))
    scores = _of(doc, "scores", dict)
    error = doc.get("error")
    return Transcript(
        path=path,
        sample_id=sample_id,
        epoch=epoch,
        messages=messages,
        scores=tuple(_score(name, s) for name, s in scores.items() if isinstance(s, dict)),
        target=_text(doc.get("target"), attachments),
        error=_text(error.get("message") if isinstance(error, dict) else error, attachments),
        n_messages=len(raw),
    )


def _of(doc: dict[str, Any], name: str, kind: type[Any]) -> Any:
    """``doc[name]`` if it is a ``kind`` (a log written by hand may hold anything), else an
    empty one."""
    value = doc.get(name)
    return value if isinstance(value, kind) else kind()


def _message(m: dict[str, Any], attachments: dict[str, Any]) -> Message:
    calls = _of(m, "tool_calls", list)
    error = m.get("error")
    return Message(
        role=str(m.get("role") or "?"),
        text=_text(m.get("content"), attachments) or "",
        tool_calls=tuple(
            ToolCall(
                id=_opt(c.get("id")),
                function=str(c.get("function") or "?"),
                arguments=_text(_json(c.get("arguments")), attachments) or "",
            )
            for c in calls
            if isinstance(c, dict)
        ),
        tool_call_id=_opt(m.get("tool_call_id")),
        function=_opt(m.get("function")),
        error=_text(error.get("message") if isinstance(error, dict) else error, attachments),
        model=_opt(m.get("model")),
    )


def _score(name: str, s: dict[str, Any]) -> SampleScore:
    return SampleScore(
        scorer=str(name),
        value=_json(s.get("value")),
        answer=_opt(s.get("answer")),
        explanation=_opt(s.get("explanation")),
    )


def _text(content: Any, attachments: dict[str, Any]) -> str | None:
    """A message's content as text: a string, or its parts (text, reasoning, and a mark for
    images, audio and other media), with Inspect's ``attachment://`` references resolved."""
    if content is None:
        return None
    if isinstance(content, str):
        return _resolve(content, attachments)
    if not isinstance(content, list):
        return _json(content)
    parts = []
    for part in content:
        if isinstance(part, str):
            parts.append(_resolve(part, attachments))
        elif isinstance(part, dict):
            kind = str(part.get("type") or "")
            if kind == "text":
                parts.append(_resolve(str(part.get("text") or ""), attachments))
            elif kind == "reasoning":
                parts.append(
                    "[reasoning] " + _resolve(str(part.get("reasoning") or ""), attachments)
                )
            else:
                parts.append(f"[{kind or 'content'}]")
    return "\n\n".join(parts)


def _resolve(value: str, attachments: dict[str, Any]) -> str:
    if value.startswith("attachment://"):
        found = attachments.get(value.removeprefix("attachment://"))
        return str(found) if found is not None else value
    return value


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)
