"""The workflow context ``ctx``: every primitive keyed by its location (DESIGN.md section 2, ENGINE-SEMANTICS.md 2-6)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..model import errors
from ..model.attributes import check_attributes
from ..model.keys import normalize_key
from . import reentrancy
from .history import check_name, child_key
from .primitives import blocks, loops, steps, waits
from .primitives import branches as br
from .primitives.waits import WorkflowQueue
from .results import RaceResult, StepResult, TryResult
from .step_context import ActorIdentity
from .streams import WorkflowStream

if TYPE_CHECKING:
    from .session import RunSession

_MISSING: Any = object()


class WorkflowContext(ActorIdentity):
    """``ctx``: the handle a run function (and loop bodies, join/race branches) gets.

    Every primitive is keyed by its location: ``scope/name``. A primitive call registers itself at once
    (before it is awaited) so a second primitive started while one is un-awaited raises
    ``EntryInProgressError``, and a name used twice in one scope raises ``HistoryDivergedError``.
    Actor state, vars, client() and broadcast are reachable only inside steps (``StepOnlyError``).
    """

    def __init__(self, session: RunSession, scope: str = "") -> None:
        self._session = session
        self._scope = scope
        self._busy: str | None = None
        self._names: set[str] = set()
        #: True once a rollback_checkpoint ran in this scope or an enclosing one
        self._checkpoint = False
        self._attribute_calls = 0  # the n-th ctx.set_attributes of this scope is at ~attributes<n>
        self.queue = WorkflowQueue(self)
        #: writes per stream name started in this scope (``stream``: the keys of the writes)
        self._stream_writes: dict[str, int] = {}

    # --- identity ------------------------------------------------------------------------------------

    @property
    def workflow_id(self) -> str:
        """The workflow instance id (one workflow per actor: the actor id)."""
        return self._session.actor_id

    @property
    def input(self) -> Any:
        """The workflow input stored when the actor was created (the same on every run)."""
        return self._session.actor.input

    @property
    def location(self) -> str:
        """The key of this context's scope ("" for the root)."""
        return self._scope

    # --- step-only members ---------------------------------------------------------------------------

    def _step_only(self, what: str) -> Any:
        raise errors.StepOnlyError(
            f"ctx.{what} is only available inside a step: use `await ctx.step(name, lambda step: ...)` and "
            f"step.{what} there",
            member=what,
        )

    state = property(lambda self: self._step_only("state"), doc="Raises StepOnlyError.")
    vars = property(lambda self: self._step_only("vars"), doc="Raises StepOnlyError.")

    def client(self) -> Any:
        """Raises ``StepOnlyError``: use ``step.client()``."""
        return self._step_only("client()")

    def broadcast(self, *args: Any) -> Any:
        """Raises ``StepOnlyError``: use ``step.broadcast``."""
        return self._step_only("broadcast()")

    # --- bookkeeping ---------------------------------------------------------------------------------

    def _begin(self, name: Any, what: str, *, internal: bool = False) -> str:
        """Register the start of a primitive ``name``; returns its location key. ``internal``: a name the
        engine made (``set_attributes``), outside the names code may use, so it is not checked."""
        if reentrancy.in_step_of(self._session.actor_id):
            raise errors.StepNestingError(
                f"{what} {name!r} was called inside a step body: steps do not nest. Call workflow primitives "
                "from the workflow function, and use the body's `step` argument (state, vars, client) inside",
                name=str(name),
            )
        if self._busy is not None:
            raise errors.EntryInProgressError(
                f"cannot start {what} {name!r}: {self._busy} is still in progress on this context "
                "(missing await?)",
                name=str(name),
                running=self._busy,
            )
        if not internal:
            check_name(name, what)
        if name in self._names:
            raise errors.HistoryDivergedError(
                f"duplicate entry name {name!r} in scope {self._scope or '(root)'!r}: every {what} in one "
                "scope needs a unique name",
                location=child_key(self._scope, name),
            )
        self._names.add(name)
        self._busy = f"{what} {name!r}"
        return child_key(self._scope, name)

    async def _guard(self, make: Callable[[str], Coroutine[Any, Any, Any]], key: str) -> Any:
        try:
            return await make(key)
        finally:
            self._busy = None

    def _run(self, name: Any, what: str, make: Callable[[str], Coroutine[Any, Any, Any]]) -> Awaitable[Any]:
        key = self._begin(name, what)
        return self._guard(make, key)

    def end_scope(self) -> None:
        """The body of this scope returned: check that every primitive it started was awaited
        (``EntryInProgressError`` names the one that was not: a missing ``await`` would otherwise skip it
        silently) and that the code visited every history entry of the scope (``HistoryDivergedError``)."""
        if self._busy is not None:
            raise errors.EntryInProgressError(
                f"{self._busy} in scope {self._scope or '(root)'!r} was started but never awaited: "
                "add `await` (it did not run)",
                running=self._busy,
            )
        self._session.history.check_scope(self._scope)

    def child(self, scope: str) -> WorkflowContext:
        """A context for the nested scope ``scope`` (a loop iteration, a branch or a try block)."""
        child = WorkflowContext(self._session, scope)
        child._checkpoint = self._checkpoint
        return child

    # --- steps ---------------------------------------------------------------------------------------

    def step(
        self,
        name: Any = None,
        run: Callable[..., Any] | None = None,
        *,
        rollback: Callable[..., Any] | None = None,
        max_retries: int = 3,
        retry_backoff_base: float | timedelta = 0.1,
        retry_backoff_max: float | timedelta = 30.0,
        timeout: float | timedelta | None = steps.DEFAULT_TIMEOUT,
        retry_on_timeout: bool = False,
        ephemeral: bool = False,
        atomic: bool = False,
    ) -> Awaitable[Any]:
        """Run ``run(step)`` once, durably: ``await ctx.step("charge", fn)`` -> the body's return value.

        Durations in seconds or timedelta; ``timeout`` 0/None disables. The output goes through the one
        serializer (the workflow gets the round-tripped copy). Raises ``StepExhaustedError``,
        ``CriticalError`` (also for a timeout without ``retry_on_timeout``), ``RollbackError``,
        ``SerializationError``/``PayloadTooLargeError`` (ENGINE-SEMANTICS.md section 3).

        A sync body runs in a worker thread and may block. An ``async def`` body runs on the workflow's
        event loop and must not block it (no ``time.sleep``, blocking I/O or long CPU work: use
        ``await asyncio.sleep``, async clients, or a sync body): while it blocks, the step's ``timeout``
        cannot fire and other branches of a join/race cannot run. (The lease heartbeat runs in its own
        thread, so the lease is kept either way.) The body must not call its own actor through the client
        (an action, a waiting send, destroy): that raises ``ReentrantCallError`` at once; use
        ``step.state``, ``step.queue.send`` and ``step.destroy()``. The state the body leaves is checked
        like the output (``SerializationError``/``PayloadTooLargeError``: the step fails, not retried).

        ``atomic=True`` (DESIGN.md section 13): the sync body runs inside the database transaction that
        records the step's outcome, on the store's connection: its ORM writes (on the store's database
        alias), the state change, its ``step.queue.send`` messages and the history entry commit together
        or not at all, fenced by the lease. A failed attempt's writes, sends and state changes are rolled
        back; a crash before the commit leaves nothing and the body runs again; after the commit it never
        runs again. A write through another alias fails the step (``AtomicStepError``). An ``async`` body,
        a ``timeout``, ``retry_on_timeout`` or ``ephemeral`` with it raise ``TypeError`` here. The
        in-memory store runs it as a plain step (its ORM writes are not rolled back).
        """
        fn = run
        if fn is None or not callable(fn):
            raise TypeError(f"ctx.step({name!r}) needs a callable body: ctx.step(name, fn) or run=fn")
        options = steps.make_options(
            max_retries,
            retry_backoff_base,
            retry_backoff_max,
            timeout,
            retry_on_timeout,
            ephemeral,
            atomic,
            fn,
        )
        return self._run(name, "step", lambda key: steps.run_step(self, key, name, fn, options, rollback))

    def spawn(self, type: str, key: Any, input: Any = None, *, name: Any = None) -> Awaitable[Any]:
        """Get or create the actor ``key`` of type ``type`` (registered name) with ``input`` as a child of this
        one, and return its ``ActorHandle``: ``child = await ctx.spawn("worker", ["job", 7], {"n": 7})``
        (DESIGN.md section 20; docs/howto/flow-control.md).

        The creation is a step in the history (named ``name``, default ``"spawn <type> <key parts>"`` with
        ``/`` and ``:`` replaced): a replay returns the recorded child and creates nothing, and the child
        records this actor as its parent (``handle.children()``, ``cancel(children=True)``,
        ``parent_close``). Raises ``ActorNotFoundError`` for an unknown type, ``ValueError`` for a bad key
        or name, and what ``get_or_create`` raises (as a failed step).
        """
        runtime = self._session.runtime
        runtime.registry.get(type)  # an unknown type fails here, before anything is recorded
        key = normalize_key(key)
        entry = name if name is not None else _spawn_name(type, key)

        def create(step: Any) -> str:
            return step.client()[type].get_or_create(key, input).actor_id

        async def spawned() -> Any:
            actor_id = await self.step(entry, create)
            return await runtime.call(lambda: runtime.client()[type].get_for_id(actor_id))

        return spawned()

    def try_step(
        self,
        name: Any = None,
        run: Callable[..., Any] | None = None,
        *,
        catch: tuple[str, ...] | list[str] = (),
        **options: Any,
    ) -> Awaitable[StepResult]:
        """Like ``step`` but returns ``StepResult``: failures of kinds critical, timeout and exhausted (plus
        those named in ``catch``, e.g. ``("rollback",)``) become ``ok=False`` with a ``failure`` dict."""
        fn = run
        if fn is None or not callable(fn):
            raise TypeError(f"ctx.try_step({name!r}) needs a callable body")
        rollback = options.pop("rollback", None)
        opts = steps.make_options(
            options.pop("max_retries", 3),
            options.pop("retry_backoff_base", 0.1),
            options.pop("retry_backoff_max", 30.0),
            options.pop("timeout", steps.DEFAULT_TIMEOUT),
            options.pop("retry_on_timeout", False),
            options.pop("ephemeral", False),
            options.pop("atomic", False),
            fn,
        )
        if options:
            raise TypeError(f"unexpected try_step option(s): {sorted(options)}")
        return self._run(
            name, "step", lambda key: steps.try_step(self, key, name, fn, opts, rollback, tuple(catch))
        )

    def try_(
        self, name: Any, run: Callable[..., Any], *, catch: tuple[str, ...] | list[str] = ()
    ) -> Awaitable[TryResult]:
        """Run the block ``run(block_ctx)`` at ``name/...``; returns ``TryResult(ok, value)`` or, for a caught
        failure, ``TryResult(ok=False, failure={source: step|join|race|block, name, error, step?})``.

        Caught by default: step, join and race failures; ``catch=("rollback",)`` adds rollback failures
        (ENGINE-SEMANTICS.md section 3, Rivet's ``ctx.try``)."""
        if not callable(run):
            raise TypeError(f"ctx.try_({name!r}) needs a callable block")
        return self._run(name, "try block", lambda key: blocks.run_try(self, key, name, run, tuple(catch)))

    def removed(self, name: Any, original_type: str) -> Awaitable[None]:
        """Declare that the entry ``name`` of kind ``original_type`` (step, loop, sleep, message, join, race,
        rollback_checkpoint, version_check, try) was removed from the code, so in-flight histories that
        recorded it still replay (ENGINE-SEMANTICS.md section 2). Another recorded kind diverges."""
        if original_type not in blocks.REMOVABLE:
            raise ValueError(
                f"original_type must be one of {sorted(blocks.REMOVABLE)}, got {original_type!r}"
            )
        return self._run(name, "removed", lambda key: blocks.run_removed(self, key, name, original_type))

    def get_version(self, name: Any, latest: int) -> Awaitable[int]:
        """The version of the gate ``name``: recorded value on replay; 1 when this scope already ran under
        code without the gate; else ``latest`` (an int >= 1). Retire with ``removed(name, "version_check")``."""
        if not isinstance(latest, int) or isinstance(latest, bool) or latest < 1:
            raise ValueError(f"latest must be an int >= 1, got {latest!r}")
        return self._run(name, "version gate", lambda key: blocks.run_get_version(self, key, name, latest))

    def set_attributes(self, attributes: dict[str, Any]) -> Awaitable[None]:
        """Merge ``attributes`` (a dict of str -> JSON scalar: str, int, float, bool, None) into the actor's
        search attributes, which ``client().list_actors(attributes=...)`` and bulk actions filter on
        (DESIGN.md section 19); later calls merge (a key set again takes the new value).

        Recorded in the history (an ``attributes`` entry, the n-th call of this scope at ``~attributes<n>``)
        and written with the run's next commit; a replay that records the same values writes nothing, one
        that passes other values (the code changed) records and merges those. Removing a call from the code
        never makes a history diverge. Raises ``InvalidAttributesError`` at once for another value."""
        values = check_attributes(attributes)
        self._attribute_calls += 1
        name = f"~attributes{self._attribute_calls}"
        key = self._begin(name, "set_attributes", internal=True)
        return self._guard(lambda key: blocks.run_set_attributes(self, key, name, values), key)

    def rollback_checkpoint(self, name: Any) -> Awaitable[None]:
        """Enable ``rollback=`` handlers on later steps of this scope (ENGINE-SEMANTICS.md section 7)."""
        return self._run(name, "rollback checkpoint", lambda key: blocks.run_checkpoint(self, key, name))

    def stream(self, name: str) -> WorkflowStream:
        """The actor's durable stream ``name`` (DESIGN.md section 17): ``await ctx.stream(name).write(value)``
        appends a value (returns its offset) and ``await ctx.stream(name).close()`` closes it, each recorded
        in the history: exactly once, a replay writes nothing again. ``ValueError`` for a bad name."""
        return WorkflowStream(self, name)

    # --- loops ---------------------------------------------------------------------------------------

    def loop(
        self,
        name: Any = None,
        run: Callable[..., Any] | None = None,
        *,
        state: Any = _MISSING,
        history_prune_interval: int = 20,
        history_size: int | None = None,
    ) -> Awaitable[Any]:
        """Run ``run(loop_ctx)`` (stateless) or ``run(loop_ctx, state)`` (when ``state=`` is given) until
        it returns ``Loop.break_(value)``; returns ``value`` (ENGINE-SEMANTICS.md section 4)."""
        if run is None or not callable(run):
            raise TypeError(f"ctx.loop({name!r}) needs a callable body")
        if not isinstance(history_prune_interval, int) or history_prune_interval < 1:
            raise ValueError("history_prune_interval must be an int >= 1")
        if history_size is not None and (not isinstance(history_size, int) or history_size < 0):
            raise ValueError("history_size must be an int >= 0")
        stateful = state is not _MISSING
        return self._run(
            name,
            "loop",
            lambda key: loops.run_loop(
                self,
                key,
                name,
                run,
                state if stateful else None,
                stateful,
                history_prune_interval,
                history_size,
            ),
        )

    # --- sleeps --------------------------------------------------------------------------------------

    def sleep(self, name: Any, duration: float | timedelta) -> Awaitable[None]:
        """Sleep ``duration`` (seconds or timedelta) durably; the deadline (now + ``duration``) is fixed at
        first execution and replays as recorded (ENGINE-SEMANTICS.md section 5). Zero or a negative duration
        is a deadline already passed: recorded, and the sleep completes at once. Raises ``TypeError`` for
        another type and ``CriticalError`` (the workflow fails, naming the sleep) for NaN or an infinity."""
        seconds = waits.sleep_offset(name, duration)
        return self._run(name, "sleep", lambda key: waits.run_sleep(self, key, name, seconds=seconds))

    def sleep_until(self, name: Any, when: datetime) -> Awaitable[None]:
        """Sleep until the aware datetime ``when`` (naive means UTC); a past instant completes at once."""
        if not isinstance(when, datetime):
            raise TypeError(f"sleep_until needs a datetime, got {type(when).__name__}")
        return self._run(name, "sleep", lambda key: waits.run_sleep(self, key, name, until=when))

    # --- join and race -------------------------------------------------------------------------------

    def join(self, name: Any, branches: dict[str, Any]) -> Awaitable[dict]:
        """Run every branch ``fn(branch_ctx)`` concurrently at ``name/branch``; returns ``{branch: value}``.
        Failures are collected into ``JoinError(errors={branch: error})`` (ENGINE-SEMANTICS.md section 6)."""
        spec = br.normalize_join(branches)
        return self._run(name, "join", lambda key: br.run_join(self, key, name, spec))

    def race(self, name: Any, branches: Any) -> Awaitable[RaceResult]:
        """Run branches concurrently; the first to finish wins, the others are cancelled and their history
        deleted. ``branches`` is ``[("a", fn), ...]`` or ``[{"name": "a", "run": fn}, ...]``. Returns
        ``RaceResult(winner, value)``; raises ``RaceError`` when every branch fails."""
        spec = br.normalize_race(branches)
        return self._run(name, "race", lambda key: br.run_race(self, key, name, spec))

    def __repr__(self) -> str:
        return f"<WorkflowContext actor={self.actor_id} scope={self._scope!r}>"


def _spawn_name(type: str, key: list) -> str:
    """The default history name of ``ctx.spawn(type, key)``: ``"spawn <type> <key parts>"``, the characters
    an entry name may not hold (``/``, ``:``, a leading ``~``) replaced by ``_``."""
    text = f"spawn {type} " + " ".join(str(part) for part in key)
    return text.replace("/", "_").replace(":", "_")
