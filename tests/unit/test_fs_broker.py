"""The embedded broker's filesystem transport publishes whole message files only."""

from __future__ import annotations

import threading
import uuid

from kombu import Connection

from rivet_workflows import fs_broker


def _connection(folder) -> Connection:
    return Connection(
        "filesystem://",
        transport=fs_broker.Transport,
        transport_options={
            "data_folder_in": str(folder),
            "data_folder_out": str(folder),
            "control_folder": str(folder / "control"),  # kombu's default is ./control in the cwd
            "store_processed": False,
            "polling_interval": 0.001,
        },
    )


def test_a_consumer_racing_the_producer_reads_every_message_whole(tmp_path):
    count = 300
    # kombu keeps bindings in a per-process state shared by every connection: a queue name used before in
    # this process (another folder) or bound by the other thread first would skip writing this folder's
    # exchange table and drop the messages. A fresh name, bound on disk before the threads start.
    queue = f"rivet-{uuid.uuid4().hex[:12]}"
    with _connection(tmp_path) as conn:
        conn.SimpleQueue(queue).close()
    received: list[dict] = []
    done = threading.Event()

    def consume() -> None:
        with _connection(tmp_path) as conn:
            q = conn.SimpleQueue(queue)
            while len(received) < count:
                message = q.get(timeout=10)  # raises Empty on a stall, JSONDecodeError on a torn file
                received.append(message.payload)
                message.ack()
        done.set()

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    with _connection(tmp_path) as conn:
        q = conn.SimpleQueue(queue)
        for i in range(count):
            q.put({"i": i, "pad": "x" * 2000})
    assert done.wait(30)
    assert sorted(m["i"] for m in received) == list(range(count))
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_the_exchange_table_is_never_seen_half_written_while_queues_bind_concurrently(tmp_path):
    """kombu creates ``control/<exchange>.exchange`` with ``"wb"`` before locking it; a publisher reading it
    in that window got an empty file (JSONDecodeError). Every read here must see a whole table, and every
    queue bound by the racing threads must end up in it."""
    errors: list[BaseException] = []
    stop = threading.Event()
    queues = [f"q{i}" for i in range(8)]

    def read_tables() -> None:
        with _connection(tmp_path) as conn:
            channel = conn.default_channel
            while not stop.is_set():
                try:
                    channel.get_table("celery")
                except BaseException as exc:  # noqa: BLE001 - any failure is the bug
                    errors.append(exc)
                    return

    def bind(queue: str) -> None:
        with _connection(tmp_path) as conn:
            conn.default_channel._queue_bind("celery", queue, None, queue)

    for _ in range(20):
        for table in (tmp_path / "control").glob("*.exchange"):
            table.unlink()
        stop.clear()
        reader = threading.Thread(target=read_tables)
        reader.start()
        binders = [threading.Thread(target=bind, args=(q,)) for q in queues]
        for t in binders:
            t.start()
        for t in binders:
            t.join()
        stop.set()
        reader.join()
        assert errors == []
        with _connection(tmp_path) as conn:
            bound = {row.queue for row in conn.default_channel.get_table("celery")}
        assert bound == set(queues)
    assert not [p for p in (tmp_path / "control").iterdir() if p.name.endswith(".tmp")]
