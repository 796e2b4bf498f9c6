"""Waiting sends (docs/howto/calling.md): the completion, the timeout and the end of the workflow still end
them; on PostgreSQL one LISTEN serves the whole wait and a waiting send holds no database connection; the
waiting sends of a process are bounded by MAX_WAITING_SENDS (429 with Retry-After beyond it)."""

from __future__ import annotations

import threading
import time

import pytest
from django.test import Client

from tests.api.test_api import API, post
from tests.api.test_send_wait import in_background
from tests.conftest import requires_postgres

TOKEN = "waits-s3cret"
AUTH = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}


@pytest.fixture
def token_api(rivet):
    """The actor API behind the API token (no session: a request reads nothing for its caller)."""
    rivet.configure(DEV_MODE=False, API_TOKEN=TOKEN)
    return Client()


def wait_send(client, actor_id, timeout, queue="approval"):
    started = time.monotonic()
    response = post(
        client, f"/actors/{actor_id}/queues/{queue}", {"body": 1, "wait": True, "timeout": timeout}, **AUTH
    )
    return response, time.monotonic() - started


def later(seconds, fn):
    """Run ``fn`` on a thread after ``seconds``; returns the thread's join."""
    return in_background(lambda: (time.sleep(seconds), fn()))


def test_a_waiting_send_returns_the_completion_once_the_workflow_completes_the_message(token_api, rivet):
    handle = rivet.client.waiter.get_or_create("answers")

    def run_it():  # a worker: runs the workflow until it took the message and completed it
        end = time.monotonic() + 20
        while handle.workflow_state() != "completed" and time.monotonic() < end:
            rivet.drain(timeout=0.2)

    join = later(0.3, run_it)
    response, waited = wait_send(token_api, handle.actor_id, 30)
    join()
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "completed", response.json()
    assert response.json()["response"] == {"ok": True, "got": 1}
    assert waited < 10


def test_a_waiting_send_ends_as_the_actor_is_cancelled_not_at_its_timeout(token_api, rivet):
    handle = rivet.client.waiter.get_or_create("cancelled")
    join = later(0.5, lambda: handle.cancel(reason="test"))
    response, waited = wait_send(token_api, handle.actor_id, 30)
    join()
    assert response.json()["status"] == "timed_out", response.content
    assert response.json()["detail"] == "the workflow cancelled without completing the message"
    assert waited < 5


def test_a_waiting_send_times_out_at_its_timeout(token_api, rivet):
    handle = rivet.client.waiter.get_or_create("never-run")
    response, waited = wait_send(token_api, handle.actor_id, 1)
    assert response.json()["status"] == "timed_out", response.content
    assert "has not received the message yet" in response.json()["detail"]
    assert 0.9 <= waited < 4


def test_a_python_send_beyond_max_waiting_sends_raises_before_storing_anything(rivet):
    from rivet_workflows import TooManyWaitingSendsError
    from rivet_workflows.engine.client import sending

    rivet.configure(MAX_WAITING_SENDS=1)
    first, second = rivet.client.waiter.get_or_create("one"), rivet.client.waiter.get_or_create("two")
    join = later(0, lambda: first.send("approval", 1, wait=True, timeout=3))
    deadline = time.monotonic() + 10
    while sending.WAITING_SENDS.count < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(TooManyWaitingSendsError) as refused:
        second.send("approval", 2, wait=True, timeout=3)
    assert refused.value.limit == 1 and refused.value.http_status == 429
    assert rivet.runtime.store.pending_messages(second.actor_id, None, 10) == []
    second.send("approval", 3)  # a send that does not wait is not bounded
    join()
    assert sending.WAITING_SENDS.count == 0


@requires_postgres
def test_a_two_second_waiting_send_on_postgresql_runs_a_handful_of_statements(token_api, rivet, monkeypatch):
    """It used to LISTEN, look and UNLISTEN for every pause of its backoff, and re-read the actor every
    0.25 s: 41 statements in 2 s. Now: one LISTEN for the whole wait, looks only at the start and the
    deadline. Counted on every psycopg cursor of the process (the request's and the listener's)."""
    import psycopg

    handle = rivet.client.waiter.get_or_create("counted")
    statements = []
    execute = psycopg.Cursor.execute

    def counted(self, query, *args, **kwargs):
        statements.append(str(query)[:70])
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    response, waited = wait_send(token_api, handle.actor_id, 2)
    monkeypatch.undo()
    assert response.json()["status"] == "timed_out", response.content
    assert waited >= 1.9
    print(f"{len(statements)} statements in {waited:.2f} s: {statements}")
    assert len(statements) <= 10, statements


@requires_postgres
def test_200_concurrent_waiting_sends_hold_a_bounded_number_of_connections_and_the_201st_is_429(
    token_api, rivet
):
    """200 sends wait at once (threads, as a threaded server runs them): the process's PostgreSQL connections
    stay under the bound (the waits hold none), another request is served meanwhile, and the send beyond
    MAX_WAITING_SENDS gets 429 with Retry-After before it reaches the database. They used to hold a
    connection each, and PostgreSQL refused new connections server-wide."""
    from django.db import connection, connections

    from rivet_workflows import models
    from rivet_workflows.engine.client import sending

    rivet.configure(DEV_MODE=False, API_TOKEN=TOKEN, MAX_WAITING_SENDS=200)
    handle = rivet.client.waiter.get_or_create("busy")
    handle.pause("nobody answers")
    database = connection.settings_dict["NAME"]
    answers = []

    def send(_i):
        answers.append(wait_send(Client(), handle.actor_id, 8)[0])

    def target(i):
        try:
            send(i)
        finally:
            connections.close_all()

    peak = [0]
    done = threading.Event()

    def sample():  # on a connection of its own, counted too
        import psycopg

        params = dict(connection.get_connection_params())
        for django_only in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(django_only, None)
        with psycopg.connect(**params, autocommit=True) as own:
            while not done.is_set():
                count = own.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [database]
                ).fetchone()[0]
                peak[0] = max(peak[0], count)
                time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = [threading.Thread(target=target, args=(i,)) for i in range(200)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while sending.WAITING_SENDS.count < 200 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sending.WAITING_SENDS.count == 200
    served_at = time.monotonic()
    listed = Client().get(API + "/actors?name=waiter", **AUTH)
    served_in = time.monotonic() - served_at
    refused = post(Client(), f"/actors/{handle.actor_id}/queues/approval", {"body": 1, "wait": True}, **AUTH)
    for thread in threads:  # the 200 all time out together: the burst of their last looks is sampled too
        thread.join(timeout=60)
    done.set()
    sampler.join()
    assert listed.status_code == 200 and served_in < 3, (listed.status_code, served_in)
    assert refused.status_code == 429, refused.content
    assert refused["Retry-After"] == "1"
    assert refused.json()["code"] == "too_many_waiting_sends"
    assert refused.json()["metadata"] == {"limit": 200}
    assert models.QueueMessage.objects.filter(actor_id=handle.actor_id).count() == 200  # none of the 201st
    print(f"peak connections of the test database while 200 sends waited: {peak[0]}")
    # this thread's, the sampler's, the listener's, the turns, and two backends of closed connections that
    # PostgreSQL still lists while they exit (it was 200 and more)
    assert peak[0] <= 3 + sending.DATABASE_TURNS + 2
    assert len(answers) == 200
    assert {a.status_code for a in answers} == {200}
    assert {a.json()["status"] for a in answers} == {"timed_out"}


def test_a_waiting_send_works_under_atomic_requests_and_holds_no_transaction(token_api, rivet, monkeypatch):
    """The view is async (Django refuses async views under ATOMIC_REQUESTS unless they are marked
    non-atomic): the send answers, and the request does not wrap the wait in a transaction."""
    from django.db import connection

    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)
    handle = rivet.client.waiter.get_or_create("atomic-requests")
    response, _ = wait_send(token_api, handle.actor_id, 0.3)
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "timed_out"
    accepted = post(token_api, f"/actors/{handle.actor_id}/queues/approval", {"body": 2}, **AUTH)
    assert accepted.status_code == 202, accepted.content


@requires_postgres
def test_a_waiting_send_still_hears_the_completion_after_its_listening_connection_was_killed(rivet):
    """The process's listening connection is terminated by the server mid-wait: the listener reconnects,
    listens again and makes every waiting send look once; the completion that comes later still ends the
    wait at once, not at the timeout."""
    from django.db import connection

    from rivet_workflows import models
    from rivet_workflows.engine.client import sending

    handle = rivet.client.waiter.get_or_create("reconnect")
    box = {}
    join = in_background(lambda: box.update(result=handle.send("approval", 1, wait=True, timeout=30)))
    end = time.monotonic() + 15
    while (
        not models.QueueMessage.objects.filter(actor_id=handle.actor_id).exists() and time.monotonic() < end
    ):
        time.sleep(0.02)
    assert sending.WAITING_SENDS.count == 1
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
            "AND query LIKE 'LISTEN %%rivet_sends_%%'"
        )
        assert cursor.fetchall() == [(True,)]
    time.sleep(1.0)  # the listener notices, reconnects and listens again
    started = time.monotonic()
    while handle.workflow_state() != "completed" and time.monotonic() - started < 20:
        rivet.drain(timeout=0.2)
    join()
    assert box["result"].status == "completed" and box["result"].response == {"ok": True, "got": 1}
    assert time.monotonic() - started < 10
