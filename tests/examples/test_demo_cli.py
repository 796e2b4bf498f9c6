"""``manage.py rivet demo`` takes the demo's own options directly and cleans up after itself (tester
finding 11): ``--only``/``--keep`` need no ``--``, and without ``--keep`` no actor is left behind, not even
the helper actors (shards, child workers, inventory...) that the workflows created."""

from __future__ import annotations

import json

import pytest

from tests.examples.test_demo import _manage, demo_env  # noqa: F401 - demo_env is a fixture

pytestmark = pytest.mark.system

HELPER_SCENARIOS = "scatter_gather,child_workers,checkout_saga"
LIVE_ACTORS = (
    "import json; from rivet_workflows.models import Actor; "
    "print(json.dumps(sorted(Actor.objects.filter(destroyed=False).values_list('name', flat=True))))"
)


def _live_actor_types(env: dict[str, str]) -> list[str]:
    shell = _manage(["shell", "-v0", "-c", LIVE_ACTORS], env, timeout=60)
    assert shell.returncode == 0, shell.stderr
    return json.loads(shell.stdout.strip().splitlines()[-1])


def _demo(env: dict[str, str], *options: str) -> str:
    migrated = _manage(["migrate", "-v0"], env, timeout=120)
    assert migrated.returncode == 0, migrated.stderr
    demo = _manage(["rivet", "demo", *options, "--timeout", "90"], env, timeout=150)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-2000:]
    return demo.stdout


def test_demo_options_without_separator_and_no_actor_left_behind(demo_env):  # noqa: F811
    out = _demo(demo_env, "--only", HELPER_SCENARIOS, "--no-crash")
    assert "3/3 scenarios ok" in out
    assert "destroyed" in out
    assert _live_actor_types(demo_env) == []


def test_demo_keep_keeps_the_actors_and_their_helpers(demo_env):  # noqa: F811
    out = _demo(demo_env, "--keep", "--only=scatter_gather", "--no-crash")
    assert "1/1 scenarios ok" in out
    kept = _live_actor_types(demo_env)
    assert "scatter_gather_actor" in kept and "shard_actor" in kept
