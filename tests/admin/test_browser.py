"""A real browser (Debian's chromium driven by Playwright) repairs a failed workflow from the admin alone.

It logs in, finds the failed actor in the list, opens its run trace, reads the step's error, "fixes the
cause" (flips the flag the step reads), clicks "Replay from this step", reads the plan (cancelling once:
nothing changes), confirms it and watches the trace update live
(polling fallback: the live server speaks WSGI only) until the workflow is completed. The final page is
saved as a screenshot (docs/inspector-trace.png when it is missing or with RIVET_UPDATE_SCREENSHOTS=1, so
ordinary runs leave the tree clean). Skipped when chromium or Playwright is missing.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from tests.api import registry as test_registry

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "inspector-trace.png"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="chromium is not installed"),
]


class Worker(threading.Thread):
    """Stands in for a Celery worker: drains due work every few milliseconds until stopped."""

    def __init__(self, rivet):
        super().__init__(daemon=True)
        self.rivet = rivet
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self):
        from django.db import connections

        try:
            while not self.stop.is_set():
                self.rivet.drain(timeout=0.2)
                time.sleep(0.05)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            connections.close_all()


def test_repair_a_failed_workflow_from_the_admin(rivet, live_server, django_user_model, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    django_user_model.objects.create_superuser("admin", password="admin-pw")

    test_registry.FLAGS["broken"] = True  # the payment service is misconfigured
    handle = rivet.client.order.get_or_create("checkout-1001")
    rivet.drain()
    assert handle.workflow_state() == "failed"

    worker = Worker(rivet)
    worker.start()
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
            page.goto(f"{live_server.url}/admin/login/?next=/admin/rivet_workflows/actor/")
            page.fill("#id_username", "admin")
            page.fill("#id_password", "admin-pw")
            page.click("input[type=submit]")

            # find the failed workflow in the list and open its trace
            page.locator("#changelist-filter a", has_text="failed").click()  # workflow-state filter
            page.locator("#result_list a", has_text="checkout-1001").click()
            state = page.locator("#rivet-workflow-state")
            assert state.get_attribute("data-state") == "failed"
            charge = page.locator('li[data-key="charge"]')
            assert charge.get_attribute("data-status") == "exhausted"
            assert "card declined" in charge.locator("pre.rivet-error").first.inner_text()

            # "Replay from this step" shows the plan first; cancel leaves the run as it was
            page.fill("#rivet-reason", "payment service fixed")
            charge.locator("button.rivet-replay-step").click()
            plan = page.locator("#rivet-replay-plan")
            assert plan.get_attribute("data-entry") == "charge"
            assert page.locator("#rivet-replay-rerun li").all_inner_texts() == ["charge"]
            assert "new idempotency key" in plan.inner_text()
            assert page.input_value("#rivet-replay-reason") == "payment service fixed"
            page.click("#rivet-replay-cancel")
            page.wait_for_selector('#rivet-workflow-state[data-state="failed"]')
            time.sleep(0.5)  # the worker would have picked a replay up by now
            page.reload()
            assert page.locator("#rivet-workflow-state").get_attribute("data-state") == "failed"
            assert page.locator('li[data-key="charge"]').get_attribute("data-status") == "exhausted"
            assert "No operator actions." in page.inner_text("#rivet-live")

            test_registry.FLAGS["broken"] = False  # fix the cause
            page.locator('li[data-key="charge"] button.rivet-replay-step').click()
            page.wait_for_selector("#rivet-replay-plan")
            page.fill("#rivet-replay-reason", "payment service fixed")
            page.click("#rivet-replay-confirm")
            page.wait_for_selector(".messagelist .success")
            assert "Replaying from step 'charge'" in page.locator(".messagelist").inner_text()

            # the worker runs the workflow; the open page updates itself until it shows completed
            page.wait_for_selector('#rivet-workflow-state[data-state="completed"]')
            page.wait_for_selector('li[data-key="ship"][data-status="completed"]')
            assert page.locator('li[data-key="fetch-order"]').get_attribute("data-status") == "completed"
            assert page.locator('li[data-key="charge"]').get_attribute("data-status") == "completed"
            assert page.locator('li[data-key="pack-items/~1/pack"]').count() == 1
            page.screenshot(path=str(tmp_path / "inspector-trace.png"), full_page=True)
            if os.environ.get("RIVET_UPDATE_SCREENSHOTS") == "1" or not SCREENSHOT.exists():
                SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SCREENSHOT), full_page=True)
        except BaseException:
            page.screenshot(path="/tmp/rivet-browser-failure.png", full_page=True)
            raise
        finally:
            browser.close()
            worker.stop.set()
            worker.join(timeout=10)
    assert worker.error is None, worker.error
    assert handle.workflow_state() == "completed"
    assert handle.record().output == {"order": 42, "status": "shipped"}
    (action,) = handle.runtime.store.operator_actions(handle.actor_id)
    assert (action.action, action.who, action.reason) == ("replay", "admin", "payment service fixed")
