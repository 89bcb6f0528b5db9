"""``hylo-analytics serve``: browse a store in a local, read-only web app."""

from __future__ import annotations

import argparse
import sys

from hylo_analytics.cli._common import add_store_arg, store_from


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        help="browse the store in a local, read-only web app",
        description=(
            "Serve a local web app over the store: runs (filter, sort, pick a parent and "
            "candidates), the comparison (verdict, rule, forest plot, per-task table, dropped "
            "pairs), a task's paired episodes (discordant first) and both traces of a pair. "
            "New runs appear without a restart. The server never writes to the store and "
            "binds to 127.0.0.1 unless told otherwise. Needs the 'serve' extra. Example: "
            "hylo-analytics serve --store out/store"
        ),
    )
    add_store_arg(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default: 8765)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:  # the web stack is optional and heavy: load it only for this command
        import uvicorn

        from hylo_analytics.serve import StoreReader, create_app
    except ImportError:
        print(
            "hylo-analytics serve: needs the web server: pip install 'hylo_analytics[serve]'",
            file=sys.stderr,
        )
        return 2
    store = store_from(args)  # open_store(create=False): a missing store is an error
    app = create_app(StoreReader(store))
    print(f"serving {store.root} at http://{args.host}:{args.port}/ (Ctrl-C stops)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
