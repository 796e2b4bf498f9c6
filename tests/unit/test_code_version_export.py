"""Golden histories with code versions: an export carries each entry's ``codeVersion`` and replays; an export
made before versions (no ``codeVersion``) replays as before (case C65)."""

from __future__ import annotations

import json

from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.testing import drain, export_history, make_runtime, replay_history


async def _run(ctx):
    await ctx.step("a", lambda s: 1)
    await ctx.queue.next("wait", "go")


def test_an_export_keeps_code_versions_and_replays_with_or_without_them():
    registry = setup(use={"wf": workflow(run=_run)})
    runtime = make_runtime(registry)
    runtime.settings.code_version = "2026.12.1"
    handle = runtime.client().wf.get_or_create("k")
    drain(runtime, timeout=1)
    exported = json.loads(json.dumps(export_history(handle)))
    versions = {k: m["codeVersion"] for k, m in exported["history"]["entryMetadata"].items()}
    assert versions and set(versions.values()) == {"2026.12.1"}
    assert replay_history(registry, exported).ok
    for meta in exported["history"]["entryMetadata"].values():
        del meta["codeVersion"]  # as exported before code versions existed
    assert replay_history(registry, exported).ok
