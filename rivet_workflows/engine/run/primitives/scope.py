"""What the primitives need of the workflow context ``ctx`` that calls them, typed structurally.

The workflow context (``context.WorkflowContext``) sits above the primitives and calls them; the primitives
name it through this Protocol instead of importing it, so the import graph has no circle, type-only imports
included (DESIGN.md section 15). It lists only what the primitives read: the run's session, the scope's path,
whether a rollback checkpoint precedes, the nested scope, the end-of-scope check and the guarded start of a
primitive.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..session import RunSession


class WorkflowContextRole(Protocol):
    """The workflow context ``ctx`` as the primitives see it (``context.WorkflowContext``)."""

    #: the run this context belongs to
    _session: RunSession
    #: the scope's path in the history ("" for the root)
    _scope: str
    #: a ``ctx.rollback_checkpoint`` precedes in this scope (steps may then have ``rollback=``)
    _checkpoint: bool

    def child(self, scope: str) -> WorkflowContextRole: ...

    def end_scope(self) -> None: ...

    def _run(
        self, name: Any, what: str, make: Callable[[str], Coroutine[Any, Any, Any]]
    ) -> Awaitable[Any]: ...
