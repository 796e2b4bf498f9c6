"""The Django side of the shard tests and of benchmark P10, run in a process of its own on the shards'
clusters (``tests/shards/settings.py``: ``RIVET_SHARD_URLS`` and ``DJANGO_SETTINGS_MODULE`` from
``Clusters.env()``), since the test process's Django is configured for the suite's database:

``python -m tests.shards create TYPE --keys '[["a"], ["b"]]' [--input '{...}']``
    creates the actors through the client (``get_or_create``); prints one JSON object, key text -> actor id.
``python -m tests.shards create TYPE --count N [--prefix P]``
    the same for the keys ``[P0]`` .. ``[P<N-1>]``.
``python -m tests.shards relay-loop [--pause S]``
    calls ``rivet_workflows.engine.runtime.relay.relay_once`` in a loop, ``--pause`` seconds apart, until
    killed (a relay of its own beside the sweep's). With ``RIVET_FAULT_DIR`` set, the first relay that finds
    the flag file ``kill-relay-mark`` there renames it (``.taken``) and SIGKILLs itself just before it marks
    delivered rows (the ``UPDATE`` of ``rivet_workflows_relaymessage`` setting ``delivered_at``): after the
    target shard committed the messages and before the source shard records that, the crash point
    exactly-once must survive.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

#: the statement the relay's fault point precedes: marking relay rows delivered on the source shard
MARK_SQL = re.compile(r'^\s*UPDATE\s+"?rivet_workflows_relaymessage"?\s+SET\s+"?delivered_at"?\s*=', re.I)


def _django() -> None:
    import django

    django.setup()


def create(kind: str, keys: list[list[Any]], input: Any) -> dict[str, str]:
    """Create (``get_or_create``) the actors ``kind`` at ``keys`` through the client: key text -> actor id."""
    from rivet_workflows import django_runtime

    client = django_runtime.client()
    made = {}
    for key in keys:
        made[json.dumps(key)] = client[kind].get_or_create(key, input=input).actor_id
    return made


def call_relay_once() -> Any:
    """One relay pass of this process's runtime, as the Celery task ``rivet_workflows.relay`` runs it:
    ``relay_once`` over ``store.relay_sources()``, delivering through the (sharded) store, waking the
    targets (DESIGN.md section 21). Returns its ``RelayReport``."""
    from rivet_workflows import django_runtime
    from rivet_workflows.engine.runtime import relay

    runtime = django_runtime.get_runtime()
    if hasattr(relay, "relay_runtime"):
        return relay.relay_runtime(runtime)
    store = runtime.store
    return relay.relay_once(store.relay_sources(), lambda _actor_id: store, wake=runtime.wake)


def _fault_hook(fault_dir: Path):
    """A Django ``execute_wrapper`` that SIGKILLs this process before the relay marks rows delivered, once
    per ``kill-relay-mark`` flag file (renamed ``kill-relay-mark.taken`` first)."""

    def hook(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if MARK_SQL.match(sql):
            try:
                os.rename(fault_dir / "kill-relay-mark", fault_dir / "kill-relay-mark.taken")
            except FileNotFoundError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        return execute(sql, params, many, context)

    return hook


def relay_loop(pause: float) -> None:
    """``call_relay_once`` until killed; a failed call (a shard that is down) is retried after ``pause``."""
    from django.db import connections

    fault_dir = os.environ.get("RIVET_FAULT_DIR")
    with ExitStack() as stack:
        if fault_dir:
            hook = _fault_hook(Path(fault_dir))
            for alias in connections:
                stack.enter_context(connections[alias].execute_wrapper(hook))
        print("relay-loop ready", flush=True)
        while True:
            try:
                call_relay_once()
            except Exception as exc:  # a shard down: the next round tries again
                print(f"relay_once failed: {exc!r}", file=sys.stderr, flush=True)
                for alias in connections:
                    connections[alias].close()
            time.sleep(pause)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.shards", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    made = sub.add_parser("create", help="create actors through the client")
    made.add_argument("kind")
    made.add_argument("--keys", help="JSON list of keys (each a list)")
    made.add_argument("--count", type=int, default=0)
    made.add_argument("--prefix", default="k")
    made.add_argument("--input", default="null", help="JSON input of every actor")
    loop = sub.add_parser("relay-loop", help="relay_once in a loop until killed")
    loop.add_argument("--pause", type=float, default=0.05)
    options = parser.parse_args(argv)
    _django()
    if options.command == "create":
        keys = (
            json.loads(options.keys)
            if options.keys
            else [[f"{options.prefix}{i}"] for i in range(options.count)]
        )
        print(json.dumps(create(options.kind, keys, json.loads(options.input))), flush=True)
        return 0
    relay_loop(options.pause)
    return 0


if __name__ == "__main__":
    sys.exit(main())
