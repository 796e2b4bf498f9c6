"""The trace page keeps updating when WebSocket events cannot reach it (tester finding 4).

The default example setup runs daphne with the in-memory channel layer and Celery workers in other
processes: their history pushes never reach the page's WebSocket. Here daphne runs in a forked process
configured with the Celery dispatcher (so the page knows work runs elsewhere) and no worker of its own; the
test process plays the separate worker: it recovers the failed workflow and runs it to completion. The open
page must say it polls beside the WebSocket and must show the workflow completed. Skipped when chromium or
Playwright is missing.
"""

from __future__ import annotations

import os

import pytest
from django.test import override_settings

from tests.admin.test_browser import CHROMIUM
from tests.api import registry as test_registry
from tests.conftest import run_in_threads

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="chromium is not installed"),
]

IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


def worker(rivet, handle) -> str:
    """The separate worker: recover the failed workflow, run it; return its workflow state."""
    from rivet_workflows.engine.operate import repairs

    repairs.recover(rivet.runtime, handle.actor_id)
    rivet.drain()
    return handle.workflow_state()


def server_application():
    """Runs in the daphne child process: the project's ASGI app (+ static files), no worker."""
    from channels.routing import get_default_application
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    return ASGIStaticFilesHandler(get_default_application())


def test_trace_polls_beside_an_in_memory_websocket(
    rivet, transactional_db, django_user_model, tmp_path, monkeypatch
):
    sync_api = pytest.importorskip("playwright.sync_api")
    from daphne.testing import DaphneProcess

    marker = tmp_path / "payment-service-broken"
    marker.write_text("misconfigured")
    monkeypatch.setenv(test_registry.BROKEN_FILE_ENV, str(marker))
    django_user_model.objects.create_superuser("admin", password="admin-pw")
    handle = rivet.client.order.get_or_create("checkout-3003")
    rivet.drain()
    assert handle.workflow_state() == "failed"

    # the server process inherits these settings: Celery workers elsewhere, in-memory channel layer
    rivet.configure(DISPATCHER="rivet_workflows.driver.dispatch.CeleryDispatcher")
    layers = override_settings(CHANNEL_LAYERS=IN_MEMORY)
    layers.enable()
    try:
        server = DaphneProcess("localhost", server_application)
        server.start()
    finally:
        layers.disable()
    rivet.configure()  # this process is the "separate worker": it runs work itself (LocalDispatcher)
    try:
        assert server.ready.wait(timeout=30), "daphne did not start"
        base = f"http://localhost:{server.port.value}"
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM,
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
            )
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.set_default_timeout(20_000)
                page.goto(f"{base}/admin/login/?next=/admin/rivet_workflows/actor/{handle.actor_id}/change/")
                page.fill("#id_username", "admin")
                page.fill("#id_password", "admin-pw")
                page.click("input[type=submit]")
                page.wait_for_selector('#rivet-live-mode:text("websocket + polling every 2 s")')
                assert "REDIS_URL" in page.locator("#rivet-live-mode").inner_text()
                assert page.locator("#rivet-workflow-state").get_attribute("data-state") == "failed"

                marker.unlink()  # fix the cause, then a worker in another process recovers and runs it
                # (on a thread: Playwright's sync API runs an event loop on this one, which Django refuses)
                assert run_in_threads(lambda _: worker(rivet, handle), 1) == ["completed"]
                page.wait_for_selector('#rivet-workflow-state[data-state="completed"]')
                assert page.locator('li[data-key="charge"]').get_attribute("data-status") == "completed"
            finally:
                browser.close()
    finally:
        server.terminate()
        server.join(timeout=10)
