"""``manage.py rivet list|show|start|send`` and the progress of the long commands, on the Django store."""

from __future__ import annotations

import io
import json
import threading
import time

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from rivet_workflows import django_runtime, models
from rivet_workflows.engine.model import ports

pytestmark = pytest.mark.django_db(transaction=True)


class Terminal(io.StringIO):
    """A captured stream that says it is an interactive terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def runtime(settings):
    settings.RIVET_WORKFLOWS = {
        "REGISTRY": "tests.ops.inspect_registry.registry",
        "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
        "LIVE_WAIT_THRESHOLD": 0.0,
        "POLL_INTERVAL": 0.01,
    }
    django_runtime.reset_runtime()
    yield django_runtime.get_runtime()
    django_runtime.reset_runtime()


def rivet(*args: str, stdout=None, stderr=None) -> str:
    out = stdout if stdout is not None else io.StringIO()
    call_command("rivet", *args, stdout=out, stderr=stderr if stderr is not None else io.StringIO())
    return out.getvalue()


def _started(key: str) -> str:
    out = rivet("start", "order", key, "--input", '{"sku": "A-1"}')
    assert out.startswith(f'started order ["{key}"]: ')
    return out.split(": ")[-1].strip()


def test_start_creates_the_workflow_and_list_shows_it_as_plain_columns_when_piped(runtime) -> None:
    actor_id = _started("o-1")
    rivet("start", "order", '["eu", 42]')
    django_runtime.drain(timeout=2)
    runtime.registry.client().note.get_or_create("n-1")

    out = rivet("list")
    lines = out.splitlines()
    assert lines[0] == "3 actors"
    assert lines[1].split() == [
        "actor",
        "id",
        "type",
        "key",
        "state",
        "waits",
        "on",
        "wakes",
        "at",
        "updated",
    ]
    row = next(line for line in lines if actor_id in line)
    assert row.split()[:5] == [actor_id, "order", '["o-1"]', "sleeping", "approve"]
    assert "│" not in out and "\x1b[" not in out  # no box drawing or colour codes in a pipe
    assert any('["eu", 42]' in line for line in lines)
    assert "no_workflow" in next(line for line in lines if "note" in line)

    sleeping = rivet("list", "--state", "sleeping", "--name", "order").splitlines()
    assert sleeping[0] == "2 actors" and len(sleeping) == 4
    assert rivet("list", "--state", "no_workflow").splitlines()[0] == "1 actor"
    assert rivet("list", "--limit", "1").splitlines()[0] == "1 of 3 actors"


def test_show_prints_the_trace_with_attempts_statuses_and_durations(runtime) -> None:
    actor_id = _started("o-2")
    django_runtime.drain(timeout=2)
    handle = runtime.registry.client().order.get_for_id(actor_id)
    handle.send("approve", "alice", wait=False)
    django_runtime.drain(timeout=2)
    assert handle.workflow_state() == ports.COMPLETED

    out = rivet("show", actor_id)
    assert f"actor     {actor_id}" in out and "state     completed" in out and 'key       ["o-2"]' in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[8:] if line.strip()}
    assert rows["reserve"][1:4] == ["step", "completed", "1"]
    assert rows["charge"][1:4] == ["step", "completed", "2"]  # the first attempt failed, the retry paid
    assert rows["wait-approval"][1:4] == ["queue", "wait", "received"]  # one row for the wait
    assert not any(":" in key for key in rows)  # no ":count", ":0" rows of its entries
    assert "attempt 1" in out and "attempt 2" in out  # each of charge's tries, under it
    first = next(line for line in out.splitlines() if line.strip().startswith("attempt 1"))
    assert "failed" in first and "RuntimeError: card network down" in first
    charge = next(line for line in out.splitlines() if line.lstrip().startswith("charge"))
    assert " ms" in charge or " s" in charge  # a duration
    assert "\ntrace     " not in out  # created without tracing: no trace id

    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    traceparent = f"00-{trace_id}-00f067aa0ba902b7-01"
    models.Actor.objects.filter(pk=actor_id).update(trace_context={"traceparent": traceparent})
    assert f"trace     {trace_id}" in rivet("show", actor_id)


def test_show_draws_a_rich_table_on_a_terminal(runtime) -> None:
    actor_id = _started("o-3")
    django_runtime.drain(timeout=2)
    out = rivet("show", actor_id, stdout=Terminal())
    assert "reserve" in out and ("│" in out or "┃" in out)


def test_send_with_wait_prints_the_workflow_response(runtime) -> None:
    actor_id = _started("o-4")
    django_runtime.drain(timeout=2)
    stop = threading.Event()

    def worker() -> None:
        try:
            while not stop.is_set():
                django_runtime.drain(timeout=0.2)
                time.sleep(0.02)
        finally:
            connection.close()

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        out = rivet("send", actor_id, "approve", '"bob"', "--wait", "--timeout", "60")
    finally:
        stop.set()
        thread.join()
    assert json.loads(out) == {"approved_by": "bob"}
    assert models.Actor.objects.get(pk=actor_id).workflow_state == ports.COMPLETED


def test_bad_input_is_a_clear_command_error(runtime) -> None:
    actor_id = _started("o-5")
    cases = [
        (("start", "nope", "k"), "no actor type 'nope'; registered: "),
        (("start", "note", "k"), "has no workflow"),
        (("start", "order", "k", "--input", "{bad"), "--input is not valid JSON"),
        (("start", "order", "o-5"), "already exists"),
        (("start", "order", "[1,"), "KEY is not valid JSON"),
        (("send", actor_id, "approve", "hello"), "BODY is not valid JSON.*quote a text as JSON"),
        (("send", "0" * 32, "approve", "1"), "no actor with id '0000"),
        (("send", actor_id, "nope", "1"), "QueueNotFoundError"),
        (("send", actor_id, "approve", "1", "--wait", "--timeout", "0"), "no response: "),
        (("show", "missing"), "no actor with id 'missing'"),
        (("list", "--state", "asleep"), "unknown state 'asleep'"),
        (("list", "--limit", "0"), "--limit must be >= 1"),
    ]
    for args, message in cases:
        with pytest.raises(CommandError, match=message):
            rivet(*args)


def test_long_commands_show_progress_on_a_terminal_and_stay_plain_when_piped(runtime) -> None:
    for key in ("p-1", "p-2", "p-3"):
        _started(key)
    django_runtime.drain(timeout=2)
    piped_err = io.StringIO()
    piped = rivet("check", stderr=piped_err)
    assert piped_err.getvalue() == ""
    assert piped.splitlines()[-1] == "checked 3 in-flight workflows: 0 problems"
    assert all(line.startswith("ok") for line in piped.splitlines()[:-1])

    terminal_err = Terminal()
    on_terminal = rivet("check", stderr=terminal_err)
    assert on_terminal == piped  # the report itself is the same
    assert "checking" in terminal_err.getvalue()  # the progress bar went to the terminal

    models.Actor.objects.update(workflow_state=ports.COMPLETED, wake_at=None)
    models.Actor.objects.update(updated_at=runtime.store.now().replace(year=2000))
    terminal_err = Terminal()
    assert "deleted 3 finished actors" in rivet("prune", "--older-than", "1", stderr=terminal_err)
    assert "pruning 3 actors" in terminal_err.getvalue()
    assert models.Actor.objects.count() == 0


def test_show_marks_compensations_and_reads_a_timed_out_wait_as_timed_out(runtime) -> None:
    actor_id = rivet("start", "booking", "b-1").split(": ")[-1].strip()
    django_runtime.drain(timeout=2)
    assert runtime.store.get_actor(actor_id).workflow_state == ports.FAILED

    out = rivet("show", actor_id)
    lines = out.splitlines()
    reserve = next(line for line in lines if line.strip().startswith("reserve"))
    assert "completed, compensated" in reserve
    payment = next(line for line in lines if line.strip().startswith("payment"))
    assert "queue wait" in payment and "timed out" in payment and "queue pay" in payment
    assert "0 messages" not in out and "sleep" not in out and "interrupted" not in out


def test_list_and_show_say_what_the_run_does_now_not_a_finished_wait(runtime) -> None:
    actor_id = _started("o-now")
    django_runtime.drain(timeout=2)
    waiting = next(line for line in rivet("list").splitlines() if actor_id in line)
    assert "approve" in waiting  # it waits on the approval queue
    # a worker took it (the approval came) and runs a later step: the finished wait is not shown
    models.Actor.objects.filter(pk=actor_id).update(wake_at=runtime.store.now())
    token = runtime.store.claim(actor_id, "worker-1", 30)
    assert token is not None
    running = next(line for line in rivet("list").splitlines() if actor_id in line)
    assert "(running now)" in running and "approve" not in running
    shown = rivet("show", actor_id)
    assert "now       running (leased by worker-1" in shown
    assert "waits on" not in shown and "wakes at" not in shown
    runtime.store.commit(actor_id, token, ports.Commit(release=True))
    due = next(line for line in rivet("list").splitlines() if actor_id in line)
    assert "(due now)" in due and "approve" not in due


def test_fork_runs_a_copy_with_new_input_and_leaves_the_source(runtime) -> None:
    actor_id = _started("o-fork")
    django_runtime.drain(timeout=2)
    runtime.store.send(actor_id, "approve", "ann", True)
    django_runtime.drain(timeout=5)
    source = runtime.store.get_actor(actor_id)
    assert source.workflow_state == ports.COMPLETED

    out = rivet("fork", actor_id, "--entry", "charge", "--input", '{"sku": "B-2"}', "--key", "o-fork-2")
    assert out.startswith(f"forked {actor_id} (before 'charge', 3 entries copied): [\"o-fork-2\"] ")
    new_id = out.split()[-1]
    django_runtime.drain(timeout=5)
    forked = runtime.store.get_actor(new_id)
    assert forked.workflow_state == ports.COMPLETED and forked.output == {"input": {"sku": "B-2"}}
    assert runtime.store.get_actor(actor_id).output == source.output
    assert [a.who for a in runtime.store.operator_actions(new_id)] == ["command"]

    with pytest.raises(CommandError, match="EntryNotFoundError"):
        rivet("fork", actor_id, "--entry", "nope")
    with pytest.raises(CommandError, match="--input is not valid JSON"):
        rivet("fork", actor_id, "--input", "{")
    with pytest.raises(CommandError, match="ActorAlreadyExistsError"):
        rivet("fork", actor_id, "--key", "o-fork-2")


def test_send_with_a_dedup_id_stores_one_message(runtime) -> None:
    actor_id = _started("o-dedup")
    for _ in range(3):
        assert "sent to order" in rivet("send", actor_id, "approve", '"bob"', "--dedup-id", "hook-1")
    assert models.QueueMessage.objects.filter(actor_id=actor_id).count() == 1
    with pytest.raises(CommandError, match="dedup_id"):
        rivet("send", actor_id, "approve", "1", "--dedup-id", "x" * 201)
