"""Typed step and try failures: ``StepFailure``, ``TryFailure`` and ``ErrorInfo`` (DESIGN.md section 13).

Each is a ``dict`` (so ``failure["error"]["message"]`` and ``failure == {...}`` keep working) whose fields
are also attributes (``failure.error.message``, as the spec writes it). A field a dict of the old shape
leaves out reads as ``None`` (``error.stack``, ``try_failure.step``). The serializer stores them with a tag
so a failure kept in state comes back as the same type (``serde``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar


class FailureRecord(dict):
    """A ``dict`` with its fields as read-only attributes; the base of the three failure types."""

    #: the fields, in order (attributes; a missing one reads as None)
    FIELDS: ClassVar[tuple[str, ...]] = ()
    #: the serializer's tag for this type
    TAG: ClassVar[str] = ""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name in type(self).FIELDS:
            return self.get(name)
        raise AttributeError(
            f"{type(self).__name__!r} has no field {name!r} (fields: {', '.join(self.FIELDS)})"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"{type(self).__name__} fields are read-only as attributes; use failure[{name!r}] = ..."
        )

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={self.get(k)!r}" for k in self.FIELDS)
        return f"{type(self).__name__}({fields})"

    def __reduce__(self) -> Any:  # noqa: D105 - pickles as its type with the plain items
        return (type(self).from_dict, (self.to_dict(),))

    def __copy__(self) -> FailureRecord:
        return type(self).from_dict(self)

    def __deepcopy__(self, memo: dict) -> FailureRecord:
        return type(self).from_dict(self.to_dict())

    def to_dict(self) -> dict:
        """A plain ``dict`` copy (nested failures as plain dicts too): the stored and the HTTP shape."""
        return {k: (v.to_dict() if isinstance(v, FailureRecord) else v) for k, v in self.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        """Build one from a mapping of the stored shape (extra keys are kept)."""
        raise NotImplementedError


class ErrorInfo(FailureRecord):
    """A stored exception: ``name`` (type name), ``message``, ``stack`` and ``metadata`` (None when absent;
    DESIGN.md section 3). ``ErrorInfo(name, message, stack=None, metadata=None)``."""

    FIELDS = ("name", "message", "stack", "metadata")
    TAG = "error_info"
    __slots__ = ()

    def __init__(
        self,
        name: str | None = None,
        message: str | None = None,
        stack: str | None = None,
        metadata: Any = None,
    ) -> None:
        super().__init__(name=name, message=message)
        if stack is not None:
            self["stack"] = stack
        if metadata is not None:
            self["metadata"] = metadata

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ErrorInfo:
        info = cls(data.get("name"), data.get("message"), data.get("stack"), data.get("metadata"))
        for key, value in data.items():
            if key not in cls.FIELDS and value is not None:
                dict.__setitem__(info, key, value)
        return info


def _error(value: Any) -> Any:
    if isinstance(value, Mapping) and not isinstance(value, ErrorInfo):
        return ErrorInfo.from_dict(value)
    return value


class StepFailure(FailureRecord):
    """``StepResult.failure`` of ``ctx.try_step``: ``kind`` (critical, timeout, exhausted, rollback),
    ``step_name``, ``attempts`` and ``error`` (an ``ErrorInfo``) (ENGINE-SEMANTICS.md section 3)."""

    FIELDS = ("kind", "step_name", "attempts", "error")
    TAG = "step_failure"
    __slots__ = ()

    def __init__(self, kind: str, step_name: str, attempts: int, error: Any) -> None:
        super().__init__(kind=kind, step_name=step_name, attempts=attempts, error=_error(error))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepFailure:
        failure = cls(data.get("kind"), data.get("step_name"), data.get("attempts"), data.get("error"))
        for key, value in data.items():
            if key not in cls.FIELDS:
                dict.__setitem__(failure, key, value)
        return failure


class TryFailure(FailureRecord):
    """``TryResult.failure`` of ``ctx.try_``: ``source`` (step, join, race, block), ``name``, ``error`` (an
    ``ErrorInfo``) and, for a step, ``step`` (its ``StepFailure``; None otherwise)."""

    FIELDS = ("source", "name", "error", "step")
    TAG = "try_failure"
    __slots__ = ()

    def __init__(self, source: str, name: str | None, error: Any, step: Any = None) -> None:
        super().__init__(source=source, name=name, error=_error(error))
        if step is not None:
            self["step"] = step if isinstance(step, StepFailure) else StepFailure.from_dict(step)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TryFailure:
        failure = cls(data.get("source"), data.get("name"), data.get("error"), data.get("step"))
        for key, value in data.items():
            if key not in cls.FIELDS:
                dict.__setitem__(failure, key, value)
        return failure


#: the serializer's tag of each type, and back
TAGS: dict[type, str] = {cls: cls.TAG for cls in (ErrorInfo, StepFailure, TryFailure)}
BY_TAG: dict[str, type[FailureRecord]] = {cls.TAG: cls for cls in (ErrorInfo, StepFailure, TryFailure)}
