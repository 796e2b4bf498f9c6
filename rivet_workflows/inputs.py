"""Request text no database can store, found before it reaches a query (DESIGN.md 6; manual: HTTP API,
errors).

PostgreSQL refuses a NUL character in any text parameter (psycopg raises ``DataError``), and no database
takes a lone surrogate (it is not Unicode text); both used to end as a 500. The HTTP API and the admin
views check what they take from a request (path segments, query and form values and their names, the
session cookie) with ``find_bad_input`` and answer a 4xx instead. Integers get declared bounds where they
are parsed (``api.schemas``): an offset beyond PostgreSQL's ``bigint`` or SQLite's 64-bit integer is the
other half of the case.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpRequest

#: JSON-schema ``pattern`` of request text: no NUL character (lone surrogates are refused by the parser)
TEXT_PATTERN = r"^[^\x00]*$"

#: the largest ``offset`` of a page: 2**53 - 1, exact in every JSON client and far from any 64-bit limit
MAX_OFFSET = 2**53 - 1


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text (``"contains a NUL character (\\x00)"``, ``"contains a lone
    surrogate (\\udXXX)"``), or None when it can."""
    if "\x00" in value:
        return "contains a NUL character (\\x00), which cannot be stored"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = value[exc.start]
        return f"contains a lone surrogate (\\u{ord(char):04x}), which is not Unicode text"
    return None


@dataclass(frozen=True)
class BadInput:
    """One unusable value of a request: ``loc`` is ``(place, name)`` with place ``"path"``, ``"query"``,
    ``"form"`` or ``"cookie"``; ``problem`` is ``text_problem``'s sentence."""

    loc: tuple[str, str]
    problem: str

    @property
    def message(self) -> str:
        """``"query parameter 'name' contains a NUL character (\\x00), ..."``."""
        place, name = self.loc
        what = {"path": "path segment", "query": "query parameter", "form": "form field"}.get(place, place)
        return f"{what} {name!r} {self.problem}"

    def error_body(self) -> dict:
        """The 400 error body ``{group: "request", code: "invalid_input", message, metadata: {where}}``
        (``where``: ``[place, name]``)."""
        return {
            "group": "request",
            "code": "invalid_input",
            "message": self.message,
            "metadata": {"where": list(self.loc)},
        }


def _check_mapping(place: str, values: Mapping[str, Any]) -> BadInput | None:
    for name, value in values.items():
        problem = text_problem(str(name))
        if problem is not None:
            return BadInput((place, str(name)), "has a name that " + problem)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and (problem := text_problem(item)) is not None:
                return BadInput((place, str(name)), problem)
    return None


def find_bad_input(
    request: HttpRequest, path_kwargs: Mapping[str, Any], *, form: bool = False
) -> BadInput | None:
    """The first value of ``request`` that no database can store, or None.

    Checks the URL's ``path_kwargs``, every query parameter (name and values), the session cookie (Django
    looks it up in the session table) and, with ``form=True``, the fields of a form-encoded POST body (the
    admin's buttons; the JSON API leaves its body to its schemas and ``serde``).
    """
    found = _check_mapping("path", path_kwargs) or _check_mapping("query", dict(request.GET.lists()))
    if found is None and form and request.method == "POST":
        content_type = request.content_type or ""
        if content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
            found = _check_mapping("form", dict(request.POST.lists()))
    if found is None:
        name = settings.SESSION_COOKIE_NAME
        cookie = request.COOKIES.get(name)
        if cookie is not None and (problem := text_problem(cookie)) is not None:
            found = BadInput(("cookie", name), problem)
    return found
