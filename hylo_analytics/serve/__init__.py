"""``hylo-analytics serve``: a local, read-only web app over a store.

The views read through the same views and verbs as the CLI and the report (``mart_runs``,
``mart_aggregate_run``, ``compare``, ``int_key_scores``, ``events``); the pages only lay out.
Starlette and uvicorn are the ``serve`` extra, imported only here.
"""

from __future__ import annotations

from hylo_analytics.serve._data import StoreReader, UnknownRunError
from hylo_analytics.serve.app import create_app

__all__ = ["StoreReader", "UnknownRunError", "create_app"]
