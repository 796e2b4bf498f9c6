"""Child-process protocol: each side of a benchmark runs in its own interpreter and reports one JSON line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

MARK = "BENCH_RESULT "
ROOT = Path(__file__).resolve().parent.parent


def emit(result: dict[str, Any]) -> None:
    """Print ``result`` as the child's answer (one marked JSON line on stdout)."""
    sys.stdout.write(MARK + json.dumps(result) + "\n")
    sys.stdout.flush()


def run_child(
    module: str,
    bench: str,
    params: dict[str, Any],
    *,
    env: dict[str, str] | None = None,
    timeout: float = 600.0,
) -> dict[str, Any]:
    """Run ``python -m module bench '<params json>'`` from the repo root and return its marked result.

    ``env`` entries are added to this process's environment. Raises ``RuntimeError`` with the child's
    stderr tail when it exits non-zero or reports nothing; ``subprocess.TimeoutExpired`` after
    ``timeout`` seconds.
    """
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", module, bench, json.dumps(params)],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARK):
            if proc.returncode != 0:
                break
            return json.loads(line[len(MARK) :])
    tail = "\n".join((proc.stderr or proc.stdout).splitlines()[-25:])
    raise RuntimeError(f"{module} {bench} exited {proc.returncode}:\n{tail}")


def child_main(benches: dict[str, Any]) -> None:
    """Entry point of a side module: ``argv[1]`` names the benchmark, ``argv[2]`` holds JSON params."""
    name, params = sys.argv[1], json.loads(sys.argv[2] if len(sys.argv) > 2 else "{}")
    if name not in benches:
        raise SystemExit(f"unknown benchmark {name!r}; known: {sorted(benches)}")
    emit(benches[name](**params))
