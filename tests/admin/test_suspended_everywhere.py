"""A code error suspends the run (DESIGN.md section 16), seen from the user's side on the Django store: a typo in
an order workflow with compensations leaves it ``suspended`` with nothing compensated, and ``suspended`` is
shown and filtered everywhere a state is (``rivet list/show/check``, ``GET /actors``, the admin list, trace
and dashboard, the metrics gauge); it is retried by HTTP, the admin button and bulk action, ``rivet retry``,
each audited, and by itself once a fix is deployed with a new ``CODE_VERSION``."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from rivet_workflows import WorkflowFailure, states
from rivet_workflows.engine.model import definitions as d
from tests.admin.test_admin import admin_client_  # noqa: F401 - fixture

API = "/api/rivet"
LIST = "/admin/rivet_workflows/actor/"

#: what the steps and compensations did, in order
DONE: list[str] = []


def _step(name: str):
    def body(step):
        DONE.append(name)
        return f"{name}-1"

    return body


def _undo(step, output):
    DONE.append(f"undo {output}")


async def _order(ctx, *, typo: bool, failure: bool = False):
    await ctx.rollback_checkpoint("order")
    await ctx.step(name="reserve", run=_step("reserve"), rollback=_undo)
    await ctx.step(name="charge", run=_step("charge"), rollback=_undo)
    if failure:
        raise WorkflowFailure("address rejected", details={"field": "zip"})
    if typo:
        ctx.input.get("address")  # created without input: ctx.input is None -> AttributeError
    await ctx.step(name="ship", run=_step("ship"))
    return "shipped"


async def broken_run(ctx):
    return await _order(ctx, typo=True)


async def fixed_run(ctx):
    return await _order(ctx, typo=False)


async def refusing_run(ctx):
    return await _order(ctx, typo=False, failure=True)


async def renamed_run(ctx):
    await ctx.rollback_checkpoint("order")
    await ctx.step(name="reserve", run=_step("reserve"), rollback=_undo)
    await ctx.step(name="pay", run=_step("pay"), rollback=_undo)  # was "charge": the history diverges
    await ctx.step(name="ship", run=_step("ship"))
    return "shipped"


broken = d.setup(use={"order": d.actor(state={}, run=d.workflow(broken_run))})
fixed = d.setup(use={"order": d.actor(state={}, run=d.workflow(fixed_run))})
refusing = d.setup(use={"order": d.actor(state={}, run=d.workflow(refusing_run))})
renamed = d.setup(use={"order": d.actor(state={}, run=d.workflow(renamed_run))})
HERE = "tests.admin.test_suspended_everywhere"


def rivet_command(*args: str) -> str:
    out = io.StringIO()
    call_command("rivet", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def suspended(rivet):
    """Two orders of the broken code, suspended by its typo after reserve and charge."""
    DONE.clear()
    rivet.configure(REGISTRY=f"{HERE}.broken", CODE_VERSION="v1")
    handles = [rivet.client.order.get_or_create(f"o{i}") for i in range(2)]
    rivet.drain()
    assert [h.workflow_state() for h in handles] == ["suspended", "suspended"]
    assert DONE == ["reserve", "charge"] * 2  # no compensation ran
    return handles


def test_a_typo_suspends_with_nothing_compensated_and_the_error_recorded(suspended):
    record = suspended[0].record()
    assert record.error["name"] == "AttributeError"
    assert record.error["location"].startswith("tests/admin/test_suspended_everywhere.py:")
    assert record.error["location"].endswith(" in _order")
    assert record.wake_at is None and record.lease_owner is None


def test_the_commands_show_filter_check_and_retry_suspended(rivet, suspended):
    first, second = suspended
    lines = rivet_command("list", "--state", "suspended").splitlines()
    assert lines[0] == "2 actors"
    shown = rivet_command("show", first.actor_id)
    assert "state     suspended" in shown and "error     AttributeError" in shown
    assert "raised at tests/admin/test_suspended_everywhere.py:" in shown
    assert f"rivet retry --actor {first.actor_id}" in shown
    report = rivet_command("check")  # still broken: listed, but the deploy gate passes
    assert "suspended by AttributeError" in report and "0 problems" in report
    assert rivet_command("retry", "--actor", first.actor_id, "--reason", "try again").startswith("retried: 1")
    rivet.drain()
    assert first.workflow_state() == "suspended"  # same broken code: suspended again
    rivet.configure(REGISTRY=f"{HERE}.fixed", CODE_VERSION="v1")  # fixed, same version: no automatic retry
    rivet.drain()
    assert {first.workflow_state(), second.workflow_state()} == {"suspended"}
    assert "checked 2 in-flight workflows: 0 problems" in rivet_command("check")
    out = rivet_command("retry", "--name", "order")
    assert out.startswith("retried: 2")
    rivet.drain()
    assert {first.workflow_state(), second.workflow_state()} == {"completed"}
    assert (
        DONE.count("reserve") == 2 and DONE.count("ship") == 2 and not any(x.startswith("undo") for x in DONE)
    )
    unchanged = rivet_command("retry", "--actor", first.actor_id)
    assert "unchanged: 1" in unchanged and "not suspended; nothing to retry" in unchanged
    whos = [(a.action, a.who, a.reason) for a in rivet.runtime.store.operator_actions(first.actor_id)]
    assert whos == [("retry", "command", None), ("retry", "command", "try again")]
    with pytest.raises(CommandError, match="--actor ID or --name TYPE"):
        rivet_command("retry")


def test_a_deploy_with_the_fix_and_a_new_code_version_retries_once(rivet, suspended):
    rivet.configure(REGISTRY=f"{HERE}.fixed", CODE_VERSION="v2")
    rivet.drain()
    assert [h.workflow_state() for h in suspended] == ["completed", "completed"]
    assert DONE == ["reserve", "charge"] * 2 + ["ship"] * 2  # completed steps did not run again
    actions = rivet.runtime.store.operator_actions(suspended[0].actor_id)
    assert [(a.action, a.who) for a in actions] == [("retry", "deploy")]
    assert "'v1'" in actions[0].reason and "'v2'" in actions[0].reason


def test_the_http_api_shows_filters_and_retries_suspended(admin_client_, rivet, suspended):  # noqa: F811
    first, second = suspended
    body = admin_client_.get(API + "/actors?state=suspended").json()
    assert body["count"] == 2 and {i["workflow_state"] for i in body["items"]} == {"suspended"}
    detail = admin_client_.get(f"{API}/actors/{first.actor_id}").json()
    assert detail["workflow_state"] == "suspended" and detail["error"]["name"] == "AttributeError"
    assert detail["error"]["location"].endswith(" in _order")
    from rivet_workflows.api import api as ninja_api

    operation = ninja_api.get_openapi_schema()["paths"][API + "/actors"]["get"]
    param = next(p for p in operation["parameters"] if p["name"] == "state")
    enum = param["schema"]["anyOf"][0]["enum"] if "anyOf" in param["schema"] else param["schema"]["enum"]
    assert "suspended" in enum and tuple(enum) == states.SHOWN_STATES

    url = f"{API}/actors/{first.actor_id}/inspector/workflow/retry"
    refused = admin_client_.post(url, {"reason": "x", "force": True}, content_type="application/json")
    assert refused.status_code == 422, refused.content
    assert first.workflow_state() == "suspended" and not rivet.runtime.store.operator_actions(first.actor_id)
    rivet.configure(REGISTRY=f"{HERE}.fixed", CODE_VERSION="v1")
    done = admin_client_.post(url, {"reason": "fixed in 1.2"}, content_type="application/json")
    assert done.status_code == 200, done.content
    assert done.json() == {"actorId": first.actor_id, "changed": True, "workflowState": "sleeping"}
    rivet.drain()
    assert first.workflow_state() == "completed"
    again = admin_client_.post(url, content_type="application/json")
    assert again.json()["changed"] is False
    rows = rivet.runtime.store.operator_actions(first.actor_id)
    assert [(r.action, r.who, r.reason) for r in rows] == [("retry", "root", "fixed in 1.2")]
    missing = admin_client_.post(
        f"{API}/actors/missing/inspector/workflow/retry", content_type="application/json"
    )
    assert missing.status_code == 404


def test_the_admin_shows_suspended_and_retries_by_button_and_bulk_action(
    admin_client_,  # noqa: F811
    rivet,
    suspended,
):
    first, second = suspended
    listed = admin_client_.get(LIST + "?workflow_state__exact=suspended").content.decode()
    assert first.actor_id in listed and second.actor_id in listed and ">suspended<" in listed
    page = admin_client_.get(reverse("admin:rivet_workflows_actor_change", args=[first.actor_id]))
    html = page.content.decode()
    assert 'id="rivet-retry"' in html and "Suspended by a code error" in html
    assert "test_suspended_everywhere.py:" in html and "AttributeError" in html

    dashboard = admin_client_.get("/admin/rivet_workflows/dashboard/").content.decode()
    table = dashboard[dashboard.index('id="rivet-counts"') :]
    header = re.findall(r">(\w+)</span></th>", table[: table.index("</thead>")])
    row = table[table.index('data-type="order"') :]
    cells = re.findall(r'<td class="rivet-num">([^<]*)</td>', row[: row.index("</tr>")])
    assert dict(zip(header, cells, strict=True)) == {"suspended": "2"}

    rivet.configure(REGISTRY=f"{HERE}.fixed", CODE_VERSION="v1")
    retry_url = reverse("admin:rivet_workflows_actor_retry", args=[first.actor_id])
    response = admin_client_.post(retry_url, {"reason": "hotfix"})
    assert response.status_code == 302
    confirm = admin_client_.post(
        LIST, {"action": "retry_selected", "_selected_action": [second.actor_id]}
    ).content.decode()
    assert "Retry 1 workflow?" in confirm
    admin_client_.post(
        LIST,
        {"action": "retry_selected", "_selected_action": [second.actor_id], "post": "yes", "reason": "bulk"},
    )
    rivet.drain()
    assert [h.workflow_state() for h in suspended] == ["completed", "completed"]
    store = rivet.runtime.store
    assert [(a.action, a.who, a.reason) for a in store.operator_actions(first.actor_id)] == [
        ("retry", "root", "hotfix")
    ]
    assert [(a.action, a.reason) for a in store.operator_actions(second.actor_id)] == [("bulk_retry", "bulk")]


def test_workflow_failure_still_fails_and_compensates(rivet):
    DONE.clear()
    rivet.configure(REGISTRY=f"{HERE}.refusing")
    handle = rivet.client.order.get_or_create("o1")
    rivet.drain()
    assert handle.workflow_state() == "failed"
    assert DONE == ["reserve", "charge", "undo charge-1", "undo reserve-1"]
    assert handle.record().error["metadata"]["details"] == {"field": "zip"}
    assert handle.retry() is False


def test_exception_as_the_failure_type_restores_failing_on_every_exception(rivet):
    DONE.clear()
    rivet.configure(REGISTRY=f"{HERE}.broken", WORKFLOW_FAILURE_TYPES=("builtins.Exception",))
    handle = rivet.client.order.get_or_create("o1")
    rivet.drain()
    assert handle.workflow_state() == "failed"
    assert DONE == ["reserve", "charge", "undo charge-1", "undo reserve-1"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (("rivet_workflows.NoSuchThing",), "cannot import"),
        (("rivet_workflows.client",), "is not an exception class"),
        ((1,), "tuple of dotted paths"),
    ],
)
def test_a_bad_failure_type_setting_is_refused(rivet, value, message):
    from rivet_workflows.conf import rivet_settings

    rivet.configure(WORKFLOW_FAILURE_TYPES=value)
    with pytest.raises(ValueError, match=message):
        rivet_settings.get()


def test_rivet_check_fails_the_deploy_only_for_suspended_runs_the_new_code_breaks(rivet, suspended):
    out = io.StringIO()
    call_command("rivet", "check", stdout=out)  # the same code: still raising, listed, exit 0
    assert "2 runs are listed above that this deploy does not break" in out.getvalue()
    rivet.configure(REGISTRY=f"{HERE}.renamed", CODE_VERSION="v1")
    out = io.StringIO()
    with pytest.raises(CommandError, match="2 in-flight workflows do not replay"):
        call_command("rivet", "check", stdout=out)
    assert f'diverged order ["o0"] {suspended[0].actor_id} [suspended] at charge' in out.getvalue()
    assert "suspended by AttributeError" in out.getvalue()
