"""Actor keys: what a key may hold and how it is stored (a list of str and int parts; DESIGN.md section 2).

``engine.client`` re-exports these names (``client.normalize_key``, ``client.MAX_KEY_INT``)."""

from __future__ import annotations

from typing import Any

from . import errors

#: the largest magnitude of an integer key part: what every JSON client carries exactly (2**53 - 1)
MAX_KEY_INT = 2**53 - 1


def display_part(part: Any) -> str:
    """``repr(part)`` cut to 60 characters (for an error message)."""
    text = repr(part)
    return text if len(text) <= 60 else text[:57] + "..."


def normalize_key(key: Any) -> list:
    """An actor key as stored: a ``str`` or an ``int`` becomes ``[key]``, a list or tuple a list.

    Every part is a ``str`` or an ``int`` (not a ``bool``) within +-``MAX_KEY_INT``, the same key type as
    the HTTP API's. Raises ``InvalidKeyError`` (a ``TypeError``) for anything else: floats (NaN too),
    bools, None, nested lists or dicts.
    """
    parts = [key] if isinstance(key, (str, int)) and not isinstance(key, bool) else key
    if not isinstance(parts, (list, tuple)):
        raise errors.InvalidKeyError(
            f"an actor key is a str, an int or a list of them, got {type(key).__name__}",
            type=type(key).__name__,
        )
    for index, part in enumerate(parts):
        if isinstance(part, str) or (
            isinstance(part, int) and not isinstance(part, bool) and abs(part) <= MAX_KEY_INT
        ):
            continue
        integer = isinstance(part, int) and not isinstance(part, bool)
        what = "an int out of range" if integer else type(part).__name__
        raise errors.InvalidKeyError(
            f"actor key part {index} is {display_part(part)} ({what}); a key part is a str or an int "
            f"within +-{MAX_KEY_INT}",
            index=index,
            type=type(part).__name__,
        )
    return list(parts)
