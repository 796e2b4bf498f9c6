"""The test matrix, one runner (README "Install in your project"): the suite on each supported pair of
Python and Django, each in its own virtualenv under .nox/ (nox's venv backend).

    nox -l                                   # the sessions
    nox -s "tests(3.13-django6.1)"          # Python 3.13 + Django 6.1 on DATABASE_URL / REDIS_URL
    nox -R -s "tests(3.11-django5.2)" -- tests/api -x   # reuse the built venv; arguments go to pytest

The database and broker are whatever DATABASE_URL and REDIS_URL say (SQLite and the embedded broker when
unset). Interpreters: ``pythonX.Y`` on PATH when it runs, else pyenv's (``$(pyenv root)/versions/X.Y.*``), which this
file puts on PATH; nox reports a session whose interpreter is missing as skipped (``--error-on-missing-
interpreters`` makes that a failure).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import nox

#: the supported pairs that CI runs (pyproject.toml's classifiers list every supported version)
MATRIX = {"3.11": "5.2", "3.13": "6.1"}

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = False


def runs(command: str) -> bool:
    """True when ``command`` is on PATH and starts (a pyenv shim of a version not selected does not)."""
    path = shutil.which(command)
    return (
        path is not None
        and subprocess.run([path, "-c", ""], capture_output=True, check=False).returncode == 0
    )


def pyenv_bin_dirs(versions: list[str]) -> list[str]:
    """The bin folders of pyenv's newest X.Y.* for each X.Y in ``versions`` whose ``pythonX.Y`` does not run
    from PATH."""
    missing = [v for v in versions if not runs(f"python{v}")]
    if not missing:
        return []
    root = os.environ.get("PYENV_ROOT")
    if not root and shutil.which("pyenv"):
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False).stdout.strip()
    root = root or str(Path.home() / ".pyenv")
    found = []
    for version in missing:
        candidates = sorted(
            Path(root, "versions").glob(f"{version}.*/bin/python{version}"),
            key=lambda p: [int(part) for part in p.parts[-3].split(".") if part.isdigit()],
        )
        if candidates:
            found.append(str(candidates[-1].parent))
    return found


os.environ["PATH"] = os.pathsep.join([*pyenv_bin_dirs(list(MATRIX)), os.environ.get("PATH", "")])


@nox.session(venv_backend="venv")
@nox.parametrize(
    ("python", "django"), [nox.param(py, dj, id=f"{py}-django{dj}") for py, dj in MATRIX.items()]
)
def tests(session: nox.Session, django: str) -> None:
    """The whole suite (pytest, arguments after ``--``) with Django ``django`` on this Python."""
    session.install("-e", ".[dev]", f"Django~={django}.0")
    session.run(
        "python", "-c", "import django, sys; print('Django', django.get_version(), 'on', sys.version)"
    )
    session.run("python", "-m", "pytest", "-q", *session.posargs)
