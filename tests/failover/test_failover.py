"""Failover (DESIGN.md section 21): a PostgreSQL primary and a synchronous streaming standby started by the
test, real Celery workers on a multi-host ``DATABASE_URL``, the primary SIGKILLed mid-load and the standby
promoted. Runs ``python -m tests.failover`` (its docstring has the details) in a subprocess: it configures
Django for its own servers, which this process cannot do beside the suite's test database.

Runs in the suite's PostgreSQL pass (``DATABASE_URL=postgres://...``) on a machine with PostgreSQL's server
programs (Debian's ``/usr/lib/postgresql/*/bin``: initdb, pg_ctl, pg_basebackup, postgres); skipped
otherwise. ``make failover`` runs it alone, on any machine with those programs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import is_postgres
from tests.pgclusters import has_server_programs

BASE_DIR = Path(__file__).resolve().parents[2]
PROGRAMS = ("initdb", "pg_ctl", "pg_basebackup", "postgres")


pytestmark = [
    pytest.mark.system,
    pytest.mark.postgres,
    pytest.mark.skipif(not is_postgres(), reason="runs in the PostgreSQL pass (set DATABASE_URL)"),
    pytest.mark.skipif(
        not has_server_programs(PROGRAMS),
        reason="needs PostgreSQL's server programs in /usr/lib/postgresql/*/bin (initdb, pg_ctl, "
        "pg_basebackup, postgres)",
    ),
]


_HIDDEN = ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")


def _failover(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """Run ``python -m tests.failover`` with ``args``: its process and its JSON summary."""
    summary = tmp_path / "failover.json"
    env = {k: v for k, v in os.environ.items() if k not in _HIDDEN}  # it configures its own servers
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BASE_DIR), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "tests.failover", "--json", str(summary), *args],
        cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert summary.exists(), f"{done.stdout}\n{done.stderr[-4000:]}"
    return done, json.loads(summary.read_text())


def test_a_promoted_standby_takes_over_without_losing_an_acknowledged_step(tmp_path):
    done, result = _failover(tmp_path)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-4000:]}"
    assert result["acknowledged_before_kill"] > 0 and result["acknowledged_after_promotion"] > 0
    assert result["acknowledged_missing_at_promotion"] == 0
    assert result["acknowledged_lost"] == 0
    assert result["ran_again_after_ack"] == 0
    assert result["actors"] == 60  # and every one completed (else a violation)
    assert result["waiting_sends_completed"] == 4  # waiting sends stored before the kill got their answer
    assert result["violations"] == []


def test_without_a_synchronous_standby_the_same_failover_loses_acknowledged_steps(tmp_path):
    """The control, what the checks above catch: with the standby asynchronous, the commits acknowledged
    while its WAL sender lags (1 s before the kill) never reach it; they are missing at the promotion and
    their steps run again."""
    done, result = _failover(tmp_path, "--asynchronous", "--lag", "1.0", "--discard")
    assert done.returncode == 1, done.stdout
    assert result["acknowledged_missing_at_promotion"] > 0
    assert result["ran_again_after_ack"] > 0
