"""Process control for system tests and the demo: a subprocess in its own process group, killable as a crash."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any


class GroupProcess:
    """A subprocess in its own process group, its output in a log file: what the demo and the system tests
    use to run Celery workers (and beat, Redis) that they can SIGKILL as a crash would.

    ``cmd`` is the argument list, ``env`` the whole environment, ``log_path`` the file that receives stdout
    and stderr, ``cwd`` the working directory. ``kill()`` sends SIGKILL to the whole group (a worker's
    beat or pool children go with it), ``stop(grace)`` SIGTERM then SIGKILL after ``grace`` seconds.
    """

    def __init__(
        self, name: str, cmd: list[str], *, env: dict[str, str], log_path: Any, cwd: Any = None
    ) -> None:
        self.name = name
        self.log_path = log_path
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in kill()/stop()
        self.proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def pid(self) -> int:
        """The process id (also the process group id)."""
        return self.proc.pid

    def alive(self) -> bool:
        """True while the process has not exited."""
        return self.proc.poll() is None

    def kill(self, timeout: float = 15.0) -> None:
        """SIGKILL the process group and reap the process (waits up to ``timeout`` seconds)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=timeout)
        if not self._log.closed:
            self._log.close()

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the process group (a Celery warm shutdown), then SIGKILL after ``grace`` seconds."""
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=grace)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the log ("" if it cannot be read)."""
        try:
            with open(self.log_path, errors="replace") as f:
                return "\n".join(f.read().splitlines()[-lines:])
        except OSError:
            return ""
