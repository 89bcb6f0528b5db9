"""A worker process of ``ingest --workers N``: ``python -m hylo_analytics.ingest._worker OPTS``.

Its own module, imported by nobody, so running it as ``__main__`` never loads a second copy
of a module the package imports.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from hylo_analytics.ingest._claims import Claims
from hylo_analytics.ingest._sharded import work

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    """A worker process of ``ingest --workers N``. Its report is pickled to the file the
    options name (whole, by rename)."""
    import pickle

    from hylo_analytics.store import ParquetStore

    opts = json.loads(argv[0])
    store = ParquetStore(opts["root"], create=False, threads=opts["threads"])
    claims = Claims(store.root, opts["job"], lease=opts["lease"])
    out = Path(opts["report"])
    try:
        result: object = work(
            store,
            claims,
            strict=opts["strict"],
            replace=opts["replace"],
            files=opts["files"],
            size=opts["size"],
            wait=False,
            parent=opts["parent"],
        )
        code = 0
    except Exception as exc:  # the parent raises it (a strict ingest's first bad item)
        result, code = exc, 1
    finally:
        claims.close()
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_bytes(pickle.dumps(result))
    except Exception:  # an exception that does not pickle: its text
        tmp.write_bytes(pickle.dumps(RuntimeError(f"{type(result).__name__}: {result}")))
    os.replace(tmp, out)
    return code


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
