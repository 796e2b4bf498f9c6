"""Unit tests of the engine's history model: locations, scope index, divergence checks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.run.history import History, check_name, child_key, key_of, parent_key
from rivet_workflows.engine.run.retry import backoff_delay


def test_location_keys():
    assert key_of(["outer", 3, "inner"]) == "outer/~3/inner"
    assert child_key("", "a") == "a"
    assert child_key("loop", 2) == "loop/~2"
    assert parent_key("outer/~3/inner") == "outer/~3"
    assert parent_key("charge") == ""


@pytest.mark.parametrize("bad", ["", "a/b", "~1", None, 3])
def test_bad_entry_names_are_rejected(bad):
    with pytest.raises(ValueError):
        check_name(bad)


def _entry(key, kind="step", seq=0):
    return ports.EntryRecord(key=key, location=key.split("/"), kind=kind, seq=seq)


def test_unvisited_child_diverges_and_names_the_entry():
    history = History([_entry("a", seq=0), _entry("b", seq=1)])
    history.visit("a", "step", "a")
    with pytest.raises(errors.HistoryDivergedError, match="'b'.*ctx.removed"):
        history.check_scope("")
    history.visit("b", "step", "b")
    history.check_scope("")


def test_nested_entries_are_not_direct_children_of_the_root():
    history = History(
        [_entry("loop", "loop"), _entry("loop/~0/x", seq=1), _entry("j", "join", 2), _entry("j/a/s", seq=3)]
    )
    history.visit("loop", "loop", "loop")
    history.visit("j", "join", "j")
    history.check_scope("")
    with pytest.raises(errors.HistoryDivergedError):
        history.check_scope("loop/~0")


def test_kind_mismatch_diverges():
    history = History([_entry("x", "loop")])
    with pytest.raises(errors.HistoryDivergedError, match="expected step 'x', found loop"):
        history.visit("x", "step", "x")


def test_delete_scope_removes_the_subtree_and_reports_deletes():
    history = History(
        [
            _entry("l", "loop"),
            _entry("l/~0/a", seq=1),
            _entry("l/~0/in", "loop", 2),
            _entry("l/~0/in/~1/b", seq=3),
            _entry("l/~1/a", seq=4),
        ]
    )
    deleted = history.delete_scope("l/~0")
    assert sorted(deleted) == ["l/~0/a", "l/~0/in", "l/~0/in/~1/b"]
    assert history.child_keys("l") == ["l/~1"]
    upserts, deletes = history.take_changes()
    assert upserts == [] and sorted(deletes) == sorted(deleted)


def test_changes_survive_a_failed_commit():
    history = History()
    entry = history.new("a", "step")
    upserts, deletes = history.take_changes()
    assert [e.key for e in upserts] == ["a"] and not history.has_changes
    history.restore_changes(upserts, deletes)
    assert history.has_changes
    assert [e.key for e in history.take_changes()[0]] == ["a"]
    assert entry.seq == 0 and history.new("b", "step").seq == 1


def test_backoff_delay():
    assert backoff_delay(1, 0.1, 30) == pytest.approx(0.2)
    assert backoff_delay(3, 0.1, 30) == pytest.approx(0.8)
    assert backoff_delay(20, 0.1, 30) == 30
    assert backoff_delay(5000, 0.1, 30) == 30


def test_importing_the_engine_loads_no_django():
    code = (
        "import sys, rivet_workflows.engine, rivet_workflows.engine.runtime.executor, rivet_workflows.engine.run.context, "
        "rivet_workflows.testing; print('django' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_queue_wait_that_was_not_reached_is_retired_by_its_wait_name():
    history = History(
        [_entry("a", seq=0), _entry("wait-go:count", "message", 1), _entry("wait-go:0", "message", 2)]
    )
    history.visit("a", "step", "a")
    with pytest.raises(errors.HistoryDivergedError, match=r"ctx.removed\('wait-go', 'message'\)"):
        history.check_scope("")


def test_a_new_entry_reached_with_later_entries_recorded_says_the_run_is_past_the_change():
    # recorded: validate-v2, then a wait that received a message; the code retired validate-v2 and reached
    # a new step validate-v3, which this run can no longer run before its wait
    history = History(
        [_entry("validate-v2", seq=0), _entry("wait:count", "message", 1), _entry("wait:0", "message", 2)]
    )
    history.visit("validate-v2", "step", "validate-v2")
    history.retired.add("validate-v2")
    with pytest.raises(errors.HistoryDivergedError) as caught:
        history.check_scope("", before="validate-v3", before_kind="step")
    message = str(caught.value)
    assert "new step 'validate-v3'" in message and "message 'wait'" in message
    assert "past this change" in message and "ctx.get_version" in message
    assert "ctx.removed('wait" not in message  # the wait is still in the code: retiring it is wrong advice
    assert caught.value.metadata["reached"] == "validate-v3"


def test_a_single_renamed_step_gets_both_fixes():
    history = History([_entry("a", seq=0), _entry("b", seq=1)])
    history.visit("a", "step", "a")
    with pytest.raises(errors.HistoryDivergedError) as caught:
        history.check_scope("", before="b2", before_kind="step")
    message = str(caught.value)
    assert "ctx.removed('b', 'step')" in message and "ctx.get_version" in message


def test_a_skipped_entry_is_named_for_removal():
    history = History([_entry("a", seq=0), _entry("b", seq=1), _entry("c", seq=2)])
    history.visit("a", "step", "a")
    history.visit("c", "step", "c")
    with pytest.raises(errors.HistoryDivergedError, match=r"'b' was skipped.*ctx.removed\('b', 'step'\)"):
        history.check_scope("", before="d", before_kind="step")
