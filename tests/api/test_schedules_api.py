"""``/schedules`` over HTTP (DESIGN.md section 20): create, read, list, pause, resume, trigger, backfill,
delete; bad definitions are 4xx JSON errors; inputs are shown only to callers that may inspect."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from django.test import Client

from rivet_workflows import models

API = "/api/rivet"
TOKEN = "api-s3cret"
AUTH = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}


def _post(client: Client, path: str, body: object = None, **headers):
    return client.post(
        f"{API}{path}", json.dumps(body), content_type="application/json", **{**AUTH, **headers}
    )


@pytest.fixture
def api(rivet) -> Client:
    rivet.configure(DEV_MODE=False, API_TOKEN=TOKEN)
    return Client()


def test_a_schedule_round_trips_and_is_operated_over_http(api, rivet) -> None:
    created = _post(
        api,
        "/schedules",
        {
            "scheduleId": "nightly",
            "actor": "order",
            "cron": "0 3 * * *",
            "timezone": "Europe/Paris",
            "input": {"n": 1},
        },
    )
    assert created.status_code == 200, created.content
    body = created.json()
    assert (body["scheduleId"], body["actor"], body["key"], body["cron"], body["paused"]) == (
        "nightly",
        "order",
        None,
        "0 3 * * *",
        False,
    )
    assert body["nextFireAt"].endswith(("T02:00:00Z", "T01:00:00Z", "T02:00:00+00:00", "T01:00:00+00:00"))
    assert body["input"] is None and body["redacted"] == ["input"]  # the API token may not inspect
    assert api.get(f"{API}/schedules/nightly", **AUTH).json()["scheduleId"] == "nightly"
    assert [i["scheduleId"] for i in api.get(f"{API}/schedules", **AUTH).json()["items"]] == ["nightly"]

    paused = _post(api, "/schedules/nightly/pause")
    assert (
        paused.status_code == 200 and paused.json()["paused"] is True and paused.json()["nextFireAt"] is None
    )
    fire = _post(api, "/schedules/nightly/trigger").json()
    assert (fire["how"], fire["status"]) == ("trigger", "ok")
    started = rivet.client.order.get_for_id(fire["actorId"])
    assert started.key[0] == "nightly"
    # the actor's key carries the tick to the microsecond; JSON instants are shown to the millisecond
    assert abs(datetime.fromisoformat(started.key[1]) - datetime.fromisoformat(fire["tick"])) < timedelta(
        milliseconds=1
    )
    assert _post(api, "/schedules/nightly/resume").json()["paused"] is False

    filled = _post(
        api, "/schedules/nightly/backfill", {"start": "2026-01-01T00:00:00Z", "end": "2026-01-04T00:00:00Z"}
    )
    assert filled.status_code == 200, filled.content
    ticks = [f["tick"] for f in filled.json()["items"]]
    assert [t[:10] for t in ticks] == ["2026-01-01", "2026-01-02", "2026-01-03"]
    again = _post(
        api, "/schedules/nightly/backfill", {"start": "2026-01-01T00:00:00Z", "end": "2026-01-04T00:00:00Z"}
    )
    assert again.json()["items"] == []
    log = api.get(f"{API}/schedules/nightly/fires", **AUTH).json()["items"]
    assert [f["how"] for f in log] == ["backfill"] * 3 + ["trigger"]

    deleted = api.delete(f"{API}/schedules/nightly", **AUTH)
    assert deleted.status_code == 200 and deleted.json() == {"scheduleId": "nightly", "deleted": True}
    missing = api.get(f"{API}/schedules/nightly", **AUTH)
    assert missing.status_code == 404 and missing.json()["code"] == "schedule_not_found"
    assert not models.ScheduleFire.objects.exists()


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"every": 0.5}, 422, "invalid_schedule"),
        ({"cron": "not a cron"}, 422, "invalid_schedule"),
        ({"cron": "* * * * *", "every": 60}, 422, "invalid_schedule"),
        ({"every": 60, "timezone": "Mars/Base"}, 422, "invalid_schedule"),
        ({"every": 60, "actor": "nobody"}, 404, "actor_not_found"),
        ({"every": 60, "action": "nope"}, 404, "action_not_found"),
        ({"every": 60, "catchup": "some"}, 422, "validation_error"),
        ({"every": True}, 422, "validation_error"),
        ({"every": 60, "colour": "red"}, 422, "validation_error"),
    ],
)
def test_bad_definitions_are_4xx_json_and_store_nothing(api, body, status, code) -> None:
    response = _post(api, "/schedules", {"scheduleId": "bad", "actor": "order", **body})
    assert response.status_code == status, response.content
    payload = response.json()
    assert set(payload) == {"group", "code", "message", "metadata"} and payload["code"] == code
    assert not models.Schedule.objects.exists()


def test_a_taken_id_is_409_and_a_bad_backfill_range_422(api) -> None:
    assert _post(api, "/schedules", {"scheduleId": "s", "actor": "order", "every": 60}).status_code == 200
    taken = _post(api, "/schedules", {"scheduleId": "s", "actor": "order", "every": 60})
    assert taken.status_code == 409 and taken.json()["code"] == "schedule_already_exists"
    naive = _post(
        api, "/schedules/s/backfill", {"start": "2026-01-01T00:00:00", "end": "2026-01-02T00:00:00"}
    )
    assert naive.status_code == 422 and naive.json()["code"] == "invalid_schedule"
    reversed_ = _post(
        api, "/schedules/s/backfill", {"start": "2026-01-02T00:00:00Z", "end": "2026-01-01T00:00:00Z"}
    )
    assert reversed_.status_code == 422
    assert _post(api, "/schedules/nope/trigger").status_code == 404


def test_the_inspector_sees_the_input_and_the_anonymous_caller_nothing(api, rivet) -> None:
    rivet.configure(DEV_MODE=False, API_TOKEN=TOKEN, INSPECTOR_TOKEN="insp")
    _post(api, "/schedules", {"scheduleId": "s", "actor": "order", "every": 60, "input": {"card": "4242"}})
    shown = api.get(f"{API}/schedules/s", HTTP_AUTHORIZATION="Bearer insp").json()
    assert shown["input"] == {"card": "4242"} and shown["redacted"] == []
    assert api.get(f"{API}/schedules").status_code == 401
    assert api.post(f"{API}/schedules/s/trigger").status_code == 401
