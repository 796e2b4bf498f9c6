"""History pushes to trace pages are coalesced per actor, and every change is followed by a push."""

from __future__ import annotations

import os
import threading
import time

import pytest

from rivet_workflows.realtime import broadcaster


class RecordingLayer:
    """A channel layer that records group sends (called on the broadcaster's sender loop)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict]] = []
        self.event = threading.Event()

    async def group_send(self, group: str, message: dict) -> None:
        self.sent.append((group, message))
        self.event.set()


@pytest.fixture
def layer(monkeypatch):
    recording = RecordingLayer()
    monkeypatch.setattr(broadcaster, "_layer", lambda: recording)
    monkeypatch.setattr(broadcaster, "_consumer_loop", None)
    monkeypatch.setattr(broadcaster, "HISTORY_PUSH_DELAY", 0.2)
    monkeypatch.setattr(broadcaster, "_history_due", {})
    return recording


def wait_for_pushes(layer: RecordingLayer, count: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while len(layer.sent) < count and time.monotonic() < deadline:
        layer.event.wait(0.05)
        layer.event.clear()


def test_a_burst_of_history_changes_sends_one_push_per_actor(layer):
    for _ in range(10):  # a run's ten step commits
        broadcaster.history_changed("a1")
    broadcaster.history_changed("a2")
    wait_for_pushes(layer, 2)
    time.sleep(0.3)  # room for a wrongly scheduled extra push to show up
    groups = sorted(group for group, _ in layer.sent)
    assert groups == [broadcaster.group_name("a1"), broadcaster.group_name("a2")]
    assert {"type": "rivet.history", "actor_id": "a1"} in [m for _, m in layer.sent]


def test_a_change_after_a_push_gets_a_push_of_its_own(layer):
    broadcaster.history_changed("a1")
    wait_for_pushes(layer, 1)
    broadcaster.history_changed("a1")
    wait_for_pushes(layer, 2)
    assert [group for group, _ in layer.sent] == [broadcaster.group_name("a1")] * 2


def test_a_push_that_never_started_does_not_silence_the_actor(layer):
    broadcaster._history_due["a1"] = time.monotonic() - broadcaster.HISTORY_PUSH_STALE - 1
    broadcaster.history_changed("a1")
    wait_for_pushes(layer, 1)
    assert [group for group, _ in layer.sent] == [broadcaster.group_name("a1")]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_process_pushes_at_once_although_its_parent_had_a_push_scheduled(layer, monkeypatch):
    """A server forked from a process that just committed (a test starting daphne, a preforking server):
    the parent's scheduled push never runs in the child, and must not hold the child's pushes back."""
    monkeypatch.setattr(broadcaster, "HISTORY_PUSH_DELAY", 1.0)  # still scheduled when we fork
    broadcaster.history_changed("a1")
    pid = os.fork()
    if pid == 0:  # the child: its own loop, its own pushes
        ok = False
        try:
            broadcaster.history_changed("a1")
            wait_for_pushes(layer, 1, timeout=5)
            ok = [group for group, _ in layer.sent] == [broadcaster.group_name("a1")]
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child sent no push for a1"
    wait_for_pushes(layer, 1)  # the parent's own push still goes out
    assert [group for group, _ in layer.sent] == [broadcaster.group_name("a1")]
