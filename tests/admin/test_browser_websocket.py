"""The trace page under ASGI (daphne + Channels) updates over its WebSocket in a real browser.

A daphne server runs in a forked process (channels' ``DaphneProcess``) together with a worker thread that
drains due work (once the test opens its gate), so the executor, the in-memory channel layer and the consumer share one process. The test
opens the trace of a failed workflow, removes the cause (a marker file the step checks), clicks "Replay
from this step" and sees the page switch to completed and list the ``charged`` event pushed by the step,
while its live mode says "websocket" (no polling). Skipped when chromium or Playwright is missing.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.admin.test_browser import CHROMIUM
from tests.api import registry as test_registry

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="chromium is not installed"),
]


GATE_ENV = "RIVET_TEST_WORKER_GATE"


def _drain_forever() -> None:
    from rivet_workflows.django_runtime import get_runtime
    from rivet_workflows.engine.runtime import executor

    gate = os.environ.get(GATE_ENV, "")
    while True:
        try:
            if not gate or os.path.exists(gate):  # the test opens the gate once the page listens
                executor.drain(get_runtime(), timeout=0.2)
        except Exception:  # keep the stand-in worker alive; the test asserts the outcome
            pass
        time.sleep(0.05)


def server_application():
    """Runs in the daphne child process: the project's ASGI app (+ static files) and a worker thread."""
    from channels.routing import get_default_application
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    threading.Thread(target=_drain_forever, name="stand-in-worker", daemon=True).start()
    return ASGIStaticFilesHandler(get_default_application())


@contextlib.contextmanager
def trace_page(actor_id: str, route_sockets: Callable[[Any], None] | None = None) -> Iterator[Any]:
    """A daphne server (``server_application``) and a Chromium page logged in as ``admin`` on the trace page
    of ``actor_id``; ``route_sockets`` (Playwright's ``page.route_web_socket`` handler) sees the page's
    WebSockets when given. Yields the page."""
    sync_api = pytest.importorskip("playwright.sync_api")
    from daphne.testing import DaphneProcess

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
                if route_sockets is not None:
                    page.route_web_socket(re.compile(r".*/ws/rivet/actors/.*"), route_sockets)
                page.goto(f"{base}/admin/login/?next=/admin/rivet_workflows/actor/{actor_id}/change/")
                page.fill("#id_username", "admin")
                page.fill("#id_password", "admin-pw")
                page.click("input[type=submit]")
                yield page
            finally:
                browser.close()
    finally:
        server.terminate()
        server.join(timeout=10)


def test_trace_updates_over_the_websocket(rivet, transactional_db, django_user_model, tmp_path, monkeypatch):
    pytest.importorskip("playwright.sync_api")
    marker = tmp_path / "payment-service-broken"
    marker.write_text("misconfigured")
    monkeypatch.setenv(test_registry.BROKEN_FILE_ENV, str(marker))
    gate = tmp_path / "worker-gate"
    monkeypatch.setenv(GATE_ENV, str(gate))
    django_user_model.objects.create_superuser("admin", password="admin-pw")
    handle = rivet.client.order.get_or_create("checkout-2002")
    rivet.drain()
    assert handle.workflow_state() == "failed"

    with trace_page(handle.actor_id) as page:
        page.wait_for_selector('#rivet-live-mode:text-is("websocket")')
        assert page.locator("#rivet-workflow-state").get_attribute("data-state") == "failed"

        marker.unlink()  # fix the cause
        page.locator('li[data-key="charge"] button.rivet-replay-step').click()
        page.click("#rivet-replay-confirm")  # the plan page: confirm it
        page.wait_for_selector(".messagelist .success")
        page.wait_for_selector('#rivet-live-mode:text-is("websocket")')
        assert page.locator("#rivet-workflow-state").get_attribute("data-state") == "sleeping"
        gate.write_text("go")  # the reloaded page listens again: let the worker run the workflow
        page.wait_for_selector('#rivet-workflow-state[data-state="completed"]')
        page.wait_for_selector('#rivet-events li:has-text("charged")')
        assert "[1]" in page.locator("#rivet-events li").first.inner_text()
        assert page.locator("#rivet-live-mode").inner_text() == "websocket"
    assert handle.workflow_state() == "completed"


def test_the_trace_page_reconnects_after_losing_its_websocket(rivet, transactional_db, django_user_model):
    """A trial finding: after the ASGI server restarted, the trace page polled for the rest of its life. The
    browser's socket is routed through Playwright, which closes the first connection as a server going
    away would (1012, service restart): the page polls, then connects again and is live."""
    pytest.importorskip("playwright.sync_api")
    django_user_model.objects.create_superuser("admin", password="admin-pw")
    handle = rivet.client.order.get_or_create("checkout-2003")
    sockets = []

    def through(route):
        route.connect_to_server()
        sockets.append(route)

    with trace_page(handle.actor_id, through) as page:
        page.wait_for_selector('#rivet-live-mode:text-is("websocket")')
        assert len(sockets) == 1
        sockets[0].close(code=1012, reason="service restart")
        page.wait_for_selector('#rivet-live-mode:text-is("polling every 2 s")')
        page.wait_for_selector('#rivet-live-mode:text-is("websocket")')  # within about a second
        assert len(sockets) == 2
