"""A database that went away is the server's problem, never blamed on user code: every endpoint answers
503 ``{group: "server", code: "store_unavailable"}`` with ``Retry-After``, while an exception raised by
user code (an action, ``on_create``) stays the user's 400 ``action_failed``. The store raises here; the
PostgreSQL test with terminated backends is tests/system/test_store_unavailable.py."""

from __future__ import annotations

import pytest
from django.db import InterfaceError, OperationalError

from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.runtime import executor
from rivet_workflows.storage import prepared
from rivet_workflows.storage.orm import DjangoStore
from tests.api.support import api_user
from tests.api.test_api import API, assert_error, post

DROPPED = "terminating connection due to administrator command"


@pytest.fixture
def api(rivet, client, django_user_model):
    client.force_login(api_user(django_user_model))
    return client


@pytest.fixture
def database_down(monkeypatch):
    """Every actor query of the store raises the driver's error of a terminated backend, when switched on."""
    down = {"on": False, "error": OperationalError}
    actors = DjangoStore._actors

    def failing(self):
        if down["on"]:
            raise down["error"](DROPPED)
        return actors(self)

    monkeypatch.setattr(DjangoStore, "_actors", failing)
    return down


def assert_unavailable(response):
    body = assert_error(response, 503, "store_unavailable")
    assert body["group"] == "server"
    assert response["Retry-After"].isdigit()
    assert "on_create" not in body["message"] and "raised" not in body["message"]
    return body


@pytest.mark.parametrize("kind", [OperationalError, InterfaceError])
def test_creating_an_actor_while_the_database_is_down_is_a_503_not_a_hook_error(api, database_down, kind):
    database_down.update(on=True, error=kind)
    assert_unavailable(post(api, "/actors", {"name": "counter", "key": ["kX"]}))
    database_down["on"] = False
    assert post(api, "/actors", {"name": "counter", "key": ["kX"]}).status_code == 200


def test_actions_and_reads_while_the_database_is_down_are_503(api, rivet, database_down):
    actor_id = rivet.client.counter.get_or_create("k1").actor_id
    database_down["on"] = True
    assert_unavailable(post(api, f"/actors/{actor_id}/actions/increment", {"args": [1]}))
    assert_unavailable(api.get(f"{API}/actors/{actor_id}"))
    database_down["on"] = False
    assert post(api, f"/actors/{actor_id}/actions/increment", {"args": [1]}).json()["result"] == 1


def test_an_endpoints_own_query_failing_on_a_dropped_connection_is_503(api, monkeypatch):
    from django.db.models import QuerySet

    def dropped(self, *args, **kwargs):
        raise OperationalError(DROPPED)

    monkeypatch.setattr(QuerySet, "count", dropped)
    assert_unavailable(api.get(f"{API}/actors"))


def test_user_code_raising_a_database_error_is_still_the_users_400(api, rivet, monkeypatch):
    def action(c):
        raise OperationalError("the user's own query failed")

    definition = rivet.runtime.registry.get("counter")
    monkeypatch.setitem(definition.actions, "own_query", action)
    actor_id = rivet.client.counter.get_or_create("k2").actor_id
    body = assert_error(
        post(api, f"/actors/{actor_id}/actions/own_query", {"args": []}), 400, "action_failed"
    )
    assert body["group"] == "user" and "OperationalError" in body["message"]


def test_a_workflow_run_that_loses_the_database_stops_untouched(rivet, monkeypatch):
    from django.db.backends.utils import CursorWrapper

    handle = rivet.client.order.get_or_create("o-down")
    down = {"on": False}
    execute = CursorWrapper.execute

    def failing(self, *args, **kwargs):  # every query of every store (raw SQL too) hits a dead backend
        if down["on"]:
            raise OperationalError(DROPPED)
        return execute(self, *args, **kwargs)

    monkeypatch.setattr(CursorWrapper, "execute", failing)
    # PostgresStore's own statements run on pooled psycopg cursors in a thin shell of its own
    store_execute = prepared._StoreCursor.execute

    def store_failing(self, *args, **kwargs):
        if down["on"]:
            raise OperationalError(DROPPED)
        return store_execute(self, *args, **kwargs)

    monkeypatch.setattr(prepared._StoreCursor, "execute", store_failing)
    down["on"] = True
    with pytest.raises(errors.StoreUnavailableError) as caught:
        executor.run_actor(rivet.runtime, handle.actor_id)
    assert isinstance(caught.value.__cause__, errors.StoreUnavailableError | OperationalError)
    down["on"] = False
    record = rivet.runtime.store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.PENDING and record.error is None
