"""The storage port: one Store protocol that every store implements whole (DESIGN.md section 11)."""

from __future__ import annotations

import pytest

from rivet_workflows.engine import ports
from rivet_workflows.testing import MemoryStore


def test_base_store_cannot_be_used_without_the_required_capabilities():
    with pytest.raises(TypeError, match="abstract"):
        ports.BaseStore()  # type: ignore[abstract]
    assert {"commit", "claim", "run_action", "cron_due", "list_actors"} <= ports.Store.__abstractmethods__


def test_memory_store_implements_every_capability_of_the_port():
    store = MemoryStore()
    assert isinstance(store, ports.Store)
    assert isinstance(store, ports.BaseStore)
    assert store.inline_calls is True


def test_portable_defaults_serve_a_store_that_has_no_fast_path():
    store = MemoryStore()
    record, created = store.get_or_create_actor("a", ["k"], None, lambda: {"n": 1}, due=True)
    assert created
    token, actor, history, now = store.claim_and_load(record.actor_id, "me", 30)
    assert (actor.state, history) == ({"n": 1}, [])
    assert store.claim_and_load(record.actor_id, "other", 30) is None  # held
    message, hint = store.send_and_check(record.actor_id, "q", 1)
    assert message.body == 1 and hint in (None, False)
    assert store.release(record.actor_id, token).ok
    assert store.list_actors("a")[0].actor_id == record.actor_id
