"""Helpers of the port conformance suite: ``StoreHarness``, one per store implementation (DESIGN.md 11).

``h`` is parametrised over ``memory`` (``testing.MemoryStore``), ``django`` (the portable
``storage.DjangoStore`` on the test database: SQLite by default, PostgreSQL under ``DATABASE_URL``) and, on
PostgreSQL, ``postgres`` (``storage.PostgresStore``). Every test of the suite runs on each, so the stores
answer every member of ``ports.Store`` the same way. The harness reaches into a store only to move time
(``set_columns``: a lease or wake-up in the past) and to read columns the port does not expose.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

import pytest

from rivet_workflows.engine.model import ports
from rivet_workflows.testing import MemoryStore
from tests.conftest import is_postgres

HOUR = timedelta(hours=1)

_DB = pytest.mark.django_db(transaction=True)

#: the stores of the suite (``h``'s params); the Django stores get a transactional test database
STORES = [
    "memory",
    pytest.param("django", marks=_DB),
    *([pytest.param("postgres", marks=_DB)] if is_postgres() else []),
]
#: RIVET_SHARDED_PORT=1 adds the suite on a ``storage.sharded.ShardedStore`` over the test databases
#: ``default`` and ``shard1`` (DESIGN.md section 21): the same answers, routed (off by default: it doubles
#: the Django part of the suite)
#: what a sharded store does differently (DESIGN.md section 21), skipped on it: test name -> why
SHARDED_DIFFERENCES = {
    "test_a_claim_over_the_concurrency_limit_is_refused_until_a_slot_frees": "limits hold per shard",
    "test_a_full_group_does_not_hold_up_the_batch": "concurrency limits hold per shard",
    "test_concurrent_claims_never_pass_the_limit": "concurrency limits hold per shard",
    "test_a_rate_limit_counts_run_starts_in_the_window": "rate limits hold per shard",
    "test_outbox_messages_are_delivered_with_the_commit_and_wake_the_target": "a send to another shard is "
    "relayed (Commit.relay), not delivered with the commit",
    "test_a_failing_commit_writes_nothing": "an unknown outbox target on another shard goes to the relay",
}
if os.environ.get("RIVET_SHARDED_PORT"):
    _BOTH = pytest.mark.django_db(databases=["default", "shard1"], transaction=True)
    STORES.append(pytest.param("sharded-postgres" if is_postgres() else "sharded-django", marks=_BOTH))


class StoreHarness:
    """A store under test plus the few levers the tests need (see the module docstring)."""

    def __init__(self, kind: str, store: ports.Store) -> None:
        #: a sharded store answers as the stores it wraps: its kind is theirs (``sharded`` says it is one)
        self.sharded = kind.startswith("sharded-")
        self.kind = kind.removeprefix("sharded-")
        self.store = store
        #: True when ``wait_for_messages`` really waits (memory, PostgreSQL LISTEN/NOTIFY)
        self.warm_waits = self.kind in ("memory", "postgres")

    def __repr__(self) -> str:
        return f"<StoreHarness {self.kind}>"

    def new_actor(self, key: str = "k", *, state: Any = None, name: str = "order", due: bool = False) -> str:
        """Create the actor ``(name, [key])`` (input ``{"in": 1}``, state default ``{"count": 0}``); its id."""
        record, created = self.store.create_actor(
            name, [key], {"in": 1}, {"count": 0} if state is None else state, due=due
        )
        assert created
        return record.actor_id

    def sleep_on(
        self, actor_id: str, token: int, *, queues: tuple = (), until: datetime | None = None
    ) -> ports.CommitResult:
        """Commit the end of a run that sleeps until ``until`` (default: in an hour) waiting on ``queues``."""
        until = until or self.store.now() + HOUR
        commit = ports.Commit(
            workflow_state=ports.SLEEPING, wake_at=until, waiting_for=list(queues), release=True
        )
        return self.store.commit(actor_id, token, commit)

    def set_columns(self, actor_id: str, **columns: Any) -> None:
        """Overwrite raw actor columns (``lease_expires_at``, ``wake_at``...), as time passing would."""
        if isinstance(self.store, MemoryStore):
            with self.store._lock:
                for name, value in columns.items():
                    setattr(self.store._actors[actor_id], name, value)
            return
        from rivet_workflows import models

        models.Actor.objects.using(self._alias(actor_id)).filter(pk=actor_id).update(**columns)

    def column(self, actor_id: str, name: str) -> Any:
        """One raw actor column (e.g. ``step_lock_until``, which no record carries)."""
        if isinstance(self.store, MemoryStore):
            with self.store._lock:
                return getattr(self.store._actors[actor_id], name)
        from rivet_workflows import models

        return (
            models.Actor.objects.using(self._alias(actor_id))
            .filter(pk=actor_id)
            .values_list(name, flat=True)
            .get()
        )

    def expire_lease(self, actor_id: str) -> None:
        """Make the actor's lease expired (its holder died a second ago)."""
        self.set_columns(actor_id, lease_expires_at=self.store.now() - timedelta(seconds=1))

    def message_count(self) -> int:
        """Every stored queue message of every actor."""
        if isinstance(self.store, MemoryStore):
            with self.store._lock:
                return len(self.store._messages)
        from rivet_workflows import models

        aliases = self.store.shard_map.aliases if self.sharded else [self.store.using]
        return sum(models.QueueMessage.objects.using(alias).count() for alias in aliases)

    def _alias(self, actor_id: str) -> str:
        """The database alias holding ``actor_id`` (a Django store's own; a sharded store's shard)."""
        return self.store.alias_of(actor_id) if self.sharded else self.store.using


def entry(key: str, *, status: str = ports.ENTRY_COMPLETED, **data: Any) -> ports.EntryRecord:
    """A step history entry at location ``key`` (``a/b`` -> ``["a", "b"]``) with ``data``."""
    return ports.EntryRecord(key=key, location=key.split("/"), kind="step", data=data, status=status)
