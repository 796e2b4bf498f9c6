"""The admin trace page shows each durable stream's last items (DESIGN.md section 17)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from rivet_workflows.engine.model import definitions as d


def _think(step):
    for n in range(12):
        step.stream("tokens").write(f"tok{n}-a{step.attempt}")
    if step.attempt == 1:
        raise RuntimeError("flaky model")
    return "ok"


async def _run(ctx):
    await ctx.stream("status").write("started")
    await ctx.step("think", _think, retry_backoff_base=0)


registry = d.setup(use={"agent": d.actor(run=d.workflow(_run))})


@pytest.fixture
def admin_client_(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    return client


def test_the_trace_page_lists_each_stream_with_its_last_items(admin_client_, rivet):
    rivet.configure(REGISTRY=f"{__name__}.registry")
    handle = rivet.client.agent.get_or_create("a")
    rivet.drain()
    assert handle.workflow_state() == "completed"
    html = admin_client_.get(
        reverse("admin:rivet_workflows_actor_change", args=[handle.actor_id])
    ).content.decode()
    section = html[html.index("<h2>Streams</h2>") :]
    assert "status (1 item, closed)" in section
    assert "tokens (24 items, closed)" in section
    tokens = section[section.index('data-stream="tokens"') :]
    tokens = tokens[: tokens.index("</table>")]
    shown = re.findall(r"tok(\d+)-a(\d)", tokens)
    assert shown == [(str(n), "2") for n in range(2, 12)]  # the last ten items, oldest first
    assert "(discarded)" not in tokens  # the last ten are the completing attempt's
    assert "workflow" in section[: section.index('data-stream="tokens"')]  # written by workflow code
