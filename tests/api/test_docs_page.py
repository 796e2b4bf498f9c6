"""The OpenAPI docs page works offline (tester finding 16): with "ninja" in INSTALLED_APPS django-ninja
renders its bundled Swagger UI from the project's static files; the page references no other host, and in
development ``daphne project.asgi:application`` serves those files."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles import finders


def test_docs_page_uses_only_local_static_files(client, rivet):
    assert "ninja" in settings.INSTALLED_APPS
    response = client.get("/api/rivet/docs")
    assert response.status_code == 200
    html = response.content.decode()
    urls = re.findall(r'(?:src|href)\s*=\s*"([^"]+)"', html)
    assert any("swagger-ui-bundle.js" in url for url in urls), urls
    for url in urls:
        assert not re.match(r"^(https?:)?//", url), f"external URL on the docs page: {url}"
    assert "cdn.jsdelivr.net" not in html and "unpkg.com" not in html
    # every static asset the page names exists in the static files
    for url in urls:
        if url.startswith(settings.STATIC_URL) or url.startswith("/" + settings.STATIC_URL):
            name = url.split(settings.STATIC_URL, 1)[1]
            assert finders.find(name), f"{url} is not a static file"
    schema = client.get("/api/rivet/openapi.json")
    assert schema.status_code == 200 and schema.json()["paths"]


def test_the_schema_has_no_repeated_key(client, rivet):
    """Swagger UI refuses a schema with a key twice in one object ("duplicated mapping key": the docs page
    rendered nothing, a trial finding: the stream route's 200 was listed twice); ``json.loads`` would keep
    the last one silently, so the schema is read keeping every pair."""
    import json

    repeated: list[list[str]] = []

    def pairs(items: list[tuple[str, object]]) -> dict:
        keys = [key for key, _ in items]
        if len(set(keys)) != len(keys):
            repeated.append(keys)
        return dict(items)

    json.loads(client.get("/api/rivet/openapi.json").content, object_pairs_hook=pairs)
    assert repeated == []
    stream = json.loads(client.get("/api/rivet/openapi.json").content)["paths"][
        "/api/rivet/actors/{actor_id}/streams/{name}"
    ]["get"]["responses"]["200"]["content"]
    assert set(stream) == {"application/json", "text/event-stream"}


ASGI_STATIC = """
import asyncio
from asgiref.testing import ApplicationCommunicator
from project.asgi import application

async def get(path):
    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": [],
             "http_version": "1.1", "scheme": "http", "server": ("localhost", 8000)}
    app = ApplicationCommunicator(application, scope)
    await app.send_input({"type": "http.request", "body": b""})
    start = await app.receive_output(10)
    return start["status"]

print(asyncio.run(get("/static/ninja/swagger-ui-bundle.js")), asyncio.run(get("/static/admin/css/base.css")))
"""


def test_daphne_serves_the_docs_static_files_in_development():
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DJANGO_DEBUG": "1", "DJANGO_SETTINGS_MODULE": "project.settings"}
    done = subprocess.run(
        [sys.executable, "-c", ASGI_STATIC], cwd=root, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["200", "200"]
