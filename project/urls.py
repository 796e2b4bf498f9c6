"""URL configuration of the example project."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

urlpatterns = [
    path("admin/", admin.site.urls),
    # The HTTP API (DESIGN.md section 6) is mounted here by the API module:
    # path("api/rivet/", rivet_api.urls),
]
