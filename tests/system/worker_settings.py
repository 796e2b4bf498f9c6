"""Settings of the system tests' worker subprocesses: the project's settings plus a few env overrides.

RIVET_LIVE_WAIT_THRESHOLD (seconds), RIVET_VISIBILITY_TIMEOUT (seconds, Redis broker only).
"""

from __future__ import annotations

import os

from project.settings import *  # noqa: F403
from project.settings import CELERY_BROKER_TRANSPORT_OPTIONS, REDIS_URL, RIVET_WORKFLOWS

RIVET_WORKFLOWS = {
    **RIVET_WORKFLOWS,
    "LIVE_WAIT_THRESHOLD": float(os.environ.get("RIVET_LIVE_WAIT_THRESHOLD", "1.0")),
}
if REDIS_URL and os.environ.get("RIVET_VISIBILITY_TIMEOUT"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **CELERY_BROKER_TRANSPORT_OPTIONS,
        "visibility_timeout": float(os.environ["RIVET_VISIBILITY_TIMEOUT"]),
    }

# RIVET_SPANS_FILE: export this worker's OpenTelemetry spans as JSON lines to that file (test only)
if os.environ.get("RIVET_SPANS_FILE"):
    from tests.system import span_file

    span_file.install(os.environ["RIVET_SPANS_FILE"])
