"""The example project's API auth (tester finding 3): open to anonymous callers only in dev mode, token
from the environment, never open outside dev mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

API = "/api/rivet"
ROOT = Path(__file__).resolve().parents[2]


def _project_api_auth() -> str:
    # read before the rivet fixture overrides RIVET_WORKFLOWS: these are the example project's settings
    return settings.RIVET_WORKFLOWS["API_AUTH"]


def create(client, key="a", **headers):
    return client.post(
        f"{API}/actors",
        data=json.dumps({"name": "counter", "key": key}),
        content_type="application/json",
        **headers,
    )


def test_example_project_api_is_usable_anonymously_in_dev_mode(client, rivet):
    rivet.configure(DEV_MODE=True, API_AUTH="rivet_workflows.api.auth.dev_mode_api_auth")
    created = create(client)
    assert created.status_code == 200, created.content
    actor_id = created.json()["actor_id"]
    action = client.post(
        f"{API}/actors/{actor_id}/actions/increment",
        data=json.dumps({"args": [2]}),
        content_type="application/json",
    )
    assert action.status_code == 200, action.content
    assert client.get(f"{API}/actors").json()["count"] == 1
    # a wrong token is still refused, even in dev mode
    assert create(client, HTTP_AUTHORIZATION="Bearer wrong").status_code == 401


def test_example_project_api_is_closed_outside_dev_mode(client, rivet):
    rivet.configure(DEV_MODE=False, API_AUTH="rivet_workflows.api.auth.dev_mode_api_auth", API_TOKEN="tok")
    refused = create(client)
    assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"
    assert client.get(f"{API}/actors").status_code == 401
    assert create(client, HTTP_AUTHORIZATION="Bearer tok").status_code == 200


def test_example_project_settings_use_dev_auth_and_read_the_token_from_the_environment():
    assert _project_api_auth() == "rivet_workflows.api.auth.dev_mode_api_auth"
    env = {**os.environ, "RIVET_API_TOKEN": "from-env", "RIVET_INSPECTOR_TOKEN": "insp", "DJANGO_DEBUG": "0"}
    env["DJANGO_SECRET_KEY"] = "a-test-secret-key-that-is-not-the-published-one"
    code = "import json, project.settings as s; print(json.dumps(s.RIVET_WORKFLOWS))"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    conf = json.loads(out)
    assert conf["API_TOKEN"] == "from-env"
    assert conf["INSPECTOR_TOKEN"] == "insp"
    assert conf["DEV_MODE"] is False
