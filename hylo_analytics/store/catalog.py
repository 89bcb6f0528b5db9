"""A cached DuckDB catalog of the ``sql/`` views, attached at open so no view is bound then.

DuckDB binds a view when it is created: opening a store used to bind every view of ``sql/``
(0.4-0.8 s, the whole first-query cost of a notebook on a large store), although a question
reads two or three of them. A view loaded from a database file is bound when a query first
reads it. So the views, macros and friendly names (the SQL that does not depend on the store)
are created once per version of that SQL in a DuckDB file under the user's cache folder, and
each connection attaches it read-only behind its own ``main`` schema, which keeps what names
the store's files: ``raw_*``, ``metric_specs`` and ``int_scores_preferred`` (its body depends
on the manifest). A name a view reads is looked up in ``main`` first, so the cached views read
this store's files. No cache folder (unset ``HOME``, a read-only one): views bound as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import duckdb

from hylo_analytics import _schema
from hylo_analytics._sql import PREFERRED_VIEW, macro_sql, view_order, view_sql

log = logging.getLogger("hylo_analytics.store")

CATALOG = "hylo_views"  # the attached database's name, as ``duckdb_views()`` lists it
# what stays in each connection's own ``main``: it names the store's files or its state
LOCAL_VIEWS = frozenset({*(f"raw_{t}" for t in _schema.TABLES), "metric_specs", PREFERRED_VIEW})


def cache_dir() -> Path | None:
    """``HYLO_ANALYTICS_CACHE_DIR``, else ``$XDG_CACHE_HOME/hylo_analytics``, else
    ``~/.cache/hylo_analytics``; None when there is no home to put it in, or when
    ``HYLO_ANALYTICS_CACHE_DIR=off`` (every connection then binds its own views)."""
    env = os.environ.get("HYLO_ANALYTICS_CACHE_DIR", "").strip()
    if env:
        return None if env.lower() == "off" else Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg:
        return Path(xdg) / "hylo_analytics"
    try:
        home = Path.home()
    except (RuntimeError, KeyError):
        return None
    return home / ".cache" / "hylo_analytics"


def statements(friendly: Sequence[str]) -> list[str]:
    """Macros, then every view in :func:`~hylo_analytics._sql.view_order`, then ``friendly``:
    a working order, so a plain ``duckdb`` shell can run them one after another."""
    views = [f"CREATE OR REPLACE VIEW {n} AS\n{view_sql(n)}" for n in view_order()]
    return [*macro_sql(), *views, *friendly]


def attach(
    con: duckdb.DuckDBPyConnection, prelude: Sequence[str], friendly: Sequence[str]
) -> list[str] | None:
    """Attach the cached catalog to ``con``; return :func:`statements`, or None (bind in memory).

    ``prelude``: statements creating the local ``raw_*`` and ``metric_specs`` views (the views
    are bound against them once, when the file is built); ``friendly``: the friendly names'
    statements. The file is named by a hash of the SQL it holds and DuckDB's version, written
    to a temporary name and renamed, so a reader never attaches half a file; a file that does
    not attach is rebuilt once, then this connection binds its views itself.
    """
    folder = cache_dir()
    if folder is None:
        return None
    every = statements(friendly)
    digest = hashlib.sha256("\x00".join([duckdb.__version__, *every]).encode()).hexdigest()
    path = folder / f"views-{digest[:20]}.duckdb"
    for attempt in range(2):
        try:
            if attempt or not _usable(path):
                _build(path, prelude, every)
            con.execute(f"ATTACH '{_quote(path.as_posix())}' AS {CATALOG} (READ_ONLY)")
        except (OSError, duckdb.Error) as exc:
            log.debug("view catalog %s not used: %s", path, exc)
            _detach(con)
            continue
        con.execute(f"SET search_path = 'memory.main,{CATALOG}.main'")
        return every
    return None


def _usable(path: Path) -> bool:
    """The file is there and this user's (a catalog someone else wrote is not trusted)."""
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and st.st_size > 0


def _build(path: Path, prelude: Sequence[str], every: Sequence[str]) -> None:
    """Bind ``every`` statement once in a new file at ``path``, the local views dropped."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        con = duckdb.connect(tmp.as_posix())
        try:
            for stmt in (*prelude, *every):
                con.execute(stmt)
            for name in LOCAL_VIEWS:  # resolved in each connection's own main instead
                con.execute(f"DROP VIEW IF EXISTS {name}")
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, path)
        _prune(path)
    finally:
        tmp.unlink(missing_ok=True)
        tmp.with_name(tmp.name + ".wal").unlink(missing_ok=True)


STALE_DAYS = 30  # a catalog of other SQL (another version) unused this long is removed


def _prune(built: Path) -> None:
    """Remove this user's catalogs of other SQL not modified for :data:`STALE_DAYS` days, so
    upgrades do not pile files up (a version still in use rebuilds its file: 0.5 s)."""
    cutoff = time.time() - STALE_DAYS * 86400
    for other in built.parent.glob("views-*.duckdb"):
        with contextlib.suppress(OSError):
            st = other.stat()
            if other != built and st.st_uid == os.getuid() and st.st_mtime < cutoff:
                other.unlink()


def _detach(con: duckdb.DuckDBPyConnection) -> None:
    with contextlib.suppress(duckdb.Error):
        con.execute(f"DETACH DATABASE IF EXISTS {CATALOG}")


def _quote(text: str) -> str:
    return text.replace("'", "''")
