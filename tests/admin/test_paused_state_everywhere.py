"""``paused`` is one workflow state everywhere a state is shown or filtered: ``rivet list`` (and ``--state``),
``rivet show``, ``GET /actors`` (``state=``, its OpenAPI enum), the admin list's badge and filter, the
dashboard's counts. A paused actor shows ``paused``, and a filter on the state underneath (``sleeping``)
leaves it out."""

from __future__ import annotations

import io
import re

from django.core.management import call_command
from django.urls import reverse

from rivet_workflows import states
from tests.admin.test_admin import admin_client_  # noqa: F401 - fixture

API = "/api/rivet"
LIST = "/admin/rivet_workflows/actor/"


def rivet_command(*args: str) -> str:
    out = io.StringIO()
    call_command("rivet", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def _two_of_three_paused(rivet):
    handles = [rivet.client.waiter.get_or_create(f"w{i}") for i in range(3)]
    rivet.drain()
    assert {h.workflow_state() for h in handles} == {"sleeping"}
    for handle in handles[:2]:
        rivet_command("pause", "--actor", handle.actor_id)
    return handles[:2], handles[2]


def test_the_commands_show_and_filter_paused(rivet):
    paused, sleeping = _two_of_three_paused(rivet)
    lines = rivet_command("list", "--name", "waiter").splitlines()
    shown = {line.split()[0]: line.split()[3] for line in lines[2:] if line.strip()}
    assert shown == {
        paused[0].actor_id: "paused",
        paused[1].actor_id: "paused",
        sleeping.actor_id: "sleeping",
    }
    only_paused = rivet_command("list", "--state", "paused").splitlines()
    assert only_paused[0] == "2 actors"
    assert {line.split()[0] for line in only_paused[2:] if line.strip()} == {h.actor_id for h in paused}
    only_sleeping = rivet_command("list", "--state", "sleeping", "--name", "waiter").splitlines()
    assert only_sleeping[0] == "1 actor" and sleeping.actor_id in only_sleeping[2]
    assert "state     paused" in rivet_command("show", paused[0].actor_id)
    rivet_command("resume", "--actor", paused[0].actor_id)
    assert rivet_command("list", "--state", "sleeping", "--name", "waiter").splitlines()[0] == "2 actors"


def test_the_http_list_shows_and_filters_paused_and_its_schema_lists_it(admin_client_, rivet):  # noqa: F811
    paused, sleeping = _two_of_three_paused(rivet)
    response = admin_client_.get(API + "/actors?state=paused")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == 2
    assert {i["actor_id"] for i in body["items"]} == {h.actor_id for h in paused}
    assert {i["workflow_state"] for i in body["items"]} == {"paused"}
    body = admin_client_.get(API + "/actors?state=sleeping&name=waiter").json()
    assert [i["actor_id"] for i in body["items"]] == [sleeping.actor_id]
    everything = {
        i["actor_id"]: i["workflow_state"] for i in admin_client_.get(API + "/actors").json()["items"]
    }
    assert everything[paused[0].actor_id] == "paused" and everything[sleeping.actor_id] == "sleeping"
    assert admin_client_.get(f"{API}/actors/{paused[0].actor_id}").json()["workflow_state"] == "paused"

    from rivet_workflows.api import api as ninja_api

    operation = ninja_api.get_openapi_schema()["paths"][API + "/actors"]["get"]
    state = next(p for p in operation["parameters"] if p["name"] == "state")
    enum = state["schema"]["anyOf"][0]["enum"] if "anyOf" in state["schema"] else state["schema"]["enum"]
    assert tuple(enum) == states.SHOWN_STATES


def test_the_admin_filter_and_the_dashboard_know_paused(admin_client_, rivet):  # noqa: F811
    paused, sleeping = _two_of_three_paused(rivet)
    page = admin_client_.get(reverse("admin:rivet_workflows_actor_changelist")).content.decode()
    assert "?workflow_state__exact=paused" in page  # the filter's choice
    listed = admin_client_.get(LIST + "?workflow_state__exact=paused").content.decode()
    assert all(h.actor_id in listed for h in paused) and sleeping.actor_id not in listed
    assert ">paused<" in listed  # the badge
    listed = admin_client_.get(LIST + "?workflow_state__exact=sleeping").content.decode()
    assert sleeping.actor_id in listed and not any(h.actor_id in listed for h in paused)

    html = admin_client_.get("/admin/rivet_workflows/dashboard/").content.decode()
    table = html[html.index('id="rivet-counts"') :]
    header = re.findall(r">(\w+)</span></th>", table[: table.index("</thead>")])
    row = table[table.index('data-type="waiter"') :]
    cells = re.findall(r'<td class="rivet-num">([^<]*)</td>', row[: row.index("</tr>")])
    counts = dict(zip(header, cells, strict=True))
    assert counts == {"sleeping": "1", "paused": "2"}
