"""The ``list``, ``show``, ``start``, ``send`` and ``fork`` subcommands of ``manage.py rivet`` (DESIGN.md section 14):
look at actors and drive them from a terminal. Thin: parse, call the engine or ``ops``, print."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError

from .. import display
from ..conf import rivet_settings
from ..engine.model import errors, ports
from ..engine.operate import inspector
from . import console

HANDLED = frozenset({"list", "show", "start", "send", "fork"})

#: characters of an error message shown in a table cell of ``rivet show``
ERROR_CHARS = 70


def add_parsers(subs: Any) -> None:
    """Add the subcommand parsers to ``subs`` (an argparse subparsers action)."""
    from .. import ops

    listing = subs.add_parser("list", help="Actors, the most recently changed first (a table).")
    listing.add_argument("--name", metavar="TYPE", help="only actors of this type")
    listing.add_argument(
        "--state", metavar="S", help=f"only this workflow state ({', '.join(ops.LIST_STATES)})"
    )
    listing.add_argument("--limit", type=int, default=100, metavar="N", help="at most N rows (default 100)")
    listing.add_argument(
        "--attr",
        action="append",
        metavar="KEY=VALUE",
        help="only actors with this search attribute (repeatable)",
    )
    listing.add_argument("--since", metavar="ISO", help="only actors created after this instant (ISO 8601)")
    listing.add_argument("--until", metavar="ISO", help="only actors created before this instant (ISO 8601)")
    show = subs.add_parser(
        "show", help="An actor and its run trace: each history entry with status, attempts and duration."
    )
    show.add_argument("actor_id", metavar="ACTOR_ID")
    start = subs.add_parser("start", help="Create an actor of TYPE with KEY and start its workflow.")
    start.add_argument("type", metavar="TYPE", help="a registered actor type")
    start.add_argument("key", metavar="KEY", help="the key: a string, or a JSON list such as '[\"eu\", 42]'")
    start.add_argument("--input", metavar="JSON", help="the workflow input as JSON")
    send = subs.add_parser("send", help="Send BODY (JSON) to queue QUEUE of actor ACTOR_ID.")
    send.add_argument("actor_id", metavar="ACTOR_ID")
    send.add_argument("queue", metavar="QUEUE")
    send.add_argument(
        "body", metavar="BODY", help="the message body as JSON: 42, '{\"ok\": true}', '\"text\"'"
    )
    send.add_argument("--wait", action="store_true", help="wait for the workflow's response and print it")
    send.add_argument(
        "--dedup-id", help="deduplication id: a second send with it to the actor stores nothing"
    )
    send.add_argument(
        "--timeout", type=float, metavar="S", help="seconds to wait with --wait (default ACTION_TIMEOUT)"
    )
    fork = subs.add_parser(
        "fork",
        help="Fork ACTOR_ID: a new actor of its type with its history (before --entry) and its input "
        "(or --input), run from there; ACTOR_ID is not changed.",
    )
    fork.add_argument("actor_id", metavar="ACTOR_ID")
    fork.add_argument("--entry", metavar="ID", help="the step to fork at (copied: the history before it)")
    fork.add_argument("--input", metavar="JSON", help="the new actor's input as JSON (default: the source's)")
    fork.add_argument("--key", metavar="KEY", help="the new actor's key (default: the source's + fork-<hex>)")
    fork.add_argument("--reason", help="why (kept in both actors' operator actions)")


def handle(command: Any, sub: str, options: dict) -> None:
    """Run subcommand ``sub`` for the management ``command`` (its stdout/stderr are used)."""
    if sub == "list":
        _list(command, options)
    elif sub == "show":
        _show(command, options["actor_id"])
    elif sub == "start":
        _start(command, options)
    elif sub == "send":
        _send(command, options)
    elif sub == "fork":
        _fork(command, options)


def _json_argument(text: str, what: str, hint: str = "") -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(
            f"{what} is not valid JSON ({exc.msg} at character {exc.pos}): {text!r}{hint}"
        ) from exc


def _time(value: Any) -> str:
    return display.format_time(value) if value is not None else ""


def _list(command: Any, options: dict) -> None:
    from .. import django_runtime, ops

    if options.get("attr") or options.get("since") or options.get("until"):
        _list_by_filter(command, options)
        return
    try:
        rows, total = ops.list_actors(
            django_runtime.get_runtime(), options.get("name"), options.get("state"), limit=options["limit"]
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    cells = [
        (
            row.actor_id,
            row.name,
            display.short_key(row.key, 40),
            row.workflow_state,
            f"({row.doing} now)"
            if row.doing in (inspector.RUNNING, inspector.DUE)
            else ",".join(row.waiting_for),
            _time(row.wake_at),
            _time(row.updated_at),
        )
        for row in rows
    ]
    headers = ("actor id", "type", "key", "state", "waits on", "wakes at", "updated")
    shown = f"{len(rows)} of {total}" if total > len(rows) else str(total)
    console.table(command.stdout, headers, cells, title=f"{shown} actor{'' if total == 1 else 's'}")


def _duration(entry: ports.EntryRecord, by_key: dict, now: Any) -> str:
    end = inspector.entry_completed_at(entry, by_key)
    if end is None and entry.status == ports.ENTRY_RUNNING:
        end = now
    if end is None or entry.created_at is None:
        return ""
    return display.duration(max((end - entry.created_at).total_seconds(), 0.0))


def _error_text(error: Any) -> str:
    if not error:
        return ""
    text = (
        f"{error.get('name', 'Error')}: {error.get('message', '')}" if isinstance(error, dict) else str(error)
    )
    return display.shorten(" ".join(text.split()), ERROR_CHARS)


def _since(start: Any, end: Any) -> str:
    if start is None or end is None:
        return ""
    return display.duration(max((end - start).total_seconds(), 0.0))


def _started_at(value: Any) -> str:
    return display.format_time(value, precise=True, date=False) if value is not None else ""


def _step_status(entry: ports.EntryRecord, by_key: dict) -> str:
    """A step's status with its compensation: ``completed, compensated`` when its rollback handler ran,
    ``completed, rollback failed`` when it raised (the admin's badges)."""
    status = inspector.entry_status(entry, by_key)
    if entry.rollback_error:
        return f"{status}, rollback failed"
    if entry.rollback_completed_at is not None:
        return f"{status}, compensated"
    return status


def _wait_detail(wait: inspector.QueueWait) -> str:
    parts = [f"queue {', '.join(wait.queues) or 'any'}"]
    if wait.count:
        parts.append(f"{wait.count} message{'' if wait.count == 1 else 's'}")
    if wait.deadline is not None:
        verb = "timed out at" if wait.status == inspector.TIMED_OUT else "deadline"
        parts.append(f"{verb} {display.format_time(wait.deadline, date=False)}")
    return ", ".join(parts)


def trace_cells(entries: list[ports.EntryRecord], now: Any) -> list[tuple[str, ...]]:
    """The rows of ``rivet show``'s trace, in creation order, as the admin trace shows it: the entry's
    name indented by its depth (``  ~1``, ``    charge``), then kind, status (``inspector.entry_status``;
    a step whose rollback handler ran reads ``completed, compensated``), attempts, start time, duration
    and a detail (the error, type: message, cut short). One queue wait is one row (kind ``queue wait``,
    status ``waiting``, ``received`` or ``timed out``; ``inspector.queue_waits``); a step that took more
    than one attempt lists each under it (``attempt N``, its outcome, start, duration and error), and a
    failed rollback its error."""
    by_key = {e.key: e for e in entries}
    waits = inspector.queue_waits(entries)
    shown: set[str] = set()
    cells = []
    for entry in sorted(entries, key=lambda e: e.seq):
        depth = max(len(entry.location) - 1, 0)
        indent = "  " * depth
        wait = waits.get(entry.key)
        if wait is not None:
            if wait.key not in shown:
                shown.add(wait.key)
                end = wait.finished_at or now
                cells.append(
                    (
                        indent + wait.key.rsplit("/", 1)[-1],
                        "queue wait",
                        wait.status,
                        "",
                        _started_at(wait.started_at),
                        _since(wait.started_at, end),
                        _wait_detail(wait),
                    )
                )
            continue
        cells.append(
            (
                indent + entry.key.rsplit("/", 1)[-1],
                entry.kind,
                _step_status(entry, by_key)
                if entry.kind == "step"
                else inspector.entry_status(entry, by_key),
                str(entry.attempts) if entry.kind == "step" else "",
                _started_at(entry.created_at),
                _duration(entry, by_key, now),
                _error_text(entry.error),
            )
        )
        attempts = inspector.attempt_log(entry)
        if len(attempts) > 1:
            for item in attempts:
                finished = item.get("finished_at")
                if finished is None and item.get("outcome") == "running":
                    finished = now
                cells.append(
                    (
                        f"{indent}  attempt {item.get('attempt')}",
                        "attempt",
                        str(item.get("outcome") or ""),
                        "",
                        _started_at(item.get("started_at")),
                        _since(item.get("started_at"), finished),
                        _error_text(item.get("error")),
                    )
                )
        if entry.rollback_error:
            cells.append(
                (f"{indent}  rollback", "rollback", "failed", "", "", "", _error_text(entry.rollback_error))
            )
    return cells


def _show(command: Any, actor_id: str) -> None:
    from .. import django_runtime

    runtime = django_runtime.get_runtime()
    store = runtime.store
    try:
        record = store.get_actor(actor_id)
    except errors.ActorNotFoundError as exc:
        raise CommandError(f"no actor with id {actor_id!r} (rivet list shows the actors)") from exc
    entries = store.load_history(actor_id)
    now = store.now()
    out = console.raw(command.stdout)
    state = inspector.shown_workflow_state(runtime.registry, record)
    lines = [
        f"actor     {record.actor_id}",
        f"type      {record.name}",
        f"key       {display.key_json(record.key)}",
        f"state     {state}",
        f"created   {_time(record.created_at)}",
        f"updated   {_time(record.updated_at)}",
    ]
    doing = inspector.activity(
        record.lease_owner, record.lease_expires_at, record.wake_at, record.waiting_for, now
    )
    if doing.doing == inspector.RUNNING:
        lines.append(
            f"now       running (leased by {record.lease_owner} until {_time(record.lease_expires_at)})"
        )
    elif doing.doing == inspector.DUE:
        lines.append("now       due (its wait is over; a worker picks it up)")
    if doing.wake_at is not None:
        lines.append(f"wakes at  {_time(doing.wake_at)}")
    if doing.waiting_for:
        lines.append(f"waits on  {', '.join(doing.waiting_for)}")
    if record.error:
        lines.append(f"error     {_error_text(record.error)}")
    if record.workflow_state == ports.SUSPENDED and isinstance(record.error, dict):
        # a code error stopped the run (DESIGN.md section 16): where, and what brings it back
        if record.error.get("location"):
            lines.append(f"raised at {record.error['location']}")
        lines.append(
            "suspended nothing was rolled back; fix the code and deploy (a new CODE_VERSION retries it), "
            "or rivet retry --actor " + record.actor_id
        )
    trace_id, trace_url = display.trace_link(record.trace_context, rivet_settings.TRACE_URL)
    if trace_id:
        lines.append(f"trace     {trace_url or trace_id}")
    out.write("\n".join(lines) + "\n")
    if not entries:
        out.write("no history yet\n")
        return
    headers = ("entry", "kind", "status", "attempts", "started", "took", "detail")
    console.table(command.stdout, headers, trace_cells(entries, now), title=f"trace ({len(entries)} entries)")


def _key_argument(text: str) -> Any:
    if text.startswith("["):
        key = _json_argument(text, "KEY", " (a key starting with '[' is read as a JSON list)")
        if not isinstance(key, list):  # pragma: no cover - a JSON text starting with [ is a list
            raise CommandError("KEY must be a string or a JSON list")
        return key
    return text


def _start(command: Any, options: dict) -> None:
    from .. import django_runtime

    runtime = django_runtime.get_runtime()
    name = options["type"]
    if name not in runtime.registry:
        raise CommandError(f"no actor type {name!r}; registered: {', '.join(runtime.registry.names())}")
    if runtime.registry.get(name).run is None:
        raise CommandError(f"actor type {name!r} has no workflow (no run function) to start")
    key = _key_argument(options["key"])
    data = _json_argument(options["input"], "--input") if options.get("input") is not None else None
    handle = runtime.registry.client()[name].create(key, data)
    command.stdout.write(f"started {name} {display.key_json(handle.key)}: {handle.actor_id}")


def _send(command: Any, options: dict) -> None:
    from .. import django_runtime

    runtime = django_runtime.get_runtime()
    actor_id = options["actor_id"]
    body = _json_argument(options["body"], "BODY", " (quote a text as JSON: '\"text\"')")
    try:
        record = runtime.store.get_actor(actor_id)
    except errors.ActorNotFoundError as exc:
        raise CommandError(f"no actor with id {actor_id!r} (rivet list shows the actors)") from exc
    if record.name not in runtime.registry:
        raise CommandError(f"actor {actor_id} is a {record.name!r}, a type not registered in this process")
    timeout = options.get("timeout")
    if timeout is not None and timeout < 0:
        raise CommandError("--timeout must be >= 0 seconds")
    handle = runtime.registry.client()[record.name].get_for_id(actor_id)
    try:
        result = handle.send(
            options["queue"],
            body,
            wait=bool(options.get("wait")),
            timeout=timeout,
            dedup_id=options.get("dedup_id"),
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    if result is None:
        command.stdout.write(f"sent to {record.name} {actor_id} queue {options['queue']!r}")
        return
    if result.status != "completed":
        raise CommandError(f"no response: {result.detail or 'timed out'}")
    command.stdout.write(json.dumps(inspector.plain(result.response)[0], ensure_ascii=False))


def _fork(command: Any, options: dict) -> None:
    from .. import django_runtime
    from ..engine.actor import audit
    from ..engine.operate import forks

    runtime = django_runtime.get_runtime()
    given = options.get("input")
    result = forks.fork(
        runtime,
        options["actor_id"],
        options.get("entry") or None,
        input=ports.UNSET if given is None else _json_argument(given, "--input"),
        key=None if options.get("key") is None else _key_argument(options["key"]),
        who=audit.COMMAND,
        reason=options.get("reason"),
    )
    where = f"before {result.entry_id!r}" if result.entry_id else "the whole history"
    command.stdout.write(
        f"forked {options['actor_id']} ({where}, {len(result.copied)} entries copied): "
        f"{display.key_json(result.key)} {result.actor_id}"
    )


def _list_by_filter(command: Any, options: dict) -> None:
    """``rivet list --attr/--since/--until``: the actors the filter selects, the newest created first, with
    their search attributes (``Store.find_actors``; DESIGN.md section 19)."""
    from .. import django_runtime
    from .ops_commands import filter_of

    runtime = django_runtime.get_runtime()
    query = filter_of({**options, "name": [options["name"]] if options.get("name") else None})
    if options["limit"] < 1:
        raise CommandError("--limit must be >= 1")
    records = runtime.store.find_actors(query, limit=options["limit"], newest_first=True)
    total = runtime.store.count_actors(query)
    run_less = set(inspector.run_less_types(runtime.registry))
    cells = [
        (
            r.actor_id,
            r.name,
            display.short_key(r.key, 40),
            inspector.NO_WORKFLOW if r.name in run_less else r.workflow_state,
            display.shorten(json.dumps(r.attributes, sort_keys=True), 60),
            _time(r.created_at),
            _time(r.updated_at),
        )
        for r in records
    ]
    headers = ("actor id", "type", "key", "state", "attributes", "created", "updated")
    shown = f"{len(records)} of {total}" if total > len(records) else str(total)
    console.table(command.stdout, headers, cells, title=f"{shown} actor{'' if total == 1 else 's'}")
