"""Case C49 in the admin: a finished entry's timing bar and duration stay as recorded however often the run
is woken and replayed afterwards."""

from __future__ import annotations

import re
import time

from django.urls import reverse

from rivet_workflows.engine.model import definitions as d

from .test_trace_details import admin_client_  # noqa: F401 - fixture


async def fanout_run(ctx):
    async def branch(c):
        return await c.step("work", lambda s: 1)

    await ctx.join("fanout", {"a": branch, "b": branch})
    await ctx.queue.next("first", "go")
    await ctx.queue.next("second", "go")
    await ctx.step("last", lambda s: "done")


registry = d.setup(use={"fanout": d.actor(queues={"go": d.queue()}, run=d.workflow(fanout_run))})


def _join_timing(client, handle) -> tuple[float, str]:
    """(bar width in percent, shown duration) of the join's trace row."""
    html = client.get(reverse("admin:rivet_workflows_actor_change", args=[handle.actor_id])).content.decode()
    row = html[html.index('data-key="fanout"') :]
    found = re.search(r'width: ([0-9.]+)%"></span></span>\s*<span>([^<]*)</span>', row)
    assert found, row[:800]
    return float(found.group(1)), found.group(2)


def test_a_finished_joins_timing_bar_does_not_grow_when_the_run_is_woken_again(admin_client_, rivet):  # noqa: F811
    rivet.configure(REGISTRY="tests.admin.test_trace_timings.registry")
    handle = rivet.client.fanout.get_or_create("f1")
    rivet.drain()
    width, took = _join_timing(admin_client_, handle)
    for body in ("one", "two"):
        time.sleep(0.3)  # a rewrite would stretch the join by this much
        handle.send("go", body)
        rivet.drain()
        later_width, later_took = _join_timing(admin_client_, handle)
        assert later_took == took
        assert later_width <= width
    assert handle.workflow_state() == "completed"
