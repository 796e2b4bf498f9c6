"""The manual's install page (docs/tutorial/install.md) works verbatim in a new project (case C64), and every extra installs what
it names (case C78).

Builds the wheel with ``make dist`` and installs it in a fresh virtualenv: first with the ``redis`` extra
alone, checking that kombu's Redis transport imports (what a Celery worker on Redis loads first), then with
every runtime extra, checking that each one's modules import. Runs ``django-admin startproject mysite``,
copies the install page's ``# mysite/...`` blocks into it, adds a registry with a two-step workflow, migrates on
SQLite, starts ``celery -A mysite worker -B -l info`` on the embedded filesystem broker and ``manage.py
runserver``, creates an actor over HTTP without a token (the install page's development setting) and checks that
the worker completed the workflow, that the idle sweep kept the worker log quiet, and that ``daphne
mysite.asgi:application`` accepts the actor's WebSocket. Then the install page's Redis settings (on a private
redis-server) and a worker on Redis that completes a workflow.

Slow (about a minute and a half, most of it pip; pip's cache is reused) and independent of the suite's
database: it runs on the SQLite pass only (skipped when DATABASE_URL is set), so CI runs it once.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rivet_workflows.testing import GroupProcess

pytestmark = [
    pytest.mark.system,
    pytest.mark.install,
    pytest.mark.skipif(
        bool(os.environ.get("DATABASE_URL")),
        reason="the install test runs once per CI, on the SQLite pass (its new project uses SQLite)",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "docs" / "tutorial" / "install.md"

REGISTRY = """
from rivet_workflows import setup, workflow


def greet(step):
    step.state["greeting"] = f"hello {step.state['name']}"
    return step.state["greeting"]


async def run(ctx):
    greeting = await ctx.step("greet", greet)
    return await ctx.step("shout", lambda step: greeting.upper())


greeter = workflow(
    state={"name": None, "greeting": None},
    on_create=lambda c, input: c.state.update(name=input["name"]),
    run=run,
)

registry = setup(use={"greeter": greeter})
"""


def install_section() -> str:
    return INSTALL.read_text()


def readme_files() -> dict[str, tuple[str, bool]]:
    """The install page's python blocks headed ``# mysite/<file>``: path -> (code, append?)."""
    files: dict[str, tuple[str, bool]] = {}
    for block in re.findall(r"```python\n(.*?)```", install_section(), flags=re.S):
        header, _, body = block.partition("\n")
        match = re.fullmatch(r"# (mysite/[\w/]+\.py)(: add at the end)?", header.strip())
        if match:
            files[match.group(1)] = (body, bool(match.group(2)))
    return files


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a new user's shell: nothing of this checkout's venv, settings or services."""
    drop = ("DJANGO_", "RIVET_", "DATABASE_URL", "REDIS_URL", "PYTHONPATH", "VIRTUAL_ENV", "CELERY_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def run(cmd: list[str], cwd: Path, timeout: float = 300) -> str:
    result = subprocess.run(cmd, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{cmd} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout + result.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: GroupProcess, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.alive(), f"{proc.name} exited:\n{proc.tail()}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{proc.name} did not listen on {port}:\n{proc.tail()}")


def http(method: str, url: str, body: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def websocket_handshake(port: int, path: str) -> str:
    """The status line the server answers to a WebSocket upgrade of ``path`` (``HTTP/1.1 101 ...``)."""
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: http://localhost:{port}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request.encode())
        return sock.recv(4096).decode("latin-1").split("\r\n", 1)[0]


#: the runtime extras (pyproject.toml) and a module of each that must import once it is installed
EXTRAS = {
    "postgres": ["psycopg"],
    "redis": ["kombu.transport.redis", "redis", "channels_redis.core"],
    "live": ["daphne.server"],
    "server": ["gunicorn.app.wsgiapp"],
    "otel": ["opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter"],
    "metrics": ["prometheus_client"],
    "ai": ["pydantic_ai", "rivet_workflows.contrib.pydantic_ai"],
}


def imports(python: str, modules: list[str], cwd: Path) -> None:
    run([python, "-c", "; ".join(f"import {m}" for m in modules)], cwd)


def test_the_manual_install_page_works_verbatim_in_a_new_project(tmp_path):
    # the wheel and the sdist, as `make dist` builds them
    dist = tmp_path / "dist"
    run(["make", "dist", f"DIST={dist}"], ROOT)
    wheels = sorted(dist.glob("rivet_workflows-*-py3-none-any.whl"))
    assert len(wheels) == 1 and len(list(dist.glob("rivet_workflows-*.tar.gz"))) == 1
    assert f"dist/{wheels[0].name}" in install_section(), "the install page names another wheel file"

    # a fresh virtualenv: the wheel with the redis extra alone brings all that kombu's Redis transport
    # imports (nothing else installed could bring it by chance), then every runtime extra
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    bin_dir = venv / "bin"
    pip = [str(bin_dir / "pip"), "install", "-q", "--disable-pip-version-check"]
    run([*pip, f"{wheels[0]}[redis]"], tmp_path)
    imports(str(bin_dir / "python"), EXTRAS["redis"], tmp_path)
    run([*pip, f"{wheels[0]}[{','.join(EXTRAS)}]"], tmp_path)
    imports(str(bin_dir / "python"), [m for modules in EXTRAS.values() for m in modules], tmp_path)

    # a new project, wired with the install page's blocks
    site = tmp_path / "site"
    site.mkdir()
    run([str(bin_dir / "django-admin"), "startproject", "mysite", str(site)], tmp_path)
    files = readme_files()
    expected = {
        "mysite/settings.py",
        "mysite/urls.py",
        "mysite/celery.py",
        "mysite/__init__.py",
        "mysite/asgi.py",
    }
    assert set(files) == expected
    for name, (code, append) in files.items():
        target = site / name
        target.write_text((target.read_text() + "\n\n" if append else "") + code)
    (site / "mysite" / "registry.py").write_text(REGISTRY)
    python = str(bin_dir / "python")
    check = run([python, "manage.py", "check"], site)
    assert "ERRORS" not in check
    run([python, "manage.py", "migrate", "--noinput"], site)

    env = clean_env()
    port, asgi_port = free_port(), free_port()
    worker = GroupProcess(
        "worker",
        [str(bin_dir / "celery"), "-A", "mysite", "worker", "-B", "-l", "info"],
        env=env,
        log_path=tmp_path / "worker.log",
        cwd=site,
    )
    server = GroupProcess(
        "runserver",
        [python, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        env=env,
        log_path=tmp_path / "runserver.log",
        cwd=site,
    )
    daphne = GroupProcess(
        "daphne",
        [str(bin_dir / "daphne"), "-b", "127.0.0.1", "-p", str(asgi_port), "mysite.asgi:application"],
        env=env,
        log_path=tmp_path / "daphne.log",
        cwd=site,
    )
    try:
        wait_for_port(port, server)
        base = f"http://127.0.0.1:{port}/api/rivet"
        # the install page's curl, no token: its development setting (DEBUG is on in a new project)
        status, created = http(
            "POST", f"{base}/actors", {"name": "greeter", "key": ["k-1"], "input": {"name": "rivet"}}
        )
        assert status == 200, created
        assert created["created"] is True
        actor_id = created["actor_id"]

        deadline, detail = time.monotonic() + 90, {}
        while time.monotonic() < deadline:
            assert worker.alive(), f"the worker exited:\n{worker.tail()}"
            _, detail = http("GET", f"{base}/actors/{actor_id}")
            if detail.get("workflow_state") in ("completed", "failed"):
                break
            time.sleep(0.3)
        assert detail.get("workflow_state") == "completed", f"{detail}\n{worker.tail(60)}"
        assert detail["output"] == "HELLO RIVET"
        assert detail["state"] == {"name": "rivet", "greeting": "hello rivet"}

        wait_for_port(asgi_port, daphne)
        assert " 101 " in websocket_handshake(asgi_port, f"/ws/rivet/actors/{actor_id}/") + " "
        time.sleep(3)  # a few idle sweeps (every second)
    finally:
        for proc in (daphne, server, worker):
            proc.stop(grace=10)
    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert re.search(r"Task rivet_workflows\.run_actor\[.*\] succeeded", log), log[-3000:]
    beats = re.findall(r"Sending due task rivet sweep|Task rivet_workflows\.sweep\[", log)
    assert beats == [], f"the idle sweep logged {len(beats)} INFO lines:\n{log[-2000:]}"

    # the install page's Redis broker settings (a private redis-server), a worker on Redis runs a workflow
    redis_port = free_port()
    redis_server = GroupProcess(
        "redis",
        [shutil.which("redis-server") or "redis-server", "--bind", "127.0.0.1", "--port", str(redis_port),
         "--save", "", "--appendonly", "no"],
        env=env,
        log_path=tmp_path / "redis.log",
    )  # fmt: skip
    settings = site / "mysite" / "settings.py"
    settings.write_text(
        settings.read_text()
        + "\n\n"
        + redis_settings().replace("redis://127.0.0.1:6379/0", f"redis://127.0.0.1:{redis_port}/0")
        + "\nCELERY_BROKER_TRANSPORT_OPTIONS = {}  # the install page: drop the filesystem broker's options\n"
    )
    redis_worker = GroupProcess(
        "redis-worker",
        [str(bin_dir / "celery"), "-A", "mysite", "worker", "-l", "info"],
        env=env,
        log_path=tmp_path / "redis-worker.log",
        cwd=site,
    )
    try:
        wait_for_port(redis_port, redis_server)
        script = (
            "import time\n"
            "from rivet_workflows import django_runtime, models\n"
            "h = django_runtime.client().greeter.create('k-redis', input={'name': 'redis'})\n"
            "for _ in range(600):\n"
            "    actor = models.Actor.objects.get(pk=h.actor_id)\n"
            "    if actor.workflow_state in ('completed', 'failed'):\n"
            "        break\n"
            "    time.sleep(0.1)\n"
            "print('RESULT', actor.workflow_state, actor.output)\n"
        )
        out = run([python, "manage.py", "shell", "-c", script], site)
        assert redis_worker.alive(), f"the worker on Redis exited:\n{redis_worker.tail(40)}"
        assert "RESULT completed HELLO REDIS" in out, f"{out}\n{redis_worker.tail(40)}"
    finally:
        redis_worker.stop(grace=10)
        redis_server.stop()
    log = (tmp_path / "redis-worker.log").read_text(errors="replace")
    assert f"127.0.0.1:{redis_port}/0" in log and "ModuleNotFoundError" not in log, log[-3000:]


def redis_settings() -> str:
    """The install page's settings block for PostgreSQL and Redis, without its DATABASES (the new
    project stays on SQLite: the broker is what this checks)."""
    (block,) = [
        b for b in re.findall(r"```python\n(.*?)```", install_section(), flags=re.S) if "redis://" in b
    ]
    return re.sub(r"DATABASES = \{.*?\}\}\n", "", block, flags=re.S)
