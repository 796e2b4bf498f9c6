"""The engine's typed settings and the one duration rule (DESIGN.md section 10)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from .errors import WorkflowFailure


def _as_seconds(value: float | int | timedelta) -> float:
    """Seconds (int/float) or a ``timedelta`` as float seconds; ``TypeError`` for another type."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"a duration must be seconds or a timedelta, got {type(value).__name__}")


def to_seconds(value: float | int | timedelta | None) -> float | None:
    """A duration given as seconds (int/float) or ``timedelta``, as float seconds; None stays None.

    Raises ``TypeError`` for another type and ``ValueError`` for a negative or non-finite duration.
    """
    if value is None:
        return None
    seconds = _as_seconds(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"a duration must be a finite number of seconds >= 0, got {value!r}")
    return seconds


def to_offset(value: float | int | timedelta) -> float:
    """A time offset from now given as seconds (int/float) or ``timedelta``, as float seconds.

    Zero or negative is allowed: a deadline already passed (ENGINE-SEMANTICS.md section 5, ``sleep(name,
    s)`` is ``sleep_until(name, now + s)``). Raises ``TypeError`` for another type and ``ValueError`` for
    NaN, an infinity, or an offset no date can hold (beyond ``timedelta.max``).
    """
    seconds = _as_seconds(value)
    if not math.isfinite(seconds):
        raise ValueError(f"a duration must be a finite number of seconds, got {value!r}")
    if abs(seconds) > _MAX_OFFSET_SECONDS:
        raise ValueError(
            f"a duration must be at most {_MAX_OFFSET_SECONDS:g} seconds either way, got {value!r}"
        )
    return seconds


#: the largest offset a ``timedelta`` holds (about 2.7 million years): beyond it no deadline is computable
_MAX_OFFSET_SECONDS = timedelta.max.total_seconds()


@dataclass
class Settings:
    """Engine settings (DESIGN.md section 10); durations in seconds.

    * ``lease_seconds``: how long a claim holds an actor before another executor may take over.
    * ``sweep_interval``: how often the periodic sweep looks for due actors.
    * ``max_payload_bytes``: cap on one serialized value (``PayloadTooLargeError`` above it).
    * ``max_key_bytes``: cap on an actor key's serialized size (``PayloadTooLargeError`` above it): keys
      are indexed, and PostgreSQL refuses an index row over about 2.7 kB.
    * ``live_wait_threshold``: waits whose remaining time is below this are done in memory.
    * ``warm_wait``: how long a run given a warm-wait budget (``executor.run_actor(warm_wait=...)``, the
      Celery task) listens for a message at a queue wait before it releases the actor (store support:
      ``Store.wait_for_messages``).
    * ``action_timeout``: how long an action waits for a running step to release the step lock.
    * ``poll_interval``: polling period of waits on the store (step lock; ``send(wait=True)`` starts at it
      and backs off to ``client.MAX_SEND_POLL_SECONDS`` on a store that cannot notify senders).
    * ``max_waiting_sends``: how many ``send(wait=True)`` calls of this process may wait at once; one more
      raises ``TooManyWaitingSendsError`` before it touches the store (``sending.waiting_send_slot``).
    * ``step_abandon_seconds``: how long after a step's timeout its cancelled body may take to return
      before the attempt is abandoned (logged) and a retry may run beside it.
    * ``dev_mode``: relaxes inspector authorization.
    * ``code_version``: the name of the code this process runs (a release, a git sha; None: unversioned).
      Every write of a run records it; a replay that diverges on entries another code version wrote leaves
      the run, unchanged, for a process of that version (DESIGN.md section 12, rolling deploys). None:
      every divergence fails the workflow.
    * ``workflow_failure_types``: the exception classes that fail the workflow when raised by workflow code
      outside a step body; any other exception there is a code error and suspends the run (DESIGN.md
      section 16, docs/explanation/failures.md). ``(Exception,)`` fails on every exception.
    """

    lease_seconds: float = 30.0
    sweep_interval: float = 1.0
    max_payload_bytes: int = 1_048_576
    max_key_bytes: int = 1024
    live_wait_threshold: float = 1.0
    warm_wait: float = 0.0
    action_timeout: float = 60.0
    poll_interval: float = 0.02
    max_waiting_sends: int = 64
    step_abandon_seconds: float = 30.0
    dev_mode: bool = True
    code_version: str | None = None
    workflow_failure_types: tuple[type[BaseException], ...] = (WorkflowFailure,)
