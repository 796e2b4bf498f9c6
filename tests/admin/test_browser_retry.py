"""In a real Chromium: an operator opens the trace of a run a typo suspended, reads the code error and where
it was raised, and, once the fix is deployed, presses Retry with a reason; the run completes without any
compensation and the retry is in the trace's operator actions (DESIGN.md section 16). Skipped when chromium
or Playwright is missing."""

from __future__ import annotations

import os
import threading

import pytest

from tests.admin.test_browser import CHROMIUM
from tests.admin.test_suspended_everywhere import DONE, HERE

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="chromium is not installed"),
]


def test_retry_button_resumes_a_suspended_run_after_the_fix(rivet, live_server, django_user_model):
    sync_api = pytest.importorskip("playwright.sync_api")
    django_user_model.objects.create_superuser("admin", password="admin-pw")
    DONE.clear()
    rivet.configure(REGISTRY=f"{HERE}.broken", CODE_VERSION="v1")
    handle = rivet.client.order.get_or_create("o-browser")
    rivet.drain()
    assert handle.workflow_state() == "suspended"
    rivet.configure(REGISTRY=f"{HERE}.fixed", CODE_VERSION="v1")  # the fix, deployed without a new version

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(20_000)
            trace = f"/admin/rivet_workflows/actor/{handle.actor_id}/change/"
            page.goto(f"{live_server.url}/admin/login/?next={trace}")
            page.fill("#id_username", "admin")
            page.fill("#id_password", "admin-pw")
            page.click("input[type=submit]")
            page.wait_for_url(f"**{trace}")
            sync_api.expect(page.locator("#rivet-workflow-state")).to_have_attribute(
                "data-state", "suspended"
            )
            error = page.locator("#rivet-workflow-error")
            sync_api.expect(error).to_contain_text("Suspended by a code error")
            sync_api.expect(error).to_contain_text("AttributeError")
            page.fill("#rivet-reason", "typo fixed in 1.2.1")
            page.click("#rivet-retry")
            page.wait_for_url(f"**{trace}")
            sync_api.expect(page.locator(".messagelist")).to_contain_text("Retried")
            worker = threading.Thread(target=rivet.drain)  # the ORM refuses Playwright's event-loop thread
            worker.start()
            worker.join()
            page.reload()
            sync_api.expect(page.locator("#rivet-workflow-state")).to_have_attribute(
                "data-state", "completed"
            )
            sync_api.expect(page.locator("body")).to_contain_text("typo fixed in 1.2.1")
        finally:
            browser.close()
    assert DONE == ["reserve", "charge", "ship"]  # nothing compensated, nothing run twice
