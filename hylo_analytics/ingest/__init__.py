"""Ingest: source files in, store commits out.

The front door of the package. An ingest walks one way through its rooms: the file walk
(:mod:`._walk`), identity, what the store already holds (:mod:`._identity`), the claim table
of a sharded ingest (:mod:`._claims`, :mod:`._sharded`), reading and hashing (:mod:`._files`),
the reader registry (:mod:`._registry`) and the readers (one module per source format), then
the commits (:mod:`._commit`) and what the ingest did (:mod:`._report`). :mod:`._driver` and
:mod:`._chunk` pass each file through them once. Bad input becomes quarantine rows;
``strict=True`` raises.
"""

from __future__ import annotations

import logging

from hylo_analytics.ingest._driver import ingest_paths
from hylo_analytics.ingest._reader import Reader
from hylo_analytics.ingest._registry import READERS, detect
from hylo_analytics.ingest._report import IngestError, IngestReport, Problem

__all__ = ["READERS", "IngestError", "IngestReport", "Problem", "Reader", "detect", "ingest_paths"]

# Importable from here before the package was split into rooms: kept for code that used them.
from hylo_analytics.ingest._claims import claim_files as claim_files
from hylo_analytics.ingest._claims import lease_seconds as lease_seconds
from hylo_analytics.ingest._commit import rows_of as _rows_of  # noqa: F401
from hylo_analytics.ingest._common import release_memory as release_memory
from hylo_analytics.ingest._files import MAX_DOC_BYTES as MAX_DOC_BYTES
from hylo_analytics.ingest._files import SourceFile as SourceFile
from hylo_analytics.ingest._files import deep_json as deep_json
from hylo_analytics.ingest._files import read_files as read_files
from hylo_analytics.ingest._files import too_deep as too_deep
from hylo_analytics.ingest._reader import SNIFF_BYTES as SNIFF_BYTES
from hylo_analytics.ingest._reader import Parsed as Parsed
from hylo_analytics.ingest._reader import drop_duplicate_runs as drop_duplicate_runs
from hylo_analytics.ingest._reader import remap_file_idx as remap_file_idx
from hylo_analytics.ingest._sharded import work as _work  # noqa: F401
from hylo_analytics.ingest._walk import discover as discover
from hylo_analytics.ingest.formats import hylo as hylo
from hylo_analytics.ingest.formats import inspect as inspect
from hylo_analytics.ingest.formats import inspect_robots as inspect_robots
from hylo_analytics.ingest.formats import metric_results as metric_results
from hylo_analytics.ingest.formats import vla_eval as vla_eval
from hylo_analytics.ingest.traces import TRACE_FORMAT as TRACE_FORMAT
from hylo_analytics.ingest.traces import TraceBatch as TraceBatch
from hylo_analytics.ingest.traces import TraceRef as TraceRef
from hylo_analytics.ingest.traces import iter_traces as iter_traces
from hylo_analytics.store import Tombstone as Tombstone

log = logging.getLogger(__name__)  # the ingest's own logger (the rooms log to it by name)
