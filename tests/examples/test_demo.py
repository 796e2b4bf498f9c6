"""The demo end to end: a real Celery worker subprocess, SIGKILLed mid-step, and a new one that finishes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

BASE_DIR = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.system


def _manage(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def demo_env(tmp_path):
    """Environment of the demo subprocess: its own var dir (SQLite file, broker folders, logs), or with
    DATABASE_URL on PostgreSQL its own database, created here and dropped afterwards."""
    env = dict(os.environ, RIVET_VAR_DIR=str(tmp_path), PYTHONUNBUFFERED="1")
    env.pop("RIVET_SQLITE_PATH", None)
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        yield env
        return
    import psycopg

    parts = urlsplit(url)
    name = f"rivet_demo_{os.getpid()}"
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    env["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{name}"))
    try:
        yield env
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_demo_recovers_a_killed_worker_without_rerunning_completed_steps(demo_env):
    env = demo_env
    migrated = _manage(["migrate", "-v0"], env, timeout=120)
    assert migrated.returncode == 0, migrated.stderr
    demo = _manage(
        [
            "rivet",
            "demo",
            "--",
            "--only",
            "crash,version_gate_deploy,versioned_deploy,queue_worker,approval_gate,rpc",
            "--timeout",
            "120",
        ],
        env,
        timeout=180,
    )
    out = demo.stdout
    assert demo.returncode == 0, out[-3000:] + demo.stderr[-2000:]
    assert "SIGKILLed worker #1" in out
    assert "6/6 scenarios ok" in out
    # the fake service counted the side effects: the step completed before the crash ran once, the
    # interrupted one ran again, the one after it once
    assert "prepare ran 1x" in out
    assert "slow-work started 2x, finished 1x" in out
    assert "finish ran 1x" in out
    # the final state says why each actor still running is expected to (loops, a gate across a deploy)
    assert "still running: NOT expected" not in out
    for name in ("version_gate_actor", "versioned_deploy_actor", "queue_worker_actor", "rpc_actor"):
        assert re.search(rf"\n{name} .*workflow: \w+\n  still running, as expected: \w", out), name


def test_demo_agent_killed_mid_answer_repeats_no_completed_model_request_or_tool_call(demo_env):
    pytest.importorskip("pydantic_ai")
    env = demo_env
    migrated = _manage(["migrate", "-v0"], env, timeout=120)
    assert migrated.returncode == 0, migrated.stderr
    demo = _manage(["rivet", "demo", "--", "--only", "agent", "--timeout", "120"], env, timeout=180)
    out = demo.stdout
    assert demo.returncode == 0, out[-3000:] + demo.stderr[-2000:]
    assert "SIGKILLed worker #1" in out
    assert "1/1 scenarios ok" in out
    # the fake service counted the model function's and the tools' runs across the kill
    assert "model request 1 sent 1x, lookup_order called 1x, model request 2 sent 1x, refund paid 1x" in out
    assert "model request 3 (the streamed answer) started 2x, finished 1x" in out
    # the worker was killed after a few words of the answer were streamed: they stay, marked discarded
    streamed = re.search(r"stream 'answer': (\d+) items, (\d+) of the killed attempt marked discarded", out)
    assert streamed, out[-3000:]
    assert int(streamed[2]) >= 2 and int(streamed[1]) == int(streamed[2]) + 21  # the answer's 21 words
