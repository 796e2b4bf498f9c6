"""``manage.py rivet schedule list|create|pause|resume|trigger|backfill|delete``: schedules stored as data
from a terminal (DESIGN.md section 20). Thin: parse, call ``client().schedules``, print."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.management.base import CommandError

from .. import display
from . import console

HANDLED = frozenset({"schedule"})


def add_parsers(subs: Any) -> None:
    """Add the ``schedule`` subcommand and its actions to ``subs`` (an argparse subparsers action)."""
    schedule = subs.add_parser("schedule", help="Schedules stored as data (docs/howto/schedules.md).")
    actions = schedule.add_subparsers(dest="schedule_action", required=True, metavar="ACTION")
    actions.add_parser("list", help="Every schedule (a table).")
    create = actions.add_parser("create", help="Create a schedule firing actor type TYPE.")
    create.add_argument("schedule_id", metavar="ID")
    create.add_argument("--actor", required=True, metavar="TYPE", help="a registered actor type")
    cadence = create.add_mutually_exclusive_group(required=True)
    cadence.add_argument("--cron", metavar="EXPR", help="a 5-field cron expression, e.g. '0 3 * * *'")
    cadence.add_argument("--every", type=float, metavar="S", help="seconds between ticks (at least 1)")
    create.add_argument(
        "--key", metavar="KEY", help="the actor key (a string or a JSON list); default: a new actor per tick"
    )
    create.add_argument("--timezone", default="UTC", metavar="TZ", help="IANA zone of --cron (default UTC)")
    create.add_argument("--input", metavar="JSON", help="the actor's input as JSON")
    create.add_argument("--action", metavar="NAME", help="an action run on the actor at each fire")
    create.add_argument(
        "--args", dest="action_args", metavar="JSON", help="the action's arguments as a JSON list"
    )
    create.add_argument(
        "--catchup", choices=("one", "all", "none"), default="one", help="after downtime (default one)"
    )
    create.add_argument("--paused", action="store_true", help="create it paused")
    for name, text in (
        ("pause", "Stop the sweep firing schedule ID."),
        ("resume", "Fire schedule ID again from its next tick."),
        ("trigger", "Fire schedule ID once now."),
        ("delete", "Delete schedule ID and its fire log."),
    ):
        actions.add_parser(name, help=text).add_argument("schedule_id", metavar="ID")
    backfill = actions.add_parser(
        "backfill", help="Fire each tick of ID in [START, END) not fired yet, in order."
    )
    backfill.add_argument("schedule_id", metavar="ID")
    backfill.add_argument("start", metavar="START", help="ISO 8601 with an offset, e.g. 2026-01-01T00:00Z")
    backfill.add_argument("end", metavar="END", help="ISO 8601 with an offset (excluded)")


def handle(command: Any, sub: str, options: dict) -> None:
    """Run ``schedule <action>`` for the management ``command``; engine errors propagate (the command turns
    them into ``CommandError``)."""
    from .. import django_runtime

    schedules = django_runtime.get_runtime().client().schedules
    action = options["schedule_action"]
    out = command.stdout
    if action == "list":
        rows = [
            (
                info.schedule_id,
                info.actor,
                display.key_json(info.key) if info.key is not None else "(per tick)",
                info.cron or f"every {info.every:g} s",
                "paused" if info.paused else _time(info.next_fire_at),
                _time(info.last_fired_at),
            )
            for info in schedules.list()
        ]
        title = f"{len(rows)} schedule{'' if len(rows) == 1 else 's'}"
        console.table(out, ("id", "actor", "key", "cadence", "next fire", "last fired"), rows, title=title)
    elif action == "create":
        info = schedules.create(
            options["schedule_id"],
            actor=options["actor"],
            key=_key(options.get("key")),
            cron=options.get("cron"),
            every=options.get("every"),
            timezone=options["timezone"],
            input=_json(options.get("input"), "--input"),
            action=options.get("action"),
            args=_json(options.get("action_args"), "--args") or (),
            catchup=options["catchup"],
            paused=options["paused"],
        )
        next_fire = "paused" if info.paused else f"next fire {_time(info.next_fire_at)}"
        out.write(f"created schedule {info.schedule_id} ({next_fire})")
    elif action in ("pause", "resume"):
        info = getattr(schedules, action)(options["schedule_id"])
        state = "paused" if info.paused else f"next fire {_time(info.next_fire_at)}"
        out.write(f"schedule {info.schedule_id}: {state}")
    elif action == "trigger":
        fire = schedules.trigger(options["schedule_id"])
        out.write(f"fired schedule {fire.schedule_id}: {fire.status} (actor {fire.actor_id})")
    elif action == "backfill":
        fires = schedules.backfill(
            options["schedule_id"], _when(options["start"], "START"), _when(options["end"], "END")
        )
        for fire in fires:
            out.write(f"{fire.tick.isoformat()}  {fire.status}  {fire.actor_id or ''}")
        out.write(f"backfilled {len(fires)} tick{'' if len(fires) == 1 else 's'}")
    elif action == "delete":
        schedules.delete(options["schedule_id"])
        out.write(f"deleted schedule {options['schedule_id']}")


def _time(value: Any) -> str:
    return display.format_time(value) if value is not None else ""


def _json(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{what} is not valid JSON ({exc.msg} at character {exc.pos}): {text!r}") from exc


def _key(text: str | None) -> Any:
    if text is None or not text.startswith("["):
        return text
    return _json(text, "--key")


def _when(text: str, what: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise CommandError(f"{what} is not an ISO 8601 time: {text!r}") from exc
    if value.tzinfo is None:
        raise CommandError(f"{what} needs an offset (e.g. {text}Z or {text}+02:00)")
    return value
