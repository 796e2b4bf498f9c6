"""Details of the admin run trace (tester finding 12): rollback results per entry (a "compensated" badge,
the rollback error), a loop of a failed workflow not shown as running, the workflow error's stack as
readable text, and one kind of dash for empty values in the actor list."""

from __future__ import annotations

import pytest
from django.urls import reverse

from rivet_workflows.engine.model import definitions as d

RELEASED: list = []


def _release(_rollback_ctx, output):
    RELEASED.append(output)


def _hold_rollback(_rollback_ctx, _output):
    raise RuntimeError("hold service down")


def _declined(_step):
    raise RuntimeError("card declined")


async def saga_run(ctx):
    await ctx.rollback_checkpoint("saga")
    await ctx.step(name="reserve", run=lambda s: "r-1", rollback=_release)
    await ctx.step(name="hold", run=lambda s: "h-1", rollback=_hold_rollback)

    async def each(lctx, i):
        await lctx.step(name="charge", run=_declined, max_retries=0)
        return d.Loop.break_(i)

    await ctx.loop(name="charge-loop", state=0, run=each)


registry = d.setup(use={"saga": d.actor(state={}, run=d.workflow(saga_run))})


@pytest.fixture
def admin_client_(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    return client


@pytest.fixture
def declined(rivet):
    """A saga whose charge failed inside the loop: reserve was compensated, hold's rollback raised."""
    RELEASED.clear()
    rivet.configure(REGISTRY="tests.admin.test_trace_details.registry")
    handle = rivet.client.saga.get_or_create("s1")
    rivet.drain()
    assert handle.workflow_state() == "failed"
    assert RELEASED == ["r-1"]
    return handle


def page(client, handle) -> str:
    return client.get(reverse("admin:rivet_workflows_actor_change", args=[handle.actor_id])).content.decode()


def test_trace_shows_rollback_results(admin_client_, declined):
    html = page(admin_client_, declined)
    assert 'data-key="reserve" data-status="completed" data-rollback="compensated"' in html
    assert 'data-key="hold" data-status="completed" data-rollback="rollback failed"' in html
    assert ">compensated</span>" in html and ">rollback failed</span>" in html
    assert "RuntimeError: hold service down" in html  # the rollback error, readable


def test_a_loop_of_a_failed_workflow_is_not_running(admin_client_, declined):
    html = page(admin_client_, declined)
    assert 'data-key="charge-loop" data-status="failed"' in html
    assert 'data-status="running"' not in html


def test_workflow_error_stack_is_readable_text(admin_client_, declined):
    html = page(admin_client_, declined)
    start = html.index('id="rivet-workflow-error"')
    box = html[start : html.index("</div>\n", html.index("</pre>", start))]
    assert "RuntimeError: card declined" in box
    assert "Traceback" in box or "File &quot;" in box
    assert "\\n" not in box  # the stack keeps its line breaks, not escaped JSON on one line
    assert "&quot;stack&quot;" not in box
    assert "<em>Cause</em>" in box  # the step's own error, nested in the metadata, has its own blocks


def test_actor_list_uses_one_dash_for_empty_values(admin_client_, rivet):
    rivet.client.counter.get_or_create("c1")  # no workflow: nothing to wait on, no wake-up
    html = admin_client_.get(reverse("admin:rivet_workflows_actor_changelist")).content.decode()
    row = html[html.index("[&quot;c1&quot;]</span></a>") :]
    row = row[: row.index("</tr>")]
    assert "—" in row and ">-<" not in row


def _button(html: str, marker: str) -> str:
    """The opening tag of the button whose attributes contain ``marker``."""
    start = html.index(marker)
    return html[html.rindex("<button", 0, start) : html.index(">", start) + 1]


def test_a_rolled_back_run_disables_recover_and_later_replays_with_the_reason(admin_client_, declined):
    html = page(admin_client_, declined)
    recover = _button(html, 'id="rivet-recover"')
    assert " disabled " in recover and "refused: rolled back" in recover and "&#x27;reserve&#x27;" in recover
    # a replay from the earliest compensated step (or before it, or of everything) redoes the undone work
    assert "disabled" not in _button(html, 'data-entry="reserve"')
    assert "disabled" not in _button(html, 'id="rivet-replay-all"')
    for later in ("hold", "charge-loop/~0/charge"):  # would carry on from work already undone
        button = _button(html, f'data-entry="{later}"')
        assert " disabled " in button and "refused: rolled back" in button, later
        assert "replay from &#x27;reserve&#x27;" in button


def test_the_buttons_the_page_enables_are_the_repairs_the_engine_allows(admin_client_, declined, rivet):
    from rivet_workflows.engine.model import errors
    from rivet_workflows.engine.operate import repairs

    html = page(admin_client_, declined)
    for key in ("hold", "charge-loop/~0/charge"):
        assert " disabled " in _button(html, f'data-entry="{key}"')
        with pytest.raises(errors.WorkflowRolledBackError):
            repairs.replay(rivet.runtime, declined.actor_id, key)
    with pytest.raises(errors.WorkflowRolledBackError):
        repairs.recover(rivet.runtime, declined.actor_id)
    repairs.replay(rivet.runtime, declined.actor_id, "reserve")  # enabled, and allowed


def test_trace_statuses_are_the_api_vocabulary_and_values_show_no_storage_tags(admin_client_, rivet):
    from tests.api import registry as api_registry

    rivet.configure(REGISTRY="tests.api.registry.registry")
    handle = rivet.client.ledger.get_or_create("l1")
    rivet.drain()
    handle.send("approval", "first")
    rivet.drain()
    handle.send("approval", "second")
    rivet.drain()
    assert handle.workflow_state() == "completed"
    html = page(admin_client_, handle)
    for key, status in (
        ("settle", "received"),  # one row per queue wait (docs/howto/admin.md)
        ("confirm", "received"),
        ("done", "completed"),
        ("cool-off", "completed"),
    ):
        assert f'data-key="{key}" data-status="{status}"' in html, key
    assert "recorded" not in html
    assert "__rw__" not in html
    assert "&quot;amount&quot;: &quot;19.90&quot;" in html  # plain JSON, with the type named below it
    assert "types: /amount decimal, /due datetime, /lines tuple" in html
    assert api_registry.DUE.isoformat() in html
