"""A PostgreSQL backend terminated under the API (``pg_terminate_backend``, as a failover or an operator
would) is a 503 ``store_unavailable`` with ``Retry-After``, never an error blamed on a hook or an action
that does not exist; the next request works on a new connection."""

from __future__ import annotations

import json

import psycopg
import pytest
from django.db import connection

from tests.api.support import Rivet, api_user
from tests.conftest import requires_postgres

pytestmark = [pytest.mark.postgres, requires_postgres]

API = "/api/rivet"


def _terminate_django_backend() -> None:
    """End this thread's Django connection from another session (the connection object stays open)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    settings = connection.get_connection_params()
    with psycopg.connect(**settings, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


def _post(client, path, body):
    return client.post(API + path, data=json.dumps(body), content_type="application/json")


@pytest.fixture
def rivet(transactional_db):
    helper = Rivet()
    yield helper
    helper.close()


@pytest.fixture
def api(rivet, client, django_user_model):
    client.force_login(api_user(django_user_model))
    return client


def _assert_unavailable(response):
    assert response.status_code == 503, response.content
    body = response.json()
    assert (body["group"], body["code"]) == ("server", "store_unavailable"), body
    assert response["Retry-After"].isdigit()
    assert "on_create" not in body["message"] and "action" not in body["message"]


def test_a_terminated_backend_is_a_503_for_creates_actions_and_reads(api, rivet):
    actor_id = _post(api, "/actors", {"name": "counter", "key": ["k0"]}).json()["actor_id"]
    requests = [
        lambda: _post(api, "/actors", {"name": "counter", "key": ["kX"]}),
        lambda: _post(api, f"/actors/{actor_id}/actions/increment", {"args": [1]}),
        lambda: api.get(f"{API}/actors/{actor_id}"),
        lambda: api.get(f"{API}/actors"),
    ]
    for request in requests:
        _terminate_django_backend()
        _assert_unavailable(request())
        connection.close_if_unusable_or_obsolete()  # what Django does at the end of a request
        assert request().status_code == 200  # a new connection: works again


def test_store_calls_on_a_terminated_backend_raise_store_unavailable_and_recover(rivet):
    from rivet_workflows.engine.model import errors

    store = rivet.runtime.store
    actor_id = rivet.client.counter.get_or_create("k1").actor_id
    _terminate_django_backend()
    with pytest.raises(errors.StoreUnavailableError) as caught:
        store.get_actor(actor_id)
    assert caught.value.http_status == 503 and caught.value.__cause__ is not None
    assert store.get_actor(actor_id).actor_id == actor_id  # the store checks the errored connection first
