"""URL configuration of the example project."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

import rivet_workflows.metrics
from rivet_workflows.api import api as rivet_api

urlpatterns = [
    path("admin/", admin.site.urls),
    # The HTTP API (DESIGN.md section 6); OpenAPI docs at /api/rivet/docs
    path("api/rivet/", rivet_api.urls),
    # Prometheus metrics (manual: docs/howto/monitoring.md)
    path("metrics", rivet_workflows.metrics.view),
]
