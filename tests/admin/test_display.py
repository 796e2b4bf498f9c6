"""What a new user reported about the admin inspector: keys shown unambiguously (JSON) and cut short in the
list, every time in one zone with the zone shown, and admin messages in proper English plurals."""

from __future__ import annotations

import html as html_lib
import re
from datetime import UTC, datetime

import pytest
from django.test import override_settings
from django.urls import reverse

from rivet_workflows import display
from rivet_workflows.engine.model import definitions as d


async def napper_run(ctx):
    await ctx.step("prepare", lambda s: "ready")
    await ctx.queue.next("wait-go", names=["go"])
    await ctx.sleep_until("nap", datetime(2099, 1, 2, 3, 4, 5, tzinfo=UTC))


registry = d.setup(use={"napper": d.actor(state={}, queues={"go": d.queue()}, run=d.workflow(napper_run))})


@pytest.fixture
def admin_client_(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    return client


def changelist(client, **query) -> str:
    return client.get(reverse("admin:rivet_workflows_actor_changelist"), query).content.decode()


def trace(client, handle) -> str:
    return client.get(reverse("admin:rivet_workflows_actor_change", args=[handle.actor_id])).content.decode()


def test_keys_are_json_so_a_list_and_a_slashed_string_differ(admin_client_, rivet):
    pair = rivet.client.counter.get_or_create([1, 2])
    slash = rivet.client.counter.get_or_create("1/2")
    html = changelist(admin_client_)
    assert "[1, 2]</span>" in html and "[&quot;1/2&quot;]</span>" in html
    assert ">1/2<" not in html
    assert "counter [1, 2]" in trace(admin_client_, pair)
    assert "counter [&quot;1/2&quot;]" in trace(admin_client_, slash)


def test_a_long_key_is_cut_short_in_the_list_with_the_whole_key_as_tooltip(admin_client_, rivet):
    key = ["k" * 900, "end"]
    handle = rivet.client.counter.get_or_create(key)
    html = changelist(admin_client_)
    cell = re.search(r'<span class="rivet-key" title="([^"]*)"[^>]*>([^<]*)</span>', html)
    assert cell is not None
    title, shown = map(html_lib.unescape, cell.groups())
    assert len(shown) <= display.KEY_CHARS and shown.endswith("…") and shown.startswith('["kkk')
    assert title == display.key_json(key)  # the whole key as the tooltip
    for column in ("workflow state", "waiting on", "wake at", "last error", "updated"):
        assert f">{column.capitalize()}<" in html or f">{column}<" in html, column
    page = trace(admin_client_, handle)
    assert "k" * 100 not in page.split('id="rivet-live"')[0]  # title and breadcrumbs cut short too
    assert 'title="[&quot;' + "k" * 900 in page  # the summary's tooltip has it whole


def test_every_time_on_the_trace_is_in_one_zone_with_the_zone_shown(admin_client_, rivet):
    rivet.configure(REGISTRY="tests.admin.test_display.registry")
    handle = rivet.client.napper.get_or_create("n1")
    rivet.drain()
    handle.send("go", {"ok": True})
    rivet.drain()
    assert handle.workflow_state() == "sleeping"
    with override_settings(TIME_ZONE="America/Chicago"):  # after configure(), which resets settings
        html = trace(admin_client_, handle)
        listed = changelist(admin_client_)
    # the sleep's deadline (2099-01-02 03:04:05 UTC) in Chicago time, like the step's start and finish
    assert "until 2099-01-01 21:04:05.000 CST" in html
    assert "+00:00" not in html and " UTC" not in html
    assert re.search(r"started \d\d:\d\d:\d\d\.\d{3} CST", html)
    assert re.search(r"finished \d\d:\d\d:\d\d\.\d{3} CST", html)
    assert re.search(r"Message 0 \(go, sent \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} CST\)", html)
    assert "Times in America/Chicago." in html
    wake = re.search(r"<dt>Wake at</dt><dd>([^<]*)</dd>", html).group(1)
    assert wake == "2099-01-01 21:04:05 CST"
    assert "2099-01-01 21:04:05 CST" in listed  # the list's wake-at column, same zone


def test_format_time_takes_naive_as_utc_and_shows_the_zone():
    with override_settings(TIME_ZONE="UTC"):
        assert display.format_time(datetime(2026, 1, 2, 3, 4, 5, 678000)) == "2026-01-02 03:04:05 UTC"
        aware = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
        assert display.format_time(aware, precise=True, date=False) == "03:04:05.678 UTC"
        assert display.format_time(None) == "—"


def test_admin_messages_use_proper_plurals(admin_client_, rivet):
    handle = rivet.failed_order()
    replay = reverse("admin:rivet_workflows_actor_replay", args=[handle.actor_id])
    text = admin_client_.post(replay, {"entry_id": "charge"}, follow=True).content.decode()
    assert "1 history entry deleted" in text
    rivet.drain()
    text = admin_client_.post(replay, {}, follow=True).content.decode()
    assert re.search(r"[2-9]\d* history entries deleted", text)
    assert "(y/ies)" not in text and "(s)" not in text
    handle = rivet.failed_order("o2")
    recover = reverse("admin:rivet_workflows_actor_recover", args=[handle.actor_id])
    text = admin_client_.post(recover, follow=True).content.decode()
    assert "1 step reset" in text and "(s)" not in text
