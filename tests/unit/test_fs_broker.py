"""The embedded broker's filesystem transport publishes whole message files only."""

from __future__ import annotations

import threading

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
    received: list[dict] = []
    done = threading.Event()

    def consume() -> None:
        with _connection(tmp_path) as conn:
            q = conn.SimpleQueue("rivet")
            while len(received) < count:
                message = q.get(timeout=10)  # raises Empty on a stall, JSONDecodeError on a torn file
                received.append(message.payload)
                message.ack()
        done.set()

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    with _connection(tmp_path) as conn:
        q = conn.SimpleQueue("rivet")
        for i in range(count):
            q.put({"i": i, "pad": "x" * 2000})
    assert done.wait(30)
    assert sorted(m["i"] for m in received) == list(range(count))
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
