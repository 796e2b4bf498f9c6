"""The HTTP API of rivet_workflows (django-ninja): ``path("api/rivet/", rivet_workflows.api.api.urls)``.

``api`` is a ready ``NinjaAPI`` (OpenAPI docs at ``docs``); ``router`` can be added to your own NinjaAPI,
but then install the error handlers with ``rivet_workflows.api.errors.install(your_api)`` (unknown paths
under your prefix stay Django's 404 page unless you end your URL list with
``errors.not_found_pattern(your_api)``). DESIGN.md 6.
"""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction
from django.db import connections
from ninja import NinjaAPI

from . import errors
from .parser import BoundedJSONParser
from .schedules import router as schedules_router
from .views import router

#: URL names of the schema and docs pages
_DOCS_PAGES = frozenset({"openapi-json", "openapi-view"})


class RivetAPI(NinjaAPI):
    """A ``NinjaAPI`` whose every error is the JSON body ``{group, code, message, metadata}``: a method the
    path does not serve is a 405 ``method_not_allowed`` (``metadata.allowed``), a path no endpoint serves
    (``/api/rivet/nope``, ``/api/rivet/actors/``) a 404 ``not_found``, and text no database can store in a
    path segment, query parameter or the session cookie a 422/400 before any query (``errors.reject_bad_input``).
    """

    def _get_urls(self) -> list:
        patterns = super()._get_urls()
        not_found = errors.not_found_view(self)
        for pattern in patterns:
            # ninja's root view raises Http404 outside the API's handlers: Django's HTML page
            if getattr(pattern, "name", None) == "api-root":
                pattern.callback = not_found
            callback = getattr(pattern, "callback", None)
            if callback is not None and not getattr(callback, "_rivet_405", False):
                if getattr(pattern, "name", None) not in _DOCS_PAGES:  # they read nothing of the request
                    callback = errors.reject_bad_input(self, callback)
                pattern.callback = errors.json_method_not_allowed(self, callback)
                if iscoroutinefunction(pattern.callback):
                    # Django refuses an async view under ATOMIC_REQUESTS, and a waiting send must not hold a
                    # transaction (and so a connection) open while it waits (docs/howto/calling.md)
                    pattern.callback._non_atomic_requests = set(connections)
        # last: it matches everything the patterns above did not
        return [*patterns, errors.not_found_pattern(self)]


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
api.add_router("", schedules_router)

__all__ = ["api", "router"]
