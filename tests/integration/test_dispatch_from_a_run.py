"""The Celery dispatcher's hints from inside a run's event loop (after the run's own commit) are sent, not
refused by Django's async guard; outside a loop they wait for the caller's transaction."""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.db import transaction

from rivet_workflows.driver import dispatch, tasks


@pytest.fixture
def sent(monkeypatch):
    box: list[tuple] = []
    monkeypatch.setattr(tasks.run_actor, "apply_async", lambda args, **kw: box.append(("wake", args)))
    monkeypatch.setattr(tasks.relay, "apply_async", lambda *a, **kw: box.append(("relay",)))
    return box


def _in_a_loop_on_a_new_thread(fn) -> BaseException | None:
    """Run ``fn`` inside ``asyncio.run`` on a fresh thread (no connection opened there), as a run does."""
    failure: list[BaseException] = []

    async def main() -> None:
        fn()

    def target() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            failure.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    return failure[0] if failure else None


def test_wake_and_relay_from_a_runs_event_loop_are_sent_at_once(sent):
    dispatcher = dispatch.CeleryDispatcher()
    assert _in_a_loop_on_a_new_thread(lambda: (dispatcher.wake("a1"), dispatcher.relay())) is None
    assert sent == [("wake", ("a1",)), ("relay",)]


@pytest.mark.django_db(transaction=True)
def test_outside_a_loop_the_hints_wait_for_the_callers_transaction(sent):
    dispatcher = dispatch.CeleryDispatcher()
    with transaction.atomic():
        dispatcher.wake("a2")
        dispatcher.relay()
        assert sent == []
    assert sent == [("wake", ("a2",)), ("relay",)]
