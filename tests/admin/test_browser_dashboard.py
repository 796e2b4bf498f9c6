"""A real browser (Debian's chromium via Playwright) reads the admin dashboard and runs a bulk recover.

The dashboard is opened from the app index: its chart (inline SVG) shows the hour's completions and
failures, its tables the counts, the failing step and the expired lease. Then, on the actor list, the
failed workflows are selected, "Recover selected failed workflows" asks for confirmation and a reason,
and the message reports them recovered; each has a ``bulk_recover`` audit row. The dashboard is saved as
docs/dashboard.png when that file is missing or with RIVET_UPDATE_SCREENSHOTS=1. Skipped without chromium.
"""

from __future__ import annotations

import os
import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from rivet_workflows import models
from tests.api import registry as test_registry

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "dashboard.png"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="chromium is not installed"),
]


def _history(rivet):
    """An hour of work: orders completed and failed at different minutes, counters, and one stuck order."""
    now = rivet.runtime.store.now()
    test_registry.FLAGS["broken"] = True
    failed = [rivet.client.order.get_or_create(f"checkout-{i}") for i in range(3)]
    rivet.drain()
    test_registry.FLAGS["broken"] = False
    done = [rivet.client.order.get_or_create(f"order-{i}") for i in range(24)]
    rivet.drain()
    for i, handle in enumerate(done):  # spread the completions over the hour
        models.Actor.objects.filter(pk=handle.actor_id).update(
            updated_at=now - timedelta(minutes=(i * i) % 37 + 2)
        )
    for i, handle in enumerate(failed):
        models.Actor.objects.filter(pk=handle.actor_id).update(updated_at=now - timedelta(minutes=4 + 9 * i))
    for i in range(5):
        rivet.client.counter.get_or_create(f"c{i}")
    stuck = rivet.client.waiter.get_or_create("stuck")
    rivet.drain()
    models.Actor.objects.filter(pk=stuck.actor_id).update(
        lease_owner="worker-7@host",
        lease_expires_at=now - timedelta(seconds=40),
        wake_at=now - timedelta(minutes=2),
    )
    return failed


def test_dashboard_and_a_bulk_recover_in_the_browser(rivet, live_server, django_user_model, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    django_user_model.objects.create_superuser("admin", password="admin-pw")
    failed = _history(rivet)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(20_000)
        try:
            page.goto(f"{live_server.url}/admin/login/?next=/admin/rivet_workflows/")
            page.fill("#id_username", "admin")
            page.fill("#id_password", "admin-pw")
            page.click("input[type=submit]")
            page.locator("a", has_text="Dashboard").first.click()  # from the app index
            page.wait_for_selector("#rivet-chart")
            assert page.url.endswith("/admin/rivet_workflows/dashboard/")
            assert page.locator("#rivet-failed-hour").inner_text() == "3"
            assert page.locator("#rivet-completed-hour").inner_text() == "24"
            assert page.locator("#rivet-chart rect.rivet-bar-failed").count() == 3
            assert page.locator("#rivet-chart rect.rivet-bar-completed").count() >= 8
            box = page.locator("#rivet-chart").bounding_box()
            assert box is not None and box["width"] > 600  # drawn, not collapsed
            assert page.locator("#rivet-expired-count").inner_text() == "1"
            assert "charge" in page.locator("#rivet-failing").inner_text()
            assert "order" in page.locator('#rivet-counts tr[data-type="order"]').inner_text()
            page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
            if os.environ.get("RIVET_UPDATE_SCREENSHOTS") == "1" or not SCREENSHOT.exists():
                SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SCREENSHOT), full_page=True)

            # bulk recover of the failed workflows, with a confirmation page
            page.goto(f"{live_server.url}/admin/rivet_workflows/actor/?workflow_state__exact=failed")
            page.check("#action-toggle")  # select every row shown
            page.select_option("select[name=action]", "recover_selected")
            page.click("button[name=index]")
            page.wait_for_selector("#rivet-bulk-confirm")
            assert page.locator("#rivet-bulk-actors tbody tr").count() == 3
            assert page.locator("#rivet-bulk-actors").inner_text().count("failed") == 3  # nothing done yet
            page.fill("#rivet-bulk-reason", "payment provider fixed")
            page.click("#rivet-bulk-submit")
            page.wait_for_selector(".messagelist .success")
            assert "Bulk recover: 3 done" in page.locator(".messagelist").inner_text()
        except BaseException:
            page.screenshot(path="/tmp/rivet-dashboard-failure.png", full_page=True)
            raise
        finally:
            browser.close()
    for handle in failed:
        (row,) = rivet.runtime.store.operator_actions(handle.actor_id)
        assert (row.action, row.who, row.reason) == ("bulk_recover", "admin", "payment provider fixed")
    rivet.drain()
    assert [h.workflow_state() for h in failed] == ["completed"] * 3
