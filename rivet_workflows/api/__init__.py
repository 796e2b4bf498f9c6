"""The HTTP API of rivet_workflows (django-ninja): ``path("api/rivet/", rivet_workflows.api.api.urls)``.

``api`` is a ready ``NinjaAPI`` (OpenAPI docs at ``docs``); ``router`` can be added to your own NinjaAPI,
but then install the error handlers with ``rivet_workflows.api.errors.install(your_api)``. DESIGN.md 6.
"""

from __future__ import annotations

from ninja import NinjaAPI

from . import errors
from .parser import BoundedJSONParser
from .views import router


class RivetAPI(NinjaAPI):
    """A ``NinjaAPI`` whose 405 responses (a method the path does not serve) use the JSON error body
    ``{group: "request", code: "method_not_allowed", message, metadata: {allowed}}`` like every other error."""

    def _get_urls(self) -> list:
        patterns = super()._get_urls()
        for pattern in patterns:
            callback = getattr(pattern, "callback", None)
            if callback is not None and not getattr(callback, "_rivet_405", False):
                pattern.callback = errors.json_method_not_allowed(self, callback)
        return patterns


api = RivetAPI(
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
