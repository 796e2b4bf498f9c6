"""A sweeping process for the schedule tests: ``python -m tests.integration.schedule_worker SECONDS``.

Sweeps the schedules of the test database (``DATABASE_URL`` or ``RIVET_SQLITE_PATH``) for SECONDS with
``data_schedules.fire_due``. The ``counter`` actor's ``bump`` action records each tick it served in its
state; with ``SCHEDULE_HANG_FILE`` set it writes that file and hangs instead (a worker to kill mid-fire).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from rivet_workflows.engine.model.definitions import actor, setup


def bump(c, fire) -> None:
    hang = os.environ.get("SCHEDULE_HANG_FILE")
    if hang:
        Path(f"{hang}.tmp").write_text(fire.scheduled_at.isoformat())
        os.replace(f"{hang}.tmp", hang)  # whole, for the test polling it
        time.sleep(600)
    c.state["ticks"].append(fire.scheduled_at.isoformat())


registry = setup(use={"counter": actor(state={"ticks": []}, actions={"bump": bump})})


def runtime():
    """A runtime on the test database's store and ``registry``."""
    from rivet_workflows import storage
    from rivet_workflows.driver.dispatch import LocalDispatcher
    from rivet_workflows.engine.runtime.runtime import Runtime, Settings

    return Runtime(storage.store_for(poll_interval=0.01), LocalDispatcher(), registry, settings=Settings())


def main(seconds: float) -> None:
    import django

    django.setup()
    from rivet_workflows.engine.actor import data_schedules

    rt = runtime()
    end = time.monotonic() + seconds
    fired = 0
    while time.monotonic() < end:
        try:
            fired += data_schedules.fire_due(rt, 100)
        except Exception as exc:  # SQLite "database is locked" under contention: the next pass retries
            print(f"sweep failed: {exc!r}", flush=True)
        time.sleep(0.01)
    print(f"fired {fired}", flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]))
