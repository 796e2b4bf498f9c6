"""After "Replay from this step" the trace page's header and buttons follow the run live (case C63).

A daphne server runs in a forked process with a stand-in Celery worker thread (once the test opens its
gate): it claims due actors and runs them as ``tasks.run_actor`` does, with a warm queue wait, so a run
that reaches a queue wait with no message keeps the lease for the warm window and then gives it back in
a commit that writes no history entry. On SQLite, which has no LISTEN/NOTIFY, the stand-in's store listens
for the whole window as PostgreSQL does when no message comes. The test clicks "Replay from this step",
sees the header say "running (lease until ...)" while the run holds the lease, and then, without a reload
and long before the page's slow re-check poll, "sleeping" / "idle" with the buttons of a sleeping run.
Skipped when chromium or Playwright is missing.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.admin.test_browser import CHROMIUM
from tests.api import registry as test_registry

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="chromium is not installed"),
]

GATE_ENV = "RIVET_TEST_WORKER_GATE"
#: seconds a run with no message keeps the lease in its queue wait (the Celery worker's WARM_WAIT)
WARM_WAIT = 2.0
#: the header's executor field ("running (lease until ...)" or "idle")
EXECUTOR = 'dl:has(> dt:text-is("Executor")) > dd'


def _listen_like_postgres(store, actor_id, names, timeout):  # noqa: ARG001 - DjangoStore's signature
    """``wait_for_messages`` on SQLite: no notification can come, so wait out the window (as a PostgreSQL
    LISTEN does when no message is sent) and report that none came."""
    time.sleep(timeout)
    return False


def _work_forever() -> None:
    from django.db import connection

    from rivet_workflows.django_runtime import get_runtime
    from rivet_workflows.engine.runtime import executor
    from rivet_workflows.storage import DjangoStore

    if connection.vendor != "postgresql":
        DjangoStore.wait_for_messages = _listen_like_postgres
    gate = os.environ.get(GATE_ENV, "")
    while True:
        try:
            if not gate or os.path.exists(gate):  # the test opens the gate once the page listens
                runtime = get_runtime()
                lease = runtime.settings.lease_seconds
                for actor_id, token in runtime.store.claim_due(runtime.owner, 8, lease):
                    live_until = datetime.now(UTC) + timedelta(seconds=lease / 3)
                    executor.run_actor(
                        runtime, actor_id, token=token, live_until=live_until, warm_wait=WARM_WAIT
                    )
        except Exception:  # keep the stand-in worker alive; the test asserts the outcome
            pass
        time.sleep(0.05)


def server_application():
    """Runs in the daphne child process: the project's ASGI app (+ static files) and the worker thread."""
    from channels.routing import get_default_application
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    threading.Thread(target=_work_forever, name="stand-in-worker", daemon=True).start()
    return ASGIStaticFilesHandler(get_default_application())


def test_header_and_buttons_follow_the_run_after_replay_without_a_reload(
    rivet, transactional_db, django_user_model, tmp_path, monkeypatch
):
    sync_api = pytest.importorskip("playwright.sync_api")
    from daphne.testing import DaphneProcess

    from rivet_workflows.admin import actors

    # the page's slow re-check must not be what updates it: only the push may
    monkeypatch.setattr(actors, "FALLBACK_POLL_MS", 120_000)
    marker = tmp_path / "payment-service-broken"
    marker.write_text("misconfigured")
    monkeypatch.setenv(test_registry.BROKEN_FILE_ENV, str(marker))
    gate = tmp_path / "worker-gate"
    monkeypatch.setenv(GATE_ENV, str(gate))
    django_user_model.objects.create_superuser("admin", password="admin-pw")
    handle = rivet.client.shipment.get_or_create("ship-3003")
    rivet.drain()
    assert handle.workflow_state() == "failed"

    server = DaphneProcess("localhost", server_application)
    server.start()
    try:
        assert server.ready.wait(timeout=30), "daphne did not start"
        base = f"http://localhost:{server.port.value}"
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM,
                args=[
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                ],
            )
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.set_default_timeout(20_000)
                page.goto(f"{base}/admin/login/?next=/admin/rivet_workflows/actor/{handle.actor_id}/change/")
                page.fill("#id_username", "admin")
                page.fill("#id_password", "admin-pw")
                page.click("input[type=submit]")
                page.wait_for_selector('#rivet-live-mode:text-is("websocket")')

                marker.unlink()  # fix the cause
                page.locator('li[data-key="charge"] button.rivet-replay-step').click()
                page.click("#rivet-replay-confirm")  # the plan page: confirm it
                page.wait_for_selector(".messagelist .success")
                page.wait_for_selector('#rivet-live-mode:text-is("websocket")')
                assert page.locator("#rivet-workflow-state").get_attribute("data-state") == "sleeping"
                page.evaluate("window.rivetNoReload = true")  # gone if the page reloads

                gate.write_text("go")  # the worker runs the replay: charge, then the queue wait
                page.wait_for_selector(f'{EXECUTOR}:has-text("running (lease until")', timeout=10_000)
                assert page.locator('li[data-key="charge"] button.rivet-replay-step').is_disabled()

                # the run gives the lease back (no entry written): the header and buttons follow at once
                page.wait_for_selector(f'{EXECUTOR}:text-is("idle")', timeout=WARM_WAIT * 1000 + 6000)
                page.wait_for_selector('#rivet-workflow-state[data-state="sleeping"]', timeout=2_000)
                assert page.locator('li[data-key="charge"] button.rivet-replay-step').is_enabled()
                assert page.locator("#rivet-replay-all").is_enabled()
                recover = page.locator("#rivet-recover")
                assert recover.is_disabled()
                assert "only a failed workflow can be recovered" in recover.get_attribute("title")
                assert page.evaluate("window.rivetNoReload === true")
                assert page.locator("#rivet-live-mode").inner_text() == "websocket"
            finally:
                browser.close()
    finally:
        server.terminate()
        server.join(timeout=10)
    record = handle.record()
    assert record.workflow_state == "sleeping" and record.waiting_for == ["approval"]
    assert handle.state() == {"charged": 1}
