"""Request and response schemas of the HTTP API (DESIGN.md section 6)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Field, Schema
from pydantic import StrictBool


class ErrorOut(Schema):
    """Every error body: ``{group, code, message, metadata}``."""

    group: str
    code: str
    message: str
    metadata: dict[str, Any] = {}


class CreateActorIn(Schema):
    """``POST /actors``: the actor type ``name``, its ``key`` (a string or a list of strings) and an optional
    ``input`` (any JSON; tagged values are decoded)."""

    name: str = Field(..., min_length=1, max_length=200)
    key: str | list[str]
    input: Any = None


class CreateActorOut(Schema):
    actor_id: str
    name: str
    key: list[Any]
    created: bool


class ActorSummary(Schema):
    actor_id: str
    name: str
    key: list[Any]
    workflow_state: str
    wake_at: datetime | None = None
    waiting_for: list[str] = []
    created_at: datetime | None = None
    updated_at: datetime | None = None


class ActorDetail(ActorSummary):
    """One actor with its state, input, output and error (values as tagged JSON). ``redacted`` names the
    fields withheld from a caller that may not inspect (``"input"``, ``"error.stack"``)."""

    state: Any = None
    input: Any = None
    output: Any = None
    error: Any = None
    redacted: list[str] = []
    in_flight: bool = False
    lease_expires_at: datetime | None = None


class ActorPage(Schema):
    items: list[ActorSummary]
    count: int
    limit: int
    offset: int


class ActionIn(Schema):
    """``POST /actors/{id}/actions/{action}``: positional ``args`` (JSON values)."""

    args: list[Any] = []


class ActionOut(Schema):
    result: Any = None


class SendIn(Schema):
    """``POST /actors/{id}/queues/{queue}``: the message ``body`` (required; ``null`` is a body); with ``wait``
    (a JSON boolean) the call blocks until the workflow completes the message or ``timeout`` seconds (at most
    300; default ACTION_TIMEOUT) pass."""

    body: Any = Field(...)
    wait: StrictBool = False
    timeout: float | None = Field(None, ge=0, le=300)


class SendAccepted(Schema):
    message_id: str


class SendOut(Schema):
    status: str
    response: Any = None


class HistoryOut(Schema):
    history: dict[str, Any] | None
    workflowState: str
    isWorkflowEnabled: bool


class ReplayIn(Schema):
    """``entryId``: the step to replay from (an entry id of the history); omitted = replay everything."""

    entryId: str | None = None


class RepairOut(Schema):
    actorId: str
    deleted: list[str]
    reset: list[str]
    workflowState: str
