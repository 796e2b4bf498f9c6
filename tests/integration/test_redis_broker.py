"""rivet_workflows.driver.redis_broker: a collected Redis channel raises a connection error (field case C60).

The kombu sequence behind C60, without Celery: a channel holding an unacknowledged message with a BRPOP in
flight, a second channel consuming an auto-delete fanout queue (Celery's remote-control channel), Redis
SIGKILLed, then what Celery 5.7's consumer does on the lost connection: ``collect()`` and ``close()``; then
the late ack of a task that was running. With kombu's own transport the close and the ack raise
``AttributeError: 'NoneType' object has no attribute 'hostname'``. REDIS_URL only (needs redis-server).
"""

from __future__ import annotations

import os
import shutil
import socket
import time

import pytest
from kombu import Connection, Exchange, Queue

from rivet_workflows.testing import GroupProcess

pytestmark = pytest.mark.redis


@pytest.fixture
def private_redis(tmp_path):
    """A redis-server on a free loopback port, keeping nothing on disk; yields its URL."""
    if not os.environ.get("REDIS_URL") or not shutil.which("redis-server"):
        pytest.skip("needs REDIS_URL and the redis-server binary")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
    proc = GroupProcess("redis", cmd, env=dict(os.environ), log_path=tmp_path / "redis.log")
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    yield proc, f"redis://127.0.0.1:{port}/0"
    proc.kill()


def test_a_collected_channel_raises_connection_errors_not_attribute_error(private_redis) -> None:
    proc, url = private_redis
    tasks = Queue("tasks", Exchange("tasks"), "tasks")
    with Connection(url) as producer_connection:
        producer_connection.Producer().publish(
            {"n": 1}, exchange=tasks.exchange, routing_key="tasks", declare=[tasks]
        )

    conn = Connection(url, transport="rivet_workflows.driver.redis_broker:Transport")
    received = []
    conn.Consumer(
        [tasks], callbacks=[lambda body, message: received.append(message)], prefetch_count=1
    ).consume()
    conn.drain_events(timeout=5)
    assert len(received) == 1  # unacknowledged: an acks-late task running
    control = conn.channel()  # like Celery's pidbox channel: a fanout queue deleted when the channel closes
    fanout = Queue("control", Exchange("control", type="fanout"), auto_delete=True)
    conn.Consumer([fanout], channel=control, callbacks=[lambda body, message: None], no_ack=True).consume()
    task_channel = conn.default_channel
    task_channel._brpop_start()  # the event loop keeps a BRPOP in flight

    proc.kill()  # Redis gone: every socket reset
    try:
        conn.collect(socket_timeout=5)  # Celery 5.7 ignores every error of this call
    except Exception:
        pass
    # the state C60 needs: the task channel was not closed, still holds the message, and is detached
    assert not task_channel.closed
    assert task_channel.qos._delivered
    assert task_channel.connection is not None and task_channel.connection.client is None

    conn.close()  # Celery 5.7 ignores only connection and channel errors here; kombu's raised AttributeError
    with pytest.raises(conn.connection_errors):  # the late ack is logged by Celery ("Couldn't ack")
        received[0].ack()
