"""The example project's production defaults (case C53): no start outside DEBUG without a secret key, and the
manual's production page (docs/howto/production.md) names every environment variable the settings read."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "project" / "settings.py"
#: variables only the test suite sets (per-process test databases, worker subprocesses)
TEST_ONLY = {"RIVET_TEST_DB", "RIVET_SQLITE_PATH"}
A_SECRET = "tests-only-secret-9c1f0d7e-not-published-anywhere-else"


def manage_check(**env: str) -> subprocess.CompletedProcess:
    """``manage.py check`` of the example project with ``env`` over a clean copy of the environment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("key", [None, "", "dev-only-insecure-key-change-me"])
def test_outside_debug_the_project_refuses_to_start_without_a_secret_key(key):
    env = {"DJANGO_DEBUG": "0"} | ({} if key is None else {"DJANGO_SECRET_KEY": key})
    result = manage_check(**env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and "DJANGO_SECRET_KEY is not set" in result.stderr


def test_outside_debug_a_secret_key_is_enough_to_start():
    result = manage_check(DJANGO_DEBUG="0", DJANGO_SECRET_KEY=A_SECRET)
    assert result.returncode == 0, result.stderr


def test_in_debug_the_development_key_is_used():
    result = manage_check(DJANGO_DEBUG="1")
    assert result.returncode == 0, result.stderr


def test_production_uses_password_validators():
    code = "import project.settings as s; print(len(s.AUTH_PASSWORD_VALIDATORS))"
    env = {**os.environ, "DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": A_SECRET}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert int(out.stdout) == 4


def test_the_readme_production_section_lists_every_variable_the_settings_read():
    read = set(re.findall(r"os\.environ\.get\(\s*\"([A-Z_]+)\"", SETTINGS.read_text())) - TEST_ONLY
    assert {"DJANGO_SECRET_KEY", "DJANGO_DEBUG", "DATABASE_URL", "REDIS_URL"} <= read
    section = (ROOT / "docs" / "howto" / "production.md").read_text()
    missing = sorted(name for name in read if f"`{name}`" not in section)
    assert not missing, f"the manual's production page does not list {missing}"


def test_the_example_celery_app_is_the_readme_one():
    """project/celery.py and the manual's mysite/celery.py (docs/tutorial/install.md) agree (they differed on
    autodiscover_tasks)."""
    install = (ROOT / "docs" / "tutorial" / "install.md").read_text()
    block = re.search(r"```python\n# mysite/celery\.py\n(.*?)```", install, flags=re.S)
    assert block, "the manual's install page has no mysite/celery.py block"
    ours = (ROOT / "project" / "celery.py").read_text()
    code = ours.split("# --- the manual's mysite/celery.py", 1)[1].split("\n", 1)[1]
    assert code.strip() == block.group(1).replace("mysite", "project").strip()


def test_every_readme_settings_snippet_adds_a_key_instead_of_replacing_rivet_workflows():
    """Only the install page's settings create ``RIVET_WORKFLOWS`` (with its ``REGISTRY``); every other
    snippet of README.md and the manual (docs/) sets one key (``RIVET_WORKFLOWS["TRACE_URL"] = ...``), so a
    reader pasting it keeps the rest."""
    pages = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "spec" not in p.parts)]
    text = "\n".join(page.read_text() for page in pages)
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    creating = [block for block in blocks if re.search(r"^RIVET_WORKFLOWS\s*=", block, flags=re.M)]
    assert len(creating) == 1, creating
    assert '"REGISTRY"' in creating[0] and creating[0].startswith("# mysite/settings.py")
