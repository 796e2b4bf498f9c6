"""The inspector fits a 1400 px window (a new user's report): in a real Chromium, an actor with a very long
key, a long input and a long queue message body keeps the actor list's columns on screen and the run trace
(replay buttons included) no wider than the window. Skipped when chromium or Playwright is missing."""

from __future__ import annotations

import os
import re

import pytest

from tests.admin.test_browser import CHROMIUM
from tests.api import registry as test_registry

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="chromium is not installed"),
]

WIDTH = 1400
LONG_KEY = ["k" * 900, "tenant/with/slashes"]


def test_long_values_fit_a_1400_px_window(rivet, live_server, django_user_model):
    sync_api = pytest.importorskip("playwright.sync_api")
    django_user_model.objects.create_superuser("admin", password="admin-pw")
    test_registry.FLAGS["broken"] = True
    try:
        handle = rivet.client.order.get_or_create(LONG_KEY, input={"note": "n" * 5000})
        rivet.drain()
    finally:
        test_registry.FLAGS["broken"] = False
    assert handle.workflow_state() == "failed"
    handle.send("approval", {"blob": "b" * 5000, "text": "word " * 400})

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
        )
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 900})
            page.set_default_timeout(20_000)
            page.goto(f"{live_server.url}/admin/login/?next=/admin/rivet_workflows/actor/")
            page.fill("#id_username", "admin")
            page.fill("#id_password", "admin-pw")
            page.click("input[type=submit]")
            page.wait_for_url("**/admin/rivet_workflows/actor/**")
            page.wait_for_load_state("load")

            # the list: the key is cut short (whole key in the tooltip), the columns after it stay visible
            key = page.locator("#result_list .rivet-key").first
            sync_api.expect(key).to_have_text(re.compile(r"^\[\"k+…$"))  # retries until rendered
            assert len(key.inner_text()) <= 60
            assert key.get_attribute("title").startswith('["kkkk')
            assert "card declined" in page.locator("#result_list td.field-last_error").first.inner_text()
            results = page.locator("#changelist .results")
            assert results.evaluate("r => r.scrollWidth <= r.clientWidth")  # no column scrolled away

            # the trace page is no wider than the window; every replay button is inside the header's width
            key.click()
            page.wait_for_selector('li[data-key="charge"][data-status="exhausted"]')
            page.locator("details").evaluate_all("ds => ds.forEach(d => { d.open = true; })")
            assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
            header = page.locator("#header").bounding_box()
            for box in [b.bounding_box() for b in page.locator("button.rivet-replay-step").all()]:
                assert box["x"] + box["width"] <= header["x"] + header["width"]
        except BaseException:
            page.screenshot(path="/tmp/rivet-browser-layout-failure.png", full_page=True)
            raise
        finally:
            browser.close()
