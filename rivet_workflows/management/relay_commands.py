"""``manage.py rivet relay [--failed] [--limit N]``: the relay outbox rows of every shard, read only
(DESIGN.md section 21; docs/howto/shards.md, "Failed outbox rows"). Thin: one query per shard, print."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from .. import display, models, sharding
from . import console

HANDLED = frozenset({"relay"})


def add_parsers(subs: Any) -> None:
    """Add the ``relay`` subcommand to ``subs`` (an argparse subparsers action)."""
    relay = subs.add_parser(
        "relay",
        help="List the outbox rows of sends and creates across shards: pending ones (default) or the ones "
        "the target refused for good (--failed), newest first, on every shard. Reads only.",
    )
    relay.add_argument("--failed", action="store_true", help="the rows failed for good (default: pending)")
    relay.add_argument("--limit", type=int, default=50, metavar="N", help="rows per shard (default 50)")


def handle(command: Any, sub: str, options: dict) -> None:
    """Print the chosen rows of every shard as a table (shard, id, kind, created, source, target, name,
    attempts, last error); ``CommandError`` for a ``--limit`` below 1."""
    limit = options["limit"]
    if limit < 1:
        raise CommandError("--limit must be at least 1")
    failed = options["failed"]

    def rows(alias: str) -> list[tuple[str, Any]]:
        query = models.RelayMessage.objects.using(alias).filter(delivered_at__isnull=True, failed=failed)
        return [(alias, row) for row in query.order_by("-id")[:limit]]

    found = sharding.each(rows)
    table = [
        (
            alias,
            str(row.id),
            row.kind,
            display.format_time(row.created_at),
            row.source_actor_id,
            row.target_actor_id,
            row.name,
            str(row.attempts),
            (row.last_error or "")[:120],
        )
        for alias, row in found
    ]
    what = "failed" if failed else "pending"
    title = f"{len(table)} {what} relay row{'' if len(table) == 1 else 's'}"
    columns = ("shard", "id", "kind", "created", "from", "to", "queue/type", "attempts", "last error")
    console.table(command.stdout, columns, table, title=title)
