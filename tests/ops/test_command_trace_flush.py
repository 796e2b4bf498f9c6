"""A management command never waits more than ``tracing.COMMAND_FLUSH_SECONDS`` on an unreachable
collector (DESIGN.md section 16; docs/howto/monitoring.md): with the README's OTLP set-up and no
collector, ``rivet start`` used to spend about 9 s after its work retrying the export."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from rivet_workflows import tracing
from tests.examples.test_demo import BASE_DIR, _manage, demo_env  # noqa: F401 - demo_env is a fixture

pytestmark = pytest.mark.system

pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")


def _unreachable_endpoint() -> str:
    """An OTLP endpoint on a local port nothing listens on (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_command_with_an_unreachable_collector_ends_within_its_flush_bound(demo_env):  # noqa: F811
    assert _manage(["migrate", "-v0"], demo_env, timeout=120).returncode == 0
    env = dict(
        demo_env,
        DJANGO_SETTINGS_MODULE="tests.ops.otel_settings",
        OTEL_EXPORTER_OTLP_ENDPOINT=_unreachable_endpoint(),
    )
    proc = subprocess.Popen(
        [sys.executable, "-u", "tests/ops/timed_manage.py", "rivet", "start", "payment_actor", "otel-1"],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()  # printed once the actor is created (its rivet.create span ended)
    printed = time.monotonic()  # CLOCK_MONOTONIC: the same clock in the child
    _, stderr = proc.communicate(timeout=60)
    assert line.startswith('started payment_actor ["otel-1"]'), (line, stderr)
    assert proc.returncode == 0, stderr
    done = float(stderr.rsplit("exit-hooks-done ", 1)[1].split()[0])
    # from its output to its last exit hook: the flush bound, not the exporter's retries (7 s before)
    assert done - printed < tracing.COMMAND_FLUSH_SECONDS + 0.5, done - printed
