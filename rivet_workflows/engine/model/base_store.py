"""The portable defaults of the storage port: ``BaseStore``, the class every store subclasses.

``ports.Store`` declares what a store does (the contract, DESIGN.md section 11); this module gives each
member that can be written over the others once, portably, so a store implements only its abstract members
and overrides a default where it can do the same faster or atomically (DESIGN.md section 15).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from . import observe, watches
from .errors import ActorNotFoundError
from .ports import (
    FINISHED_STATES,
    SUSPENDED,
    ActorFilter,
    ActorRecord,
    Commit,
    CommitResult,
    EntryRecord,
    Flow,
    MessageRecord,
    Store,
    StreamPage,
)


class BaseStore(Store):
    """The portable defaults of ``Store``: implementations subclass this and implement the abstract
    members (and override a default where they can do it faster or atomically)."""

    inline_calls = False
    notifies_wakes = False

    def get_or_create_actor(
        self,
        name: str,
        key: list,
        input: Any,
        create_state: Callable[[], Any],
        *,
        due: bool = False,
        trace_context: dict | None = None,
        flow: Callable[[Any], Flow | None] | None = None,
        parent_id: str | None = None,
        start_after: float | None = None,
    ) -> tuple[ActorRecord, bool]:
        existing = self.find_actor(name, key)
        if existing is not None:
            return existing, False
        state = create_state()
        return self.create_actor(
            name,
            key,
            input,
            state,
            due=due,
            trace_context=trace_context,
            flow=None if flow is None else flow(state),
            parent_id=parent_id,
            start_after=start_after,
        )

    def suspended_by_other_version(self, code_version: str, limit: int) -> list[str]:
        found = [
            a for a in self.list_actors() if a.workflow_state == SUSPENDED and a.code_version != code_version
        ]
        return [a.actor_id for a in sorted(found, key=lambda a: a.updated_at or a.created_at)[:limit]]

    def actor_counts(self) -> observe.ActorCounts:
        return observe.count_actors(self.list_actors(), self.now(), FINISHED_STATES)

    def find_actors(
        self,
        query: ActorFilter,
        *,
        limit: int = 100,
        after: tuple[datetime, str] | None = None,
        newest_first: bool = False,
        offset: int = 0,
    ) -> list[ActorRecord]:
        found = sorted(
            (a for a in self.list_actors(query.name) if query.matches(a)),
            key=lambda a: (a.created_at, a.actor_id),
            reverse=newest_first,
        )
        if after is not None:
            found = [
                a
                for a in found
                if (
                    (a.created_at, a.actor_id) < after if newest_first else (a.created_at, a.actor_id) > after
                )
            ]
        return found[offset : offset + limit]

    def count_actors(self, query: ActorFilter) -> int:
        return sum(1 for a in self.list_actors(query.name) if query.matches(a))

    def claim_and_load(
        self, actor_id: str, owner: str, lease_seconds: float
    ) -> tuple[int, ActorRecord, list[EntryRecord], datetime] | None:
        token = self.claim(actor_id, owner, lease_seconds)
        if token is None:
            return None
        try:
            actor, history, now = self.load_for_run(actor_id)
        except ActorNotFoundError:
            return None
        return token, actor, history, now

    def load_for_run(self, actor_id: str) -> tuple[ActorRecord, list[EntryRecord], datetime]:
        actor = self.get_actor(actor_id)
        return actor, self.load_history(actor_id), self.now()

    def release(self, actor_id: str, token: int) -> CommitResult:
        return self.commit(actor_id, token, Commit(release=True))

    def run_in_commit(self, actor_id: str, token: int, body: Callable[[], Commit]) -> CommitResult:
        return self.commit(actor_id, token, body())

    def send_and_check(
        self,
        actor_id: str,
        name: str,
        body: Any,
        completable: bool = False,
        *,
        trace_context: dict | None = None,
        dedup_id: str | None = None,
    ) -> tuple[MessageRecord, bool | None]:
        message = self.send(actor_id, name, body, completable, trace_context=trace_context, dedup_id=dedup_id)
        return message, None

    def wait_for_messages(self, actor_id: str, names: list[str], timeout: float) -> bool:
        return False

    def watch_sends(self, actor_id: str) -> watches.SendWatch:
        return watches.SendWatch()

    def release_connection(self) -> None:
        return None

    def relay_sources(self) -> dict[str, Store]:
        return {"default": self}

    def stream_tail(self, actor_id: str, name: str, count: int) -> StreamPage:
        offset = 0
        while True:  # the length: walk the pages (a store overrides this with one query)
            page = self.stream_read(actor_id, name, offset, 1000, include_discarded=True)
            if not page.items:
                break
            offset = page.next_offset
        return self.stream_read(actor_id, name, max(0, offset - count), count, include_discarded=True)

    def watch_stream(self, actor_id: str) -> watches.SendWatch:
        return watches.SendWatch()

    def close_thread_connection(self) -> None:
        return None

    def same_shard(self, a_id: str, b_id: str) -> bool:
        """Whether the actors ``a_id`` and ``b_id`` live in the same database: always True for a store of one
        database (``storage.sharded.ShardedStore`` answers from its shard map; DESIGN.md section 21)."""
        return True

    def actor_id_for_key(self, name: str, key: list) -> str | None:
        """None: a store of one database gives its actors fresh uuid4 ids (``ports.Store.actor_id_for_key``)."""
        return None
