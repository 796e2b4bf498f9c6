"""A database connection the server closed while it sat idle does not fail a healthy workflow (field case
C47): PostgreSQL's ``idle_session_timeout`` (as PgBouncer, a load balancer or a failover would) ends the
connections of a real Celery worker while its step bodies sleep and its heartbeat waits between renewals.
Every actor completes, each body ran once and no attempt was charged for the dead connections."""

from __future__ import annotations

import pytest
from django.db import connection

from rivet_workflows.engine.model import ports
from tests.conftest import requires_postgres

from .conftest import history

pytestmark = [pytest.mark.system, pytest.mark.postgres, requires_postgres]


@pytest.fixture
def idle_timeout(transactional_db):
    """``ALTER DATABASE <test db> SET idle_session_timeout = '2s'`` for the connections opened from now on
    (the worker's), reset afterwards."""
    name = connection.settings_dict["NAME"]
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER DATABASE \"{name}\" SET idle_session_timeout = '2s'")
    try:
        yield 2.0
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'ALTER DATABASE "{name}" RESET idle_session_timeout')


def test_connections_closed_while_idle_during_long_steps_do_not_fail_the_workflows(idle_timeout, cluster, rt):
    handles = [rt.client().slow.create(f"idle-{i}", input={"sleep": 4}) for i in range(3)]
    # A 15 s lease: the heartbeat renews every 5 s, so its own connection also sits idle past the timeout.
    cluster.start_worker(RIVET_LEASE_SECONDS="15")
    finished = lambda: all(  # noqa: E731
        rt.store.get_actor(h.actor_id).workflow_state in ports.FINISHED_STATES for h in handles
    )
    cluster.wait_for(finished, 120, what="the three workflows to finish")
    logs = cluster.logs()
    for handle in handles:
        record = rt.store.get_actor(handle.actor_id)
        assert (record.workflow_state, record.output) == (ports.COMPLETED, "slept"), logs
        assert cluster.count("start-slow", handle.actor_id) == 1, logs  # the body ran once
        assert cluster.count("after", handle.actor_id) == 1, logs
        status, attempts, _ = history(handle.actor_id)["slow"]
        assert (status, attempts) == (ports.ENTRY_COMPLETED, 1), logs  # no attempt charged


def test_the_heartbeat_renews_over_a_connection_the_server_closed_between_renewals(idle_timeout, cluster, rt):
    # A 9 s lease renewed every 3 s, a body of 13 s: every renewal after the first finds the heartbeat's
    # connection closed by the server (idle 3 s > 2 s). Were they lost, the lease would expire at 12 s and
    # another run would start the body again.
    handle = rt.client().slow.create("heartbeat", input={"sleep": 13})
    cluster.start_worker(RIVET_LEASE_SECONDS="9")
    cluster.wait_for(
        lambda: rt.store.get_actor(handle.actor_id).workflow_state in ports.FINISHED_STATES,
        120,
        what="the end",
    )
    logs = cluster.logs()
    assert rt.store.get_actor(handle.actor_id).workflow_state == ports.COMPLETED, logs
    assert cluster.count("start-slow", handle.actor_id) == 1, logs
    assert history(handle.actor_id)["slow"][:2] == (ports.ENTRY_COMPLETED, 1), logs
    assert "lease renewal" not in logs  # no renewal failed
