"""Histories exported before the inspector's C54 changes still replay on every store.

``legacy/`` keeps six golden files as the engine wrote them before queue-wait entries stored their
statuses (received messages and ``:count`` records ``pending``, a deadline that lost to a message
``completed``, no ``completedAt`` on instant entries) and before the inspector showed values as plain
JSON (they hold tagged JSON and no ``types``). ``replay_history`` must take them as it takes today's
exports: users keep such files in their own test suites, and old histories stay in their databases.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rivet_workflows import ReplayReport
from rivet_workflows.engine.model.definitions import setup
from rivet_workflows.testing import replay_history

from . import generate
from .test_golden import STORES, _store

LEGACY_DIR = Path(__file__).resolve().parent / "legacy"
LEGACY = sorted(p.stem for p in LEGACY_DIR.glob("*.json"))


@pytest.fixture(autouse=True)
def _quiet_engine_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="rivet_workflows")


def _case(stem: str):
    return next(case for case in generate.CASES.values() if stem in case.file_stems())


def test_the_legacy_files_are_of_the_old_format():
    tagged = []
    for stem in LEGACY:
        text = (LEGACY_DIR / f"{stem}.json").read_text()
        entries = generate.load(LEGACY_DIR / f"{stem}.json")["history"]["entries"]
        assert not any("types" in view for view in entries), stem
        tagged += [stem] if '"__rw__"' in text else []
    assert len(tagged) >= 4, tagged  # tagged values, as the old inspector showed them


@pytest.mark.parametrize("store_kind", STORES)
@pytest.mark.parametrize("stem", LEGACY)
def test_a_history_exported_by_the_previous_version_replays(request, stem, store_kind):
    store = _store(request, store_kind)
    exported = generate.load(LEGACY_DIR / f"{stem}.json")
    report = replay_history(setup(use=_case(stem).definitions()), exported, store=store)
    assert report == ReplayReport(ok=True), f"{stem} on {store_kind}: {report}"


def test_old_queue_wait_statuses_are_in_the_legacy_set():
    statuses = set()
    for stem in LEGACY:
        history = generate.load(LEGACY_DIR / f"{stem}.json")["history"]
        for view in history["entries"]:
            if view["kind"]["type"] == "message":
                statuses.add(history["entryMetadata"][view["id"]]["status"])
    assert statuses == {"pending"}  # what the previous version stored for every message entry
