"""Golden histories (DESIGN.md section 11): every saved history replays on every store, regenerating them
with the current code gives the same histories, a changed workflow is caught, and the export is the
inspector's history.

The files in ``engine/`` and ``examples/`` were recorded by ``python -m tests.golden.generate`` from the
engine before the storage/engine redesign; a refactor must leave every test here passing unchanged. The
34 cases with queue waits, checkpoints, version gates or removal markers were re-recorded when those
entries began to store their real statuses and ``completedAt`` (field case C54); ``legacy/`` keeps some of
the files as they were before (``test_legacy.py`` replays them).
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from project.examples import versioning
from project.registry import ACTORS
from rivet_workflows import CriticalError, ReplayReport, workflow
from rivet_workflows.engine.model import errors
from rivet_workflows.engine.model.definitions import setup
from rivet_workflows.testing import MemoryStore, export_history, replay_history
from tests.conftest import is_postgres

from . import engine_cases, example_cases, generate, normalize

GOLDENS = [(case, stem) for case in generate.CASES.values() for stem in case.file_stems()]
STORES = ["memory", "django-sqlite", "django-postgres", "postgres"]


@pytest.fixture(autouse=True)
def _quiet_engine_log(caplog: pytest.LogCaptureFixture) -> None:
    """The recorded workflows fail on purpose; their engine log lines would bury a real failure."""
    caplog.set_level(logging.CRITICAL, logger="rivet_workflows")


@pytest.fixture(scope="module", autouse=True)
def _fake_service():
    """The examples' HTTP service, for regenerating example goldens (stopped after this module)."""
    yield
    example_cases.stop_service()


def _store(request: pytest.FixtureRequest, kind: str):
    """A store of ``kind``; the Django ones on the test database (skipped when it is the other vendor):
    the portable DjangoStore on SQLite or PostgreSQL, and PostgresStore."""
    if kind == "memory":
        return MemoryStore()
    if kind in ("django-postgres", "postgres") and not is_postgres():
        pytest.skip("DjangoStore on PostgreSQL needs DATABASE_URL=postgres://... (this run uses SQLite)")
    if kind == "django-sqlite" and is_postgres():
        pytest.skip("DjangoStore on SQLite: this run's test database is PostgreSQL (DATABASE_URL)")
    request.getfixturevalue("db")
    from rivet_workflows.storage import DjangoStore, PostgresStore

    return (PostgresStore if kind == "postgres" else DjangoStore)(poll_interval=0.01)


def test_every_case_has_its_golden_files_and_every_file_a_case():
    on_disk = {p for folder in ("engine", "examples") for p in (generate.GOLDEN_DIR / folder).glob("*.json")}
    expected = {generate.path_of(case, stem) for case, stem in GOLDENS}
    assert sorted(map(str, expected - on_disk)) == [], "missing: run python -m tests.golden.generate"
    assert sorted(map(str, on_disk - expected)) == [], "files of no case"


def test_the_goldens_cover_every_example_and_every_engine_scenario_group():
    examples = {c.name.removeprefix("example-") for c in example_cases.CASES}
    from project.examples import scenarios

    assert examples == set(scenarios.SCENARIOS)
    groups = {c.group for c in engine_cases.CASES}
    assert groups == {
        "Steps",
        "Loops",
        "Queue",
        "Sleep",
        "Join",
        "Race",
        "Try",
        "Rollback",
        "Versions",
        "Lifecycle",
    }
    states = {generate.load(generate.path_of(c, s))["actor"]["workflow_state"] for c, s in GOLDENS}
    assert {"completed", "failed", "sleeping", "running", "rolling_back", "cancelled"} <= states


# --- (a) every golden replays on every store ----------------------------------------------------------


@pytest.mark.parametrize("store_kind", STORES)
@pytest.mark.parametrize(("case", "stem"), [pytest.param(c, s, id=s) for c, s in GOLDENS])
def test_golden_history_replays_on_the_current_code(request, case, stem, store_kind):
    store = _store(request, store_kind)
    exported = generate.load(generate.path_of(case, stem))
    report = replay_history(setup(use=case.definitions()), exported, store=store)
    assert report == ReplayReport(ok=True), f"{stem} on {store_kind}: {report}"
    assert store.find_actor(exported["actor"]["name"], exported["actor"]["key"]) is None  # left nothing


# --- (b) regenerating gives the same histories --------------------------------------------------------


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in generate.CASES.values()])
def test_regenerating_the_golden_with_the_current_code_gives_the_same_history(case):
    regenerated = generate.record(case)
    for stem in case.file_stems():
        golden = generate.load(generate.path_of(case, stem))
        difference = normalize.first_difference(stem, golden, regenerated[stem])
        assert difference is None, difference


def test_the_regeneration_check_names_the_golden_and_the_first_differing_entry():
    case = generate.CASES["steps-exhausted"]
    golden = generate.load(generate.path_of(case, case.name))
    changed = json.loads(json.dumps(golden))
    changed["history"]["entryMetadata"]["always"]["attempts"] = 4  # one more attempt than recorded
    message = normalize.first_difference(case.name, golden, changed)
    assert message is not None
    assert message.startswith("golden 'steps-exhausted': entry 'always' differs")
    assert '-  "attempts": 3,' in message and '+  "attempts": 4,' in message
    # ids and timestamps are not behaviour
    moved = json.loads(json.dumps(golden))
    meta = moved["history"]["entryMetadata"]["always"]
    meta["createdAt"] = meta["lastAttemptAt"] = "2030-05-05T10:00:00.123456+00:00"
    assert normalize.first_difference(case.name, golden, moved) is None


# --- (c) a changed workflow is caught -----------------------------------------------------------------


def _renamed_b() -> dict:
    async def run(ctx):
        a = await ctx.step("a", lambda s: 1)
        b = await ctx.step("b-renamed", lambda s: 2)
        c = await ctx.step("c", lambda s: 3)
        return a + b + c

    return {"wf": workflow(run=run)}


@pytest.mark.parametrize("store_kind", STORES)
def test_a_renamed_step_is_reported_as_a_divergence(request, store_kind):
    store = _store(request, store_kind)
    case = generate.CASES["steps-sequential"]
    exported = generate.load(generate.path_of(case, case.name))
    report = replay_history(setup(use=_renamed_b()), exported, store=store)
    assert report.ok is False
    assert report.diverged_at == "b"
    assert report.reached == "b-renamed"
    assert "b-renamed" in report.error and "ctx.get_version" in report.error


def test_an_in_flight_example_replayed_on_the_spec_code_that_renames_a_step_diverges():
    """The spec's versioned workflow renames validate-v1 without a gate: the instance recorded by the old
    code (waiting in its loop) does not replay on it, only on the migrated code (docs/explanation/design.md)."""
    case = generate.CASES["example-versioned_deploy"]
    exported = generate.load(generate.path_of(case, "example-versioned_deploy.at-deploy"))
    spec_code = {**ACTORS, "versioned_deploy_actor": versioning.versioned_workflow_actor}
    report = replay_history(setup(use=spec_code), exported)
    assert report.ok is False
    assert report.diverged_at == "validate-v1"
    assert report.reached == "validate-v2"
    assert replay_history(setup(use=ACTORS), exported).ok


def test_a_workflow_that_now_fails_differently_is_not_ok():
    case = generate.CASES["steps-workflow-error"]
    exported = generate.load(generate.path_of(case, case.name))

    async def run(ctx):
        await ctx.step("before", lambda s: 1)
        raise CriticalError("another failure")

    report = replay_history(setup(use={"wf": workflow(run=run)}), exported)
    assert report.ok is False and report.diverged_at is None
    assert report.error == "CriticalError: another failure"
    assert replay_history(setup(use=case.definitions()), exported).ok  # the recorded failure replays


def test_replay_errors_are_typed_and_touch_nothing():
    case = generate.CASES["queue-waiting"]
    exported = generate.load(generate.path_of(case, case.name))
    registry = setup(use=case.definitions())
    with pytest.raises(errors.InvalidExportError):
        replay_history(registry, {"history": exported["history"]})
    broken = json.loads(json.dumps(exported))
    broken["history"]["entryMetadata"]["before"]["createdAt"] = "yesterday"
    with pytest.raises(errors.InvalidExportError, match="createdAt"):
        replay_history(registry, broken)
    store = MemoryStore()
    existing, _ = store.create_actor("wf", ["k"], None, {"mine": True})
    with pytest.raises(errors.ActorAlreadyExistsError):
        replay_history(registry, exported, store=store)
    assert store.get_actor(existing.actor_id).state == {"mine": True}
    unknown = replay_history(setup(use={}), exported)
    assert unknown.ok is False and "no actor type named 'wf'" in unknown.error


def test_replay_leaves_the_callers_registry_bound_to_its_runtime():
    from rivet_workflows.testing import make_runtime

    case = generate.CASES["steps-sequential"]
    registry = setup(use=case.definitions())
    runtime = make_runtime(registry)
    assert replay_history(registry, generate.load(generate.path_of(case, case.name))).ok
    assert registry.runtime is runtime


# --- (d) the export is the inspector's history -------------------------------------------------------


@pytest.fixture
def api(rivet, client, django_user_model):
    client.force_login(django_user_model.objects.create_user("golden", password="pw"))
    return client


def test_export_of_a_django_actor_is_the_http_inspectors_history_and_rivet_export_writes_it(
    rivet, api, tmp_path
):
    from django.core.management import CommandError, call_command

    failed = rivet.failed_order("golden")
    waiter = rivet.client.waiter.get_or_create("w")
    rivet.drain()
    waiter.send("approval", {"id": 7})
    rivet.drain()
    for handle in (failed, waiter):
        exported = export_history(handle.actor_id)  # no runtime: the project's Django runtime
        assert exported == export_history(handle)
        http = api.get(f"/api/rivet/actors/{handle.actor_id}/inspector/workflow-history").json()
        assert exported["history"] == http["history"]
        assert exported["actor"]["workflow_state"] == http["workflowState"]
        record = handle.record()
        assert exported["actor"]["name"] == record.name and exported["actor"]["key"] == record.key
        assert replay_history(rivet.runtime.registry, exported).ok

        path = tmp_path / f"{handle.actor_id}.json"
        call_command("rivet", "export", handle.actor_id, "-o", str(path))
        assert json.loads(path.read_text()) == exported
        assert json.loads(_export_stdout(handle.actor_id)) == exported
    assert failed.workflow_state() == "failed" and waiter.workflow_state() == "completed"
    with pytest.raises(CommandError, match="ActorNotFoundError"):
        call_command("rivet", "export", "no-such-actor")
    with pytest.raises(CommandError, match="cannot write"):
        call_command("rivet", "export", failed.actor_id, "-o", str(tmp_path / "missing" / "x.json"))


def _export_stdout(actor_id: str) -> str:
    """``rivet export ACTOR_ID`` to stdout, captured."""
    from django.core.management import call_command

    out = io.StringIO()
    call_command("rivet", "export", actor_id, stdout=out)
    return out.getvalue()


def test_importing_testing_loads_no_django():
    code = (
        "import sys, rivet_workflows.testing, rivet_workflows.testing.golden; print('django' in sys.modules)"
    )
    env = dict(os.environ)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, cwd=Path.cwd()
    )
    assert out.stdout.strip() == "False"


class _ForgetfulStore(MemoryStore):
    """A store that loses the error of every history entry it reads back (a broken mapper)."""

    def load_history(self, actor_id):
        entries = super().load_history(actor_id)
        for entry in entries:
            entry.error = None
        return entries


def test_a_store_that_does_not_give_the_history_back_fails_the_replay():
    case = generate.CASES["steps-exhausted"]
    exported = generate.load(generate.path_of(case, case.name))
    report = replay_history(setup(use=case.definitions()), exported, store=_ForgetfulStore())
    assert report.ok is False and report.diverged_at is None
    assert report.error.startswith("the store did not give the history back as written: entry 'always'")


def test_the_readme_golden_example_replays_the_readme_order_workflow(tmp_path):
    from rivet_workflows.testing import ManualClock, drain, make_runtime
    from tests.unit.test_readme_example import _readme_registry

    runtime = make_runtime(_readme_registry(), clock=ManualClock())
    handle = runtime.registry.client().order_actor.get_or_create(["order-1"])
    drain(runtime, timeout=1)
    handle.send("approval", {"approved": True})
    drain(runtime, timeout=1)  # fulfilled, in its 60 s cool-down
    path = tmp_path / "order.json"
    path.write_text(json.dumps(export_history(handle)))
    report = replay_history(_readme_registry(), json.loads(path.read_text()))
    assert report == ReplayReport(ok=True)
