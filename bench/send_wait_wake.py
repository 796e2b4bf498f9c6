"""Wake latency of a waiting send (case C55): how long after the workflow's commit that completes the
message the sender's ``handle.send(..., wait=True)`` returns.

``DATABASE_URL=postgres://.../db python -m bench.send_wait_wake [--sends 40]`` (migrates that database).
Each send goes to an actor whose workflow takes the message, waits 0.2-1.2 s in a step (so the sender's
backoff has reached its cap) and completes it; the latency is the sender's return (wall clock) minus the
message's ``completed_at`` (the database clock of the same machine). Prints the median, p90 and max in ms.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import threading
import time
from datetime import UTC, datetime

from rivet_workflows.engine.model import base_store

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sends", type=int, default=40)
    parser.add_argument("--poll", action="store_true", help="pause by polling (the BaseStore default)")
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    from rivet_workflows import storage
    from rivet_workflows.driver.dispatch import LocalDispatcher
    from rivet_workflows.engine.model import definitions as d
    from rivet_workflows.engine.runtime import executor
    from rivet_workflows.engine.runtime.runtime import Runtime, Settings

    async def run(ctx):
        message = await ctx.queue.next("ask", "ask", completable=True)
        await ctx.step("think", lambda s: time.sleep(message.body))
        await message.complete("ok")

    if args.poll:
        for cls in (storage.DjangoStore, storage.PostgresStore):
            cls.watch_sends = base_store.BaseStore.watch_sends
    registry = d.setup(use={"wake_bench": d.actor(queues={"ask": d.queue()}, run=d.workflow(run))})
    runtime = Runtime(storage.store_for(), LocalDispatcher(), registry, settings=Settings())
    print("store:", type(runtime.store).__name__, connection.vendor)
    stop = threading.Event()

    def drainer() -> None:
        while not stop.is_set():
            executor.drain(runtime, timeout=1.0)
            time.sleep(0.005)
        runtime.store.close_thread_connection()

    thread = threading.Thread(target=drainer, daemon=True)
    thread.start()
    client = registry.client()
    latencies = []
    wrong = 0
    run_id = f"{os.getpid()}-{time.time():.0f}"
    try:
        for i in range(args.sends):
            handle = client.wake_bench.get_or_create(f"{run_id}-{i}")
            result = handle.send("ask", random.uniform(0.2, 1.2), wait=True, timeout=10)
            returned = datetime.now(UTC)
            record = _messages(handle.actor_id)[0]
            if result.status != "completed":  # main before C55's follow-up: a race reported timed_out
                wrong += 1
                continue
            latencies.append((returned - record.completed_at).total_seconds() * 1000)
    finally:
        stop.set()
        thread.join()
    latencies.sort()
    p90 = latencies[int(0.9 * (len(latencies) - 1))]
    print(
        f"waiting-send wake latency over {len(latencies)} sends: median {statistics.median(latencies):.1f} ms, "
        f"p90 {p90:.1f} ms, max {latencies[-1]:.1f} ms; {wrong} completed sends reported timed_out"
    )


def _messages(actor_id: str):
    from rivet_workflows import models
    from rivet_workflows.storage import mapper

    return [mapper.message_from_model(m) for m in models.QueueMessage.objects.filter(actor_id=actor_id)]


if __name__ == "__main__":
    main()
