"""Every ``manage.py rivet`` command piped into a reader that stops early (``rivet show ID | head``) ends
quietly: no ``BrokenPipeError`` traceback (DESIGN.md section 16; docs/howto/admin.md)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.examples.test_demo import BASE_DIR, _manage, demo_env  # noqa: F401 - demo_env is a fixture

pytestmark = pytest.mark.system


def _closed_pipe(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run ``manage.py rivet ARGS`` with its stdout a pipe whose reading end is closed before it writes."""
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "rivet", *args],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()  # the reader went away (head read its lines and exited)
    stderr = proc.stderr.read()
    proc.wait(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)


def test_rivet_commands_piped_into_a_reader_that_stops_end_without_a_traceback(demo_env):  # noqa: F811
    assert _manage(["migrate", "-v0"], demo_env, timeout=120).returncode == 0
    started = _manage(["rivet", "start", "payment_actor", "pipe-1"], demo_env, timeout=60)
    assert started.returncode == 0, started.stderr
    actor_id = started.stdout.strip().split(": ")[-1]
    for args in (["show", actor_id], ["list"], ["check"], ["export", actor_id]):
        done = _closed_pipe(args, demo_env)
        assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, (args, done.stderr)
        assert done.returncode == 141, (args, done.returncode, done.stderr)
