"""The HTTP API of rivet_workflows (django-ninja): ``path("api/rivet/", rivet_workflows.api.api.urls)``.

``api`` is a ready ``NinjaAPI`` (OpenAPI docs at ``docs``); ``router`` can be added to your own NinjaAPI,
but then install the error handlers with ``rivet_workflows.api.errors.install(your_api)``. DESIGN.md 6.
"""

from __future__ import annotations

from ninja import NinjaAPI

from . import errors
from .parser import BoundedJSONParser
from .views import router

api = NinjaAPI(
    title="rivet_workflows",
    version="1",
    description="Actors, actions, queues and the workflow inspector of rivet_workflows.",
    urls_namespace="rivet_api",
    docs_url="/docs",
    parser=BoundedJSONParser(),
)
errors.install(api)
api.add_router("", router)

__all__ = ["api", "router"]
