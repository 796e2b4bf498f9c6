"""``manage.py rivet schedule list|create|pause|resume|trigger|backfill|delete`` on the Django store."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from rivet_workflows import django_runtime, models

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def runtime(settings):
    settings.RIVET_WORKFLOWS = {
        "REGISTRY": "tests.ops.inspect_registry.registry",
        "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
        "LIVE_WAIT_THRESHOLD": 0.0,
        "POLL_INTERVAL": 0.01,
    }
    django_runtime.reset_runtime()
    yield django_runtime.get_runtime()
    django_runtime.reset_runtime()


def rivet(*args: str) -> str:
    out = io.StringIO()
    call_command("rivet", "schedule", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_a_schedule_is_created_listed_operated_and_deleted_from_the_terminal(runtime) -> None:
    out = rivet("create", "nightly", "--actor", "order", "--cron", "0 3 * * *", "--input", '{"sku": "A"}')
    assert out.startswith("created schedule nightly (next fire ")
    rivet("create", "ping", "--actor", "note", "--key", '["n", 1]', "--every", "60", "--paused")
    lines = rivet("list").splitlines()
    assert lines[0] == "2 schedules"
    assert lines[2].split()[:4] == ["nightly", "order", "(per", "tick)"]
    assert lines[3].startswith("ping") and '["n", 1]' in lines[3] and "paused" in lines[3]

    assert rivet("resume", "ping").startswith("schedule ping: next fire ")
    assert rivet("pause", "ping") == "schedule ping: paused\n"
    fired = rivet("trigger", "ping")
    assert fired.startswith("fired schedule ping: ok (actor ")
    assert runtime.client().note.get(["n", 1]).actor_id in fired

    out = rivet("backfill", "nightly", "2026-01-01T00:00Z", "2026-01-03T00:00Z")
    assert out.splitlines()[-1] == "backfilled 2 ticks"
    assert out.splitlines()[0].startswith("2026-01-01T03:00:00+00:00  ok  ")
    assert rivet("backfill", "nightly", "2026-01-01T00:00Z", "2026-01-03T00:00Z") == "backfilled 0 ticks\n"

    assert rivet("delete", "nightly") == "deleted schedule nightly\n"
    assert list(models.Schedule.objects.values_list("schedule_id", flat=True)) == ["ping"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("create", "s", "--actor", "order", "--every", "0.5"),
            "InvalidScheduleError: every must be between 1 s",
        ),
        (
            ("create", "s", "--actor", "order", "--cron", "bad"),
            "InvalidScheduleError: invalid cron expression",
        ),
        (("create", "s", "--actor", "ghost", "--every", "60"), "ActorNotFoundError"),
        (
            ("create", "s", "--actor", "order", "--every", "60", "--input", "{nope"),
            "--input is not valid JSON",
        ),
        (("pause", "nope"), "ScheduleNotFoundError"),
        (("backfill", "nope", "2026-01-01T00:00", "2026-01-02T00:00Z"), "START needs an offset"),
    ],
)
def test_bad_input_is_a_command_error(runtime, args, message) -> None:
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        rivet(*args)
    assert not models.Schedule.objects.exists()


def test_prune_forgets_schedule_fires_older_than_its_cutoff(runtime) -> None:
    rivet("create", "nightly", "--actor", "order", "--cron", "0 3 * * *")
    rivet("backfill", "nightly", "2020-01-01T00:00Z", "2020-01-03T00:00Z")
    rivet("trigger", "nightly")
    call_command("rivet", "prune", "--older-than", "30", stdout=io.StringIO(), stderr=io.StringIO())
    assert [f.how for f in runtime.client().schedules.fires("nightly")] == ["trigger"]
