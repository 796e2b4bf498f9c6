"""Dry-run replay: check in-flight histories against the current code with no step executed (``rivet check``).

The replay runs the workflow function on a ``RunSession`` whose store is read-only: it may read the actor,
its history and its messages, but the first write (recording a step attempt, a new entry, a receipt, a
release) stops the replay, and so does any attempt to run a step body (``body_will_run`` is the hook).
``on_wake``/``on_error``/rollback handlers never run. What is left to observe is exactly what a deploy
needs: does the recorded history still match the code up to the point where new work would start?
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync

from ..model import base_store, errors, observe, ports, serde
from ..run.context import WorkflowContext
from ..run.history import ROOT, History
from ..run.session import RunSession, maybe_await

if TYPE_CHECKING:
    from ..model.roles import RuntimeRole

#: outcomes of a dry-run replay
OK = "ok"  # the history matches the code up to new work (or a wait, or the end)
DIVERGED = "diverged"  # HistoryDivergedError: ``location`` says where
ERROR = "error"  # the replay raised something else (``message`` says what)
REFUSED = "refused"  # recover would be refused before any replay (``repairs.refusal``: rolled back, ...)


class ReadOnlyStore(base_store.BaseStore):
    """A ``ports.Store`` on another store for a dry run: the reads go to ``store``, every write (and the warm
    wait, which holds a lease) raises ``DryRunStop``, so a replay on it changes nothing."""

    #: as the replay always ran: store calls take the runtime's thread hop and the clock is anchored
    inline_calls = False

    def __init__(self, store: ports.Store) -> None:
        self._store = store

    @staticmethod
    def _refuse(what: str) -> Any:
        raise errors.DryRunStop(f"dry run: {what} not allowed")

    # --- reads ---------------------------------------------------------------------------------------

    def now(self) -> datetime:
        return self._store.now()

    def get_actor(self, actor_id: str) -> ports.ActorRecord:
        return self._store.get_actor(actor_id)

    def find_actor(self, name: str, key: list) -> ports.ActorRecord | None:
        return self._store.find_actor(name, key)

    def list_actors(self, name: str | None = None, *, limit: int | None = None) -> list[ports.ActorRecord]:
        return self._store.list_actors(name, limit=limit)

    def actor_counts(self) -> observe.ActorCounts:
        return self._store.actor_counts()

    def list_children(self, actor_id: str) -> list[ports.ActorRecord]:
        return self._store.list_children(actor_id)

    def find_actors(
        self,
        query: ports.ActorFilter,
        *,
        limit: int = 100,
        after: tuple[datetime, str] | None = None,
        newest_first: bool = False,
        offset: int = 0,
    ) -> list[ports.ActorRecord]:
        return self._store.find_actors(
            query, limit=limit, after=after, newest_first=newest_first, offset=offset
        )

    def count_actors(self, query: ports.ActorFilter) -> int:
        return self._store.count_actors(query)

    def suspended_by_other_version(self, code_version: str, limit: int) -> list[str]:
        return self._store.suspended_by_other_version(code_version, limit)

    def load_history(self, actor_id: str) -> list[ports.EntryRecord]:
        return self._store.load_history(actor_id)

    def load_for_run(self, actor_id: str) -> tuple[ports.ActorRecord, list[ports.EntryRecord], datetime]:
        return self._store.load_for_run(actor_id)

    def next_deadline(self) -> datetime | None:
        return self._store.next_deadline()

    def pending_messages(
        self, actor_id: str, names: list[str] | None, limit: int
    ) -> list[ports.MessageRecord]:
        return self._store.pending_messages(actor_id, names, limit)

    def get_message(self, message_id: str) -> ports.MessageRecord:
        return self._store.get_message(message_id)

    def cron_list(self, actor_id: str | None = None) -> list[ports.CronRecord]:
        return self._store.cron_list(actor_id)

    def cron_due(self, limit: int) -> list[ports.CronRecord]:
        return self._store.cron_due(limit)

    def cron_fires(self, cron_id: str) -> list[ports.CronFireRecord]:
        return self._store.cron_fires(cron_id)

    def cron_next_deadline(self) -> datetime | None:
        return self._store.cron_next_deadline()

    def schedule_get(self, schedule_id: str) -> ports.ScheduleRecord | None:
        return self._store.schedule_get(schedule_id)

    def schedule_list(self) -> list[ports.ScheduleRecord]:
        return self._store.schedule_list()

    def schedule_due(self, limit: int) -> list[ports.ScheduleRecord]:
        return self._store.schedule_due(limit)

    def schedule_fires(self, schedule_id: str, limit: int | None = None) -> list[ports.ScheduleFireRecord]:
        return self._store.schedule_fires(schedule_id, limit)

    def schedule_next_deadline(self) -> datetime | None:
        return self._store.schedule_next_deadline()

    def schedule_stale_fires(self, before: datetime, limit: int) -> list[ports.ScheduleFireRecord]:
        return self._store.schedule_stale_fires(before, limit)

    def operator_actions(
        self, actor_id: str, *, limit: int | None = None
    ) -> list[ports.OperatorActionRecord]:
        return self._store.operator_actions(actor_id, limit=limit)

    def close_thread_connection(self) -> None:
        self._store.close_thread_connection()

    def stream_read(
        self, actor_id: str, name: str, offset: int, limit: int, *, include_discarded: bool = False
    ) -> ports.StreamPage:
        return self._store.stream_read(actor_id, name, offset, limit, include_discarded=include_discarded)

    def stream_names(self, actor_id: str) -> list[str]:
        return self._store.stream_names(actor_id)

    def stream_tail(self, actor_id: str, name: str, count: int) -> ports.StreamPage:
        return self._store.stream_tail(actor_id, name, count)

    # --- writes: refused -----------------------------------------------------------------------------

    def schedule_create(self, record: ports.ScheduleRecord) -> ports.ScheduleRecord:
        return self._refuse("schedule_create")

    def schedule_set_paused(
        self, schedule_id: str, paused: bool, next_fire_at: datetime | None
    ) -> ports.ScheduleRecord | None:
        return self._refuse("schedule_set_paused")

    def schedule_delete(self, schedule_id: str) -> bool:
        return self._refuse("schedule_delete")

    def schedule_advance(self, schedule_id: str, expected: datetime, next_fire_at: datetime | None) -> bool:
        return self._refuse("schedule_advance")

    def schedule_claim_tick(self, fire: ports.ScheduleFireRecord) -> bool:
        return self._refuse("schedule_claim_tick")

    def schedule_retake_fire(
        self, schedule_id: str, tick: datetime, expected_fired_at: datetime, fired_at: datetime
    ) -> bool:
        return self._refuse("schedule_retake_fire")

    def schedule_fire_done(
        self, schedule_id: str, tick: datetime, status: str, actor_id: str | None, error: dict | None
    ) -> None:
        return self._refuse("schedule_fire_done")

    def get_or_create_actor(
        self,
        name: str,
        key: list,
        input: Any,
        create_state: Callable[[], Any],
        *,
        due: bool = False,
        trace_context: dict | None = None,
        flow: Callable[[Any], ports.Flow | None] | None = None,
        parent_id: str | None = None,
        start_after: float | None = None,
    ) -> tuple[ports.ActorRecord, bool]:
        return self._refuse("get_or_create_actor")

    def defer_start(
        self, actor_id: str, input: Any, state: Any, delay: float, max_delay: float | None
    ) -> ports.ActorRecord | None:
        return self._refuse("defer_start")

    def create_actor(
        self,
        name: str,
        key: list,
        input: Any,
        state: Any,
        *,
        due: bool = False,
        trace_context: dict | None = None,
        flow: ports.Flow | None = None,
        parent_id: str | None = None,
        start_after: float | None = None,
    ) -> tuple[ports.ActorRecord, bool]:
        return self._refuse("create_actor")

    def fork_actor(self, source_id: str, *args: Any, **kwargs: Any) -> ports.ActorRecord:
        return self._refuse("fork_actor")

    def flow_retry_at(self, actor_id: str) -> datetime | None:
        return self._store.flow_retry_at(actor_id)

    def set_paused(
        self,
        actor_id: str,
        paused: bool,
        reason: str | None = None,
        *,
        audit: ports.OperatorActionRecord | None = None,
    ) -> bool:
        return self._refuse("set_paused")

    def destroy_actor(self, actor_id: str) -> None:
        self._refuse("destroy_actor")

    def claim(self, actor_id: str, owner: str, lease_seconds: float) -> int | None:
        return self._refuse("claim")

    def claim_for_operator(self, actor_id: str, owner: str, lease_seconds: float) -> int | None:
        return self._refuse("claim_for_operator")

    def claim_and_load(
        self, actor_id: str, owner: str, lease_seconds: float
    ) -> tuple[int, ports.ActorRecord, list[ports.EntryRecord], datetime] | None:
        return self._refuse("claim_and_load")

    def claim_due(
        self, owner: str, limit: int, lease_seconds: float, *, expired_only: bool = False
    ) -> list[tuple[str, int]]:
        return self._refuse("claim_due")

    def renew(self, actor_id: str, token: int, lease_seconds: float) -> bool:
        return self._refuse("renew")

    def handoff(self, actor_id: str, token: int, owner: str, lease_seconds: float) -> int | None:
        return self._refuse("handoff")

    def release(self, actor_id: str, token: int) -> ports.CommitResult:
        return self._refuse("release")

    def commit(self, actor_id: str, token: int, commit: ports.Commit) -> ports.CommitResult:
        return self._refuse("commit")

    def run_in_commit(
        self, actor_id: str, token: int, body: Callable[[], ports.Commit]
    ) -> ports.CommitResult:
        return self._refuse("run_in_commit")

    def send(
        self,
        actor_id: str,
        name: str,
        body: Any,
        completable: bool = False,
        *,
        trace_context: dict | None = None,
        dedup_id: str | None = None,
    ) -> ports.MessageRecord:
        return self._refuse("send")

    def send_and_check(
        self,
        actor_id: str,
        name: str,
        body: Any,
        completable: bool = False,
        *,
        trace_context: dict | None = None,
        dedup_id: str | None = None,
    ) -> tuple[ports.MessageRecord, bool | None]:
        return self._refuse("send_and_check")

    def complete_message(self, message_id: str, response: Any) -> None:
        self._refuse("complete_message")

    def wait_for_messages(self, actor_id: str, names: list[str], timeout: float) -> bool:
        return self._refuse("wait_for_messages")

    # --- the relay (DESIGN.md section 21): its rows are read through; a dry run relays nothing ------------

    def same_shard(self, a_id: str, b_id: str) -> bool:
        return self._store.same_shard(a_id, b_id)

    def actor_id_for_key(self, name: str, key: list) -> str | None:
        return self._store.actor_id_for_key(name, key)

    def relay_pending(self, limit: int, *, after: int = 0) -> list[ports.RelayRecord]:
        return self._store.relay_pending(limit, after=after)

    def relay_sources(self) -> dict[str, ports.Store]:
        return self._refuse("relay_sources")

    def relay_mark_delivered(self, ids: list[int]) -> None:
        self._refuse("relay_mark_delivered")

    def relay_mark_failed(self, id: int, error: str, permanent: bool) -> None:
        self._refuse("relay_mark_failed")

    def watch_sends(self, actor_id: str) -> Any:
        return self._refuse("watch_sends")

    def wait_for_wakes(self, timeout: float) -> list[str]:
        return self._refuse("wait_for_wakes")

    def run_action(
        self, actor_id: str, fn: Callable[[Any], Any], timeout: float, *, make_due: bool = False
    ) -> tuple[Any, Any]:
        return self._refuse("run_action")

    def cron_upsert(self, record: ports.CronRecord) -> ports.CronRecord:
        return self._refuse("cron_upsert")

    def cron_delete(self, actor_id: str, name: str) -> bool:
        return self._refuse("cron_delete")

    def cron_advance(self, cron_id: str, expected: datetime, next_fire_at: datetime | None) -> bool:
        return self._refuse("cron_advance")

    def cron_record_fire(self, cron_id: str, fire: ports.CronFireRecord, max_history: int) -> None:
        self._refuse("cron_record_fire")

    def record_operator_action(self, action: ports.OperatorActionRecord) -> ports.OperatorActionRecord:
        return self._refuse("record_operator_action")

    def stream_write(
        self,
        actor_id: str,
        name: str,
        value: Any,
        *,
        attempt: int | None = None,
        step_key: str | None = None,
        write_key: str | None = None,
    ) -> ports.StreamItem:
        return self._refuse("stream_write")

    def stream_close(self, actor_id: str, name: str) -> bool:
        return self._refuse("stream_close")

    def stream_close_all(self, actor_id: str) -> list[str]:
        return self._refuse("stream_close_all")

    def stream_discard(self, actor_id: str, step_key: str, before_attempt: int) -> int:
        return self._refuse("stream_discard")

    def watch_stream(self, actor_id: str) -> Any:
        return self._refuse("watch_stream")


class _DrySession(RunSession):
    """A RunSession that never runs a step body, never fires on_error and never commits."""

    def body_will_run(self) -> None:
        raise errors.DryRunStop("dry run: a step body would run")

    async def fire_error(self, event: dict) -> None:
        raise errors.DryRunStop("dry run: on_error would fire")

    async def flush(self, **fields: Any) -> ports.CommitResult:
        raise errors.DryRunStop("dry run: a commit would be written")

    async def commit_in_transaction(self, body: Callable[[ports.Commit], None]) -> ports.CommitResult:
        raise errors.DryRunStop("dry run: an atomic step would run")


@dataclass
class CheckResult:
    """The dry-run outcome of one actor: ``outcome`` (ok | diverged | error | refused), ``location`` (the
    recorded history key where it diverged, or None), ``reached`` (the key of the new entry the code reached
    there, or None), ``message`` (what diverged and how to fix it, or why recover is refused), ``error``
    (for the error outcome: the exception the replay raised, as ``serde.error_to_dict`` describes it, so a
    caller can tell the workflow's own recorded failure replayed from a new one) and, for a refused
    recover, ``code`` (the refusal's error code: ``rolled_back``, ...) and ``replay_from`` (for a
    rolled-back run: the step to replay from instead)."""

    actor_id: str
    name: str
    key: list
    workflow_state: str
    outcome: str
    location: str | None = None
    message: str = ""
    reached: str | None = None
    error: dict | None = None
    code: str | None = None
    replay_from: str | None = None
    #: diverged on entries written by this other code version (a worker of it can run the run); None: own
    other_version: str | None = None
    #: the code version the run waits for (a worker of another version left it), None: not waiting
    awaiting_code_version: str | None = None
    #: the stored error of a suspended run (the code error that suspended it), None otherwise
    suspension: dict | None = None


@dataclass(frozen=True)
class ReplayReport:
    """The outcome of ``replay_history``: did the current code replay the saved history?

    * ``ok``: True when the code replays every recorded entry up to where new work would start (a wait,
      the next step, the end), or reproduces the workflow's recorded failure.
    * ``diverged_at``: the recorded location key where the code went another way (a renamed, dropped
      or reordered entry), None unless it diverged.
    * ``reached``: the key of the entry the code reached there instead, when the engine knows it (None
      otherwise, e.g. when a recorded entry was simply no longer reached by the end of its scope).
    * ``error``: what went wrong as a message (the divergence with its fix, the exception the replay
      raised, or a store that did not give the history back as written); None when ``ok``.
    """

    ok: bool
    diverged_at: str | None = None
    reached: str | None = None
    error: str | None = None


async def _replay(session: _DrySession) -> None:
    ctx = WorkflowContext(session, ROOT)
    await maybe_await(session.definition.run.fn(ctx))  # type: ignore[union-attr]
    ctx.end_scope()


def check_actor(
    runtime: RuntimeRole,
    actor: ports.ActorRecord,
    entries: list[ports.EntryRecord] | None = None,
    *,
    as_state: str | None = None,
) -> CheckResult:
    """Replay ``actor``'s history against the registered code without side effects; return a CheckResult.

    ``entries`` replaces the stored history (the history as a replay or recover would leave it: the
    inspector checks that before it changes anything); ``as_state`` replays as if the workflow were in
    that state (e.g. ``sleeping`` for a failed run about to be recovered), with no output or error.
    Raises ``ActorNotFoundError`` for an actor type that is no longer registered.
    """
    definition = runtime.registry.get(actor.name)
    result = CheckResult(actor.actor_id, actor.name, list(actor.key), actor.workflow_state, OK)
    result.awaiting_code_version = actor.awaiting_code_version
    result.suspension = actor.error if actor.workflow_state == ports.SUSPENDED else None
    if definition.run is None:
        return result
    dry = copy.copy(runtime)  # no __init__: the registry stays bound to the real runtime
    dry.store = ReadOnlyStore(runtime.store)
    dry.vars = {}
    if entries is None:
        entries = runtime.store.load_history(actor.actor_id)
    history = History(copy.deepcopy(list(entries)))  # the replay marks entries; the caller keeps its own
    if as_state is not None:
        actor = dataclasses.replace(actor, workflow_state=as_state, output=None, error=None)
    session = _DrySession(dry, actor, definition, actor.lease_token, history, live_until=None)
    # New work stops at its first write, after the scope check, so a renamed step is reported as diverged.
    try:
        async_to_sync(_replay)(session)
    except errors.HistoryDivergedError as exc:
        result.outcome, result.message = DIVERGED, str(exc)
        result.location = exc.location or _location_of(exc)
        result.reached = exc.reached
        other, version = history.other_version(result.location, runtime.settings.code_version)
        result.other_version = version if other else None
    except (errors.DryRunStop, errors.WaitSignal, errors.RollbackStop):
        pass
    except errors.WorkflowSignal:
        pass
    except Exception as exc:  # the workflow's own failure replayed, or a bug: report, do not hide
        if isinstance(exc, errors.RivetWorkflowsError) and getattr(exc, "_rivet_reported", False):
            return result  # a recorded step failure replayed: not a divergence
        result.outcome, result.message = ERROR, f"{type(exc).__name__}: {exc}"
        result.error = serde.error_to_dict(exc)
    return result


def _location_of(exc: BaseException) -> str | None:
    metadata = getattr(exc, "metadata", None)
    if isinstance(metadata, dict):
        return metadata.get("location")
    return None


def check_all(runtime: RuntimeRole, actors: list[ports.ActorRecord]) -> list[CheckResult]:
    """``check_actor`` for each in-flight actor of ``actors`` (finished and run-less ones are skipped; an
    actor whose type is not registered gets an ``error`` result). Failed workflows as ``recover`` would
    restart them: ``repairs.check_recover``."""
    results = []
    for actor in actors:
        if actor.workflow_state in ports.FINISHED_STATES:
            continue
        try:
            definition = runtime.registry.get(actor.name)
        except errors.ActorNotFoundError as exc:
            results.append(
                CheckResult(
                    actor.actor_id, actor.name, list(actor.key), actor.workflow_state, ERROR, None, str(exc)
                )
            )
            continue
        if definition.run is None:
            continue
        results.append(check_actor(runtime, actor))
    return results
