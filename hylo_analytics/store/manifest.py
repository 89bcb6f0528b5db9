"""The store's manifest: which batch folders are the store, published by one ``rename``.

Readers list the files of the batches the manifest names, never a glob of the folder, so a
commit or a compaction is seen whole or not at all: a compaction writes its merged batch,
then publishes a manifest that names it instead of the batches it merged. Those stay on disk,
*retired*, for :data:`RETIRE_SECONDS` so a query planned over the old list still reads them,
and a later writer removes them. A folder the manifest does not name is a commit that died
before it was published (or a retired one): invisible to readers.

A store written before the manifest existed has none; its batch folders (digit names) are
then the list, and the first commit writes the manifest.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from hylo_analytics import _schema
from hylo_analytics.errors import ManifestError, ManifestWriteError, StoreError

__all__ = [
    "SCHEMA_FINGERPRINT",
    "Batch",
    "Manifest",
    "ManifestError",
    "StoreError",
    "read_manifest",
    "stamp",
    "write_manifest",
]

FILE = "manifest.json"
RETIRE_SECONDS = 120.0


def _fingerprint() -> str:
    text = ";".join(
        f"{n}:{s.to_string(show_schema_metadata=False)}" for n, s in _schema.SCHEMAS.items()
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# Batches written with these very schemas can be read without reconciling columns by name.
SCHEMA_FINGERPRINT = _fingerprint()


@dataclass(frozen=True)
class Batch:
    """One published folder: its name, the newest commit it holds, the schemas it was written by."""

    name: str
    seq: int
    schema: str | None = None  # None: unknown (a store older than the manifest)
    level: int = 0  # 0: one commit; n: a merge of batches of level n - 1 (or a full compaction)


@dataclass(frozen=True)
class Manifest:
    """The batches that make the store, oldest first, and the next commit's number."""

    batches: tuple[Batch, ...]
    next_seq: int
    retired: tuple[tuple[str, float], ...] = field(default=())  # (folder, when retired)
    # every published batch's scores are resolved in ``resolved_scores`` (written at publish).
    # A manifest written by an older version lacks it: readers then evaluate the rule itself,
    # and the next writer resolves every run, so losing the flag is always safe.
    resolved: bool = False

    @property
    def current_schemas(self) -> bool:
        """Every batch was written with today's schemas (no column reconciliation needed)."""
        return all(b.schema == SCHEMA_FINGERPRINT for b in self.batches)

    def with_batch(self, batch: Batch) -> Manifest:
        return replace(
            self, batches=(*self.batches, batch), next_seq=max(self.next_seq, batch.seq + 1)
        )

    def merged(self, merged: Sequence[Batch], into: Batch) -> Manifest:
        """``merged`` replaced by ``into`` (placed where the first of them was), them retired."""
        names = {b.name for b in merged}
        kept: list[Batch] = []
        for b in self.batches:
            if b.name not in names:
                kept.append(b)
            elif into not in kept:
                kept.append(into)
        now = time.time()
        return replace(
            self,
            batches=tuple(kept),
            retired=(*self.retired, *((b.name, now) for b in merged)),
        )

    def without_retired(self, names: set[str]) -> Manifest:
        return replace(self, retired=tuple(r for r in self.retired if r[0] not in names))


def read_manifest(root: Path, batches_dir: Path) -> Manifest:
    """The published manifest, or one made from the folders of a store that has none."""
    path = root / FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        try:  # a store older than the manifest lists its folders; a store not yet made, none
            names = [p.name for p in batches_dir.iterdir()]
        except FileNotFoundError:
            names = []
        seqs = sorted(int(n) for n in names if n.isdigit())
        return Manifest(
            # the empty batch 0 is rewritten at open whenever its schemas are not today's
            batches=tuple(
                Batch(f"{s:020d}", s, SCHEMA_FINGERPRINT if s == 0 else None) for s in seqs
            ),
            next_seq=(seqs[-1] + 1) if seqs else 1,
        )
    except (OSError, ValueError) as exc:
        raise ManifestError(f"{path}: the store's manifest cannot be read: {exc}") from exc
    try:
        data = json.loads(text)
        manifest = Manifest(
            batches=tuple(
                Batch(str(b["name"]), int(b["seq"]), b.get("schema"), int(b.get("level", 0)))
                for b in data["batches"]
            ),
            next_seq=int(data["next_seq"]),
            retired=tuple((str(r["name"]), float(r["at"])) for r in data.get("retired", [])),
            resolved=data.get("resolved") is True,
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ManifestError(
            f"{path}: the store's manifest is corrupt or truncated ({what}); "
            "it was left as it is and nothing was read: restore it from a backup"
        ) from exc
    for b in manifest.batches:
        if (
            not b.name
            or "/" in b.name
            or b.name.startswith(".")
            or not (batches_dir / b.name).is_dir()
        ):
            raise ManifestError(
                f"{path} lists batch {b.name!r}, but {batches_dir / b.name} is missing: the "
                "store cannot be read whole, so nothing was read and nothing was changed "
                "(restore the folder, or the manifest from a backup)"
            )
    return manifest


def write_manifest(root: Path, manifest: Manifest) -> None:
    """Publish ``manifest`` atomically (temp file, fsync, rename)."""
    data = {
        "format": "hylo_analytics.store/manifest-1",
        "next_seq": manifest.next_seq,
        "batches": [
            {"name": b.name, "seq": b.seq, "schema": b.schema, "level": b.level}
            for b in manifest.batches
        ],
        "retired": [{"name": n, "at": at} for n, at in manifest.retired],
        "resolved": manifest.resolved,
    }
    tmp = root / f".{FILE}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with open(tmp, "w") as fh:
            json.dump(data, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, root / FILE)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        why = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        raise ManifestWriteError(
            f"{why} while publishing {root / FILE}; nothing was published, the store is "
            "unchanged"
            + (" (free some space and run it again)" if exc.errno == errno.ENOSPC else "")
        ) from exc


def stamp(root: Path, batches_dir: Path) -> tuple[int, int, int]:
    """Changes whenever a new manifest is published (or, without one, a folder is added)."""
    try:
        st = os.stat(root / FILE)
    except FileNotFoundError:
        try:
            st = os.stat(batches_dir)
        except FileNotFoundError:  # a store not yet on disk (its first write makes it)
            return (0, 0, 0)
        return (0, st.st_mtime_ns, st.st_ino)
    return (st.st_ino, st.st_mtime_ns, st.st_size)
