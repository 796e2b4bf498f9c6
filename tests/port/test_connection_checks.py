"""Store calls on a connection the server closed while it sat idle (field case C47), on PostgreSQL with a
session ``idle_session_timeout`` of 1 s: a call after a longer pause checks the connection and reconnects,
a call the server refused because it had ended the session is run again, and a failure whose outcome is
unknown is not (the real-worker version is tests/system/test_idle_connections.py)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import OperationalError, connection, connections, transaction

from rivet_workflows.engine.model import errors, ports
from rivet_workflows.storage import DjangoStore, PostgresStore
from tests.conftest import is_postgres

from .support import HOUR, StoreHarness, entry

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not is_postgres(), reason="needs PostgreSQL (idle_session_timeout)"),
    pytest.mark.django_db(transaction=True),
]


def _idle_timeout_of_this_session(seconds: float = 1.0) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SET idle_session_timeout = '{int(seconds * 1000)}ms'")


def _let_the_server_close_it() -> None:
    time.sleep(1.6)  # over the session's 1 s idle timeout: the server has ended the session


@pytest.fixture(params=[DjangoStore, PostgresStore], ids=lambda cls: cls.__name__)
def store(request):
    return request.param(poll_interval=0.005, idle_check=0.5)


def test_a_commit_after_the_server_closed_the_idle_connection_goes_through_under_the_same_lease(store):
    actor_id = StoreHarness("pg", store).new_actor()
    token = store.claim(actor_id, "runner", 30)
    assert store.commit(actor_id, token, ports.Commit(step_lock_until=store.now() + HOUR)).ok
    _idle_timeout_of_this_session()
    _let_the_server_close_it()  # a step body runs meanwhile
    done = ports.Commit(state={"count": 1}, upserts=[entry("slow", output="slept")], step_lock_until=None)
    assert store.commit(actor_id, token, done).ok
    assert store.get_actor(actor_id).state == {"count": 1}
    assert [e.key for e in store.load_history(actor_id)] == ["slow"]


def test_every_kind_of_call_survives_a_connection_closed_while_idle(store):
    actor_id = StoreHarness("pg", store).new_actor()
    calls = [
        lambda: store.claim(actor_id, "runner", 30),
        lambda: store.renew(actor_id, store.get_actor(actor_id).lease_token, 30),
        lambda: store.load_for_run(actor_id),
        lambda: store.send(actor_id, "q", 1),
        lambda: store.wait_for_messages(actor_id, ["q"], 0.1),
        lambda: store.run_action(actor_id, lambda s: s.update(count=2), timeout=5),
        lambda: store.claim_due("sweeper", 10, 30),
        lambda: store.now(),
    ]
    for call in calls:
        _idle_timeout_of_this_session()
        _let_the_server_close_it()
        call()
    assert store.get_actor(actor_id).state == {"count": 2}


def test_the_heartbeat_thread_renews_over_its_own_connection_after_the_server_closed_it(store):
    actor_id = StoreHarness("pg", store).new_actor()
    token = store.claim(actor_id, "runner", 30)
    renewed = []

    def heartbeat():  # as the executor's: its first renewal opens the thread's connection
        try:
            renewed.append(store.renew(actor_id, token, 30))
            for _ in range(2):
                _idle_timeout_of_this_session()
                _let_the_server_close_it()
                renewed.append(store.renew(actor_id, token, 30))
        finally:
            store.close_thread_connection()

    beat = threading.Thread(target=heartbeat)
    beat.start()
    beat.join(30)
    assert renewed == [True, True, True]


def test_a_call_the_server_refused_because_it_had_ended_the_session_runs_again():
    store = PostgresStore(idle_check=3600.0)  # no check before the call: the server's refusal decides
    actor_id = StoreHarness("pg", store).new_actor()
    token = store.claim(actor_id, "runner", 30)
    _idle_timeout_of_this_session()
    _let_the_server_close_it()
    assert store.commit(actor_id, token, ports.Commit(state={"count": 3})).ok
    assert store.get_actor(actor_id).state == {"count": 3}


def test_a_warm_wait_whose_connection_the_server_closes_ends_the_window_and_the_next_call_reconnects():
    store = PostgresStore(idle_check=3600.0)
    actor_id = StoreHarness("pg", store).new_actor()
    token = store.claim(actor_id, "runner", 30)
    _idle_timeout_of_this_session()
    started = time.monotonic()
    assert store.wait_for_messages(actor_id, ["q"], 5.0) is False  # the server ended the session at 1 s
    assert time.monotonic() - started < 5.0
    assert store.commit(actor_id, token, ports.Commit(release=True)).ok


def test_a_failure_whose_outcome_is_unknown_is_not_retried(store, monkeypatch):
    actor_id = StoreHarness("pg", store).new_actor()
    token = store.claim(actor_id, "runner", 30)
    calls = []

    def broken(*args):
        calls.append(args)
        raise OperationalError("server closed the connection unexpectedly")  # sent, then broke

    monkeypatch.setattr(store, "_apply", broken)
    with pytest.raises(errors.StoreUnavailableError) as caught:  # the database's failure, never the caller's
        store.commit(actor_id, token, ports.Commit(state={"count": 4}))
    assert isinstance(caught.value.__cause__, OperationalError)
    assert len(calls) == 1


def test_inside_the_callers_transaction_nothing_is_checked_or_retried():
    store = PostgresStore(idle_check=0.0)
    actor_id = StoreHarness("pg", store).new_actor()
    with transaction.atomic():
        token = store.claim(actor_id, "runner", 30)
        assert store.commit(actor_id, token, ports.Commit(state={"count": 5})).ok
    assert connections["default"].connection is not None
    assert store.get_actor(actor_id).state == {"count": 5}


def _count_pings(monkeypatch) -> list[bool]:
    pings: list[bool] = []
    wrapper = connections["default"]
    real = wrapper.is_usable

    def is_usable():
        pings.append(real())
        return pings[-1]

    monkeypatch.setattr(wrapper, "is_usable", is_usable)
    return pings


def test_a_healthy_connection_left_idle_is_used_without_a_ping(store, monkeypatch):
    actor_id = StoreHarness("pg", store).new_actor()
    store.claim(actor_id, "runner", 30)
    time.sleep(0.7)  # over idle_check; the server has not closed the session
    pings = _count_pings(monkeypatch)
    store.send(actor_id, "q", 1)
    assert pings == []  # its socket is quiet: no SELECT 1 round trip before the call
    assert [m.body for m in store.pending_messages(actor_id, ["q"], 10)] == [1]


def test_a_connection_the_server_closed_while_idle_is_pinged_and_replaced(store, monkeypatch):
    actor_id = StoreHarness("pg", store).new_actor()
    _idle_timeout_of_this_session()
    _let_the_server_close_it()
    pings = _count_pings(monkeypatch)
    token = store.claim(actor_id, "runner", 30)
    assert pings == [False]  # the server's goodbye waits on the socket: checked, found dead, replaced
    assert token is not None
