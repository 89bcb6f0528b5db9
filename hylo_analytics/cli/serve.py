"""``hylo-analytics serve``: browse a store in a local, read-only web app."""

from __future__ import annotations

import argparse
import sys

from hylo_analytics.cli._common import add_store_arg, say, store_from


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        help="browse the store in a local, read-only web app",
        description=(
            "Serve a local web app over the store: runs (filter, sort, pick a parent and "
            "candidates), the comparison (verdict, rule, forest plot, per-task table, dropped "
            "pairs), a task's paired episodes (discordant first) and both traces of a pair. "
            "New runs appear without a restart. The server never writes to the store, "
            "binds to 127.0.0.1 unless told otherwise and answers only to loopback host "
            "names (--allow-host adds one); bound beyond loopback it prints a warning and a "
            "one-time token URL (see docs/security.md). Needs the 'serve' extra. Example: "
            "hylo-analytics serve --store out/store"
        ),
    )
    add_store_arg(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default: 8765)")
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer to this Host name (repeatable); by default only localhost, "
        "127.0.0.1 and [::1], which stops DNS-rebinding pages reading the store",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:  # the web stack is optional and heavy: load it only for this command
        import uvicorn

        from hylo_analytics.serve import StoreReader, create_app
        from hylo_analytics.serve.app import LOOPBACK_HOSTS, new_token
    except ImportError:
        print(
            "hylo-analytics serve: needs the web server: pip install 'hylo_analytics[serve]'",
            file=sys.stderr,
        )
        return 2
    store = store_from(args)  # open_store(create=False): a missing store is an error
    bind = args.host.strip("[]")
    loopback = bind in LOOPBACK_HOSTS or bind.startswith("127.")
    hosts = list(args.allow_host)
    token = None
    if not loopback:
        token = new_token()
        if bind not in ("0.0.0.0", "::"):
            hosts.append(bind)
        print(
            f"WARNING: serving on {args.host}, beyond this machine: anyone who can reach "
            "the port and has the token below can read every run in the store. Requests "
            "need the token (given once in the URL, then kept in a cookie); the server "
            f"answers only to the host names {', '.join([*LOOPBACK_HOSTS, *hosts])} "
            "(--allow-host adds one).",
            file=sys.stderr,
            flush=True,
        )
    app = create_app(StoreReader(store), allow_hosts=hosts, token=token)
    shown = f"[{bind}]" if ":" in bind else bind
    address = f"http://{shown}:{args.port}/" + (f"?token={token}" if token else "")
    say(f"serving {store.root} at {address} (Ctrl-C stops)")  # a path may hold ESC
    sys.stdout.flush()
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
