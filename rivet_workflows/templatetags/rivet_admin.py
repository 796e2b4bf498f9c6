"""Template filters of the admin inspector: ``{% load rivet_admin %}`` then ``rivet_time`` and ``rivet_key``."""

from __future__ import annotations

from typing import Any

from django import template

from .. import display

register = template.Library()


@register.filter
def rivet_time(value: Any, style: str = "") -> str:
    """``display.format_time``: ``{{ t|rivet_time }}`` date and time, ``{{ t|rivet_time:"time" }}`` time only,
    ``{{ t|rivet_time:"ms" }}`` time with milliseconds; always in the current time zone, its name shown."""
    return display.format_time(value, precise=style == "ms", date=style not in ("time", "ms"))


@register.filter
def rivet_key(value: Any, limit: int | str = 0) -> str:
    """An actor key as JSON (``display.key_json``), cut to ``limit`` characters when given."""
    text = display.key_json(value)
    return display.shorten(text, int(limit)) if limit else text
