"""The benchmark harness keeps working: a smoke run of P1 measures both our engine and DBOS."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.postgres


def _postgres_up() -> bool:
    try:
        import psycopg

        psycopg.connect(
            host="127.0.0.1", port=5432, user="postgres", dbname="postgres", connect_timeout=2
        ).close()
        return True
    except Exception:
        return False


@pytest.mark.skipif(shutil.which("pgbench") is None, reason="needs pgbench")
def test_smoke_p1_reports_throughput_and_commits_for_ours_and_dbos(tmp_path: Path) -> None:
    pytest.importorskip("dbos")
    if not _postgres_up():
        pytest.skip("needs PostgreSQL on 127.0.0.1:5432")
    env = {**os.environ, "BENCH_DB_PREFIX": f"rivet_bench_test_{os.getpid()}"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--only", "P1", "--out", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "P1-smoke.json").read_text())
    for side in ("ours", "dbos"):
        assert result[side]["status"] == "ok"
        assert result[side]["workflows_per_s"] > 0
        assert result[side]["commits_per_step"] > 0  # every step commits at least once
    assert result["limit"]["insert_tps"] > 0
    assert "workflows/s (10 steps)" in done.stdout
