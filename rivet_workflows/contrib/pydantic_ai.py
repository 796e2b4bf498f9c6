"""A pydantic-ai agent whose every model request and tool call is a durable step (DESIGN.md section 17).

Install the extra: ``pip install "rivet-workflows[ai]"`` (pydantic-ai-slim). Wrap the agent once, at import
time, and run it from a workflow::

    from pydantic_ai import Agent
    from rivet_workflows.contrib.pydantic_ai import DurableAgent

    agent = Agent("openai:gpt-5", instructions="Be brief.")
    durable = DurableAgent(agent, name="support")

    async def run(ctx):
        result = await durable.run(ctx, "Where is my parcel?", stream="answer")
        return result.output

Each model request is the step ``<name>.model-<n>`` and each tool call the step ``<name>.tool.<tool>-<n>``
(``n`` counts from 1 per kind in the calling scope), so the history shows the agent's loop, and a replay or a crash
of the worker sends no completed request again and calls no completed tool again: the recorded response or
tool result is used instead. A failed request or tool call is retried by the step's policy
(``model_step_options``/``tool_step_options``: the keyword arguments of ``ctx.step``). The idea is the one
of pydantic-ai's own durable adapters (Temporal, DBOS, Prefect): a ``Model`` wrapper and a toolset wrapper
that route the I/O through the engine's durable unit; the agent's graph itself runs in workflow code.

Tools listed in ``workflow_tools`` do not run in a step: they run in workflow code and may use the
workflow's primitives through :func:`workflow_context` (a tool that waits for a person's approval on a
queue, a durable sleep, a step of their own), with names unique per call (``run_context.tool_call_id`` is
recorded in the model's response, so it is the same on every replay).

The manual: docs/howto/agents.md.
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Generic

try:
    from pydantic_ai import Agent, ApprovalRequired, CallDeferred, ModelRetry
    from pydantic_ai.agent import AgentRunResult
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelResponse,
        PartDeltaEvent,
        PartStartEvent,
        TextPart,
        TextPartDelta,
    )
    from pydantic_ai.models import (
        CompletedStreamedResponse,
        Model,
        ModelRequestParameters,
        StreamedResponse,
        infer_model,
    )
    from pydantic_ai.models.wrapper import WrapperModel
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import AgentDepsT, RunContext
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset
    from pydantic_core import to_jsonable_python
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        'rivet_workflows.contrib.pydantic_ai needs pydantic-ai: pip install "rivet-workflows[ai]"'
    ) from exc

__all__ = ["DEFAULT_MODEL_STEP_OPTIONS", "DEFAULT_TOOL_STEP_OPTIONS", "DurableAgent", "workflow_context"]

#: ``ctx.step`` options of a model request: a request may take minutes; a failed or timed-out one is retried
#: three times, the first retry after 1 s (a provider's rate limit or outage rarely clears in ``ctx.step``'s
#: default 0.1 s; a slow answer is worth asking again)
DEFAULT_MODEL_STEP_OPTIONS: dict[str, Any] = {
    "max_retries": 3,
    "timeout": 300.0,
    "retry_backoff_base": 1.0,
    "retry_on_timeout": True,
}
#: ``ctx.step`` options of a tool call (``ctx.step``'s own defaults)
DEFAULT_TOOL_STEP_OPTIONS: dict[str, Any] = {}

#: the workflow context of the durable run in progress in this task (for workflow tools)
_CURRENT_CTX: contextvars.ContextVar[Any] = contextvars.ContextVar("rivet_agent_ctx", default=None)

#: per workflow context, the number of model requests and tool calls started so far under each agent
#: name: step names must be unique in their scope, and a context object lives for one replay of one scope,
#: so counting on it gives the same names on every replay
_COUNTERS: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()

# a tool step's recorded outcome: the tool's result, the ModelRetry it raised (a retry is an answer to
# the model, not a failure of the step), or its deferral (CallDeferred/ApprovalRequired: pydantic-ai's
# human-in-the-loop signals, raised again in workflow code on every replay)
_RESULT = "result"
_RETRY = "retry"
_DEFERRED = "deferred"


def workflow_context() -> Any:
    """The workflow context ``ctx`` of the :meth:`DurableAgent.run` that called the current tool.

    For tools listed in ``DurableAgent(workflow_tools=...)``: they run in workflow code and may await
    ``ctx.queue.next(...)``, ``ctx.sleep(...)`` or ``ctx.step(...)`` (names unique per call, e.g. built
    from ``run_context.tool_call_id``). Raises ``RuntimeError`` outside a durable agent run. Inside a step
    body (an ordinary tool) primitives raise ``StepNestingError``: steps do not nest.
    """
    ctx = _CURRENT_CTX.get()
    if ctx is None:
        raise RuntimeError("workflow_context() is only available in a tool of a DurableAgent.run")
    return ctx


def _next_name(ctx: Any, agent_name: str, kind: str) -> str:
    counters = _COUNTERS.setdefault(ctx, {})
    key = f"{agent_name}.{kind}"
    counters[key] = counters.get(key, 0) + 1
    return f"{agent_name}.{kind}-{counters[key]}"


def _dump_response(response: ModelResponse) -> dict:
    """A model response as JSON (pydantic-ai's own message schema), the value the step records."""
    return ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]


def _load_response(data: dict) -> ModelResponse:
    message = ModelMessagesTypeAdapter.validate_python([data])[0]
    assert isinstance(message, ModelResponse)
    return message


@dataclass
class _Run:
    """What one ``DurableAgent.run`` call shares with its model and toolset wrappers."""

    ctx: Any
    name: str
    stream: str | None
    model_options: dict[str, Any]
    tool_options: dict[str, Any]
    workflow_tools: frozenset[str]


class _StepModel(WrapperModel):
    """The agent's model with ``request`` (and ``request_stream``) run as a step of the workflow."""

    def __init__(self, wrapped: Model, run: _Run) -> None:
        super().__init__(wrapped)
        self._durable_run = run

    async def _request_in_step(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> ModelResponse:
        run = self._durable_run
        name = _next_name(run.ctx, run.name, "model")
        wrapped = self.wrapped

        async def body(step: Any) -> dict:
            if run.stream is None:
                response = await wrapped.request(messages, model_settings, model_request_parameters)
                return _dump_response(response)
            writer = step.stream(run.stream)
            async with wrapped.request_stream(
                messages, model_settings, model_request_parameters, run_context
            ) as streamed:
                async for event in streamed:
                    text = _text_of(event)
                    if text:
                        await writer.awrite(text)  # committed at once: readers see it live
            return _dump_response(streamed.get())

        return _load_response(await run.ctx.step(name, body, **run.model_options))

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        return await self._request_in_step(messages, model_settings, model_request_parameters)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        # the step consumed the live stream; the workflow side replays the recorded response as events
        response = await self._request_in_step(
            messages, model_settings, model_request_parameters, run_context
        )
        yield CompletedStreamedResponse(
            response, model_request_parameters=model_request_parameters, replay_events=True
        )


def _text_of(event: Any) -> str | None:
    """The text an event of a model's stream adds to the answer (None for tool calls, thinking...)."""
    if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
        return event.part.content
    if isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
        return event.delta.content_delta
    return None


@dataclass
class _StepToolset(WrapperToolset[AgentDepsT]):
    """One of the agent's toolsets with each call (except workflow tools) run as a step of the workflow."""

    durable_run: _Run | None = None

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> Any:
        run = self.durable_run
        assert run is not None
        if name in run.workflow_tools:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        wrapped = self.wrapped

        async def body(step: Any) -> dict:
            try:
                result = await wrapped.call_tool(name, tool_args, ctx, tool)
            except ModelRetry as exc:
                return {_RETRY: exc.message}
            except ApprovalRequired as exc:
                return {_DEFERRED: "approval", "metadata": to_jsonable_python(exc.metadata)}
            except CallDeferred as exc:
                return {_DEFERRED: "call", "kind": exc.kind, "metadata": to_jsonable_python(exc.metadata)}
            return {_RESULT: to_jsonable_python(result)}

        # "/" and ":" are reserved in entry names (an MCP server's tool may use them)
        kind = "tool." + name.replace("/", "_").replace(":", "_")
        outcome = await run.ctx.step(_next_name(run.ctx, run.name, kind), body, **run.tool_options)
        if _RETRY in outcome:
            raise ModelRetry(outcome[_RETRY])
        if outcome.get(_DEFERRED) == "approval":
            raise ApprovalRequired(outcome["metadata"])
        if outcome.get(_DEFERRED) == "call":
            raise CallDeferred(outcome["metadata"], kind=outcome["kind"])
        return outcome[_RESULT]


class DurableAgent(Generic[AgentDepsT]):
    """A pydantic-ai ``Agent`` run inside a workflow, its model requests and tool calls recorded as steps.

    ``DurableAgent(agent, name=None, *, model_step_options=None, tool_step_options=None,
    workflow_tools=())``: ``name`` prefixes the step names (default: the agent's ``name``, else
    ``"agent"``; it must be a valid entry name: no ``/`` or ``:``); ``model_step_options`` and
    ``tool_step_options`` are keyword arguments of ``ctx.step`` (``max_retries``, ``timeout`` in seconds,
    ``retry_backoff_base``...) merged over :data:`DEFAULT_MODEL_STEP_OPTIONS` /
    :data:`DEFAULT_TOOL_STEP_OPTIONS`; ``workflow_tools`` names tools that run in workflow code instead
    of a step (see :func:`workflow_context`). The agent's tool calls run one at a time (a workflow context
    runs one primitive at a time). Raises ``TypeError`` if ``agent`` is not a pydantic-ai ``Agent``.
    """

    def __init__(
        self,
        agent: Agent[AgentDepsT, Any],
        name: str | None = None,
        *,
        model_step_options: dict[str, Any] | None = None,
        tool_step_options: dict[str, Any] | None = None,
        workflow_tools: Iterable[str] = (),
    ) -> None:
        if not isinstance(agent, Agent):
            raise TypeError(f"DurableAgent wraps a pydantic_ai.Agent, got {type(agent).__name__}")
        self.agent = agent
        self.name = name or agent.name or "agent"
        if not self.name or "/" in self.name or ":" in self.name or self.name.startswith("~"):
            raise ValueError(f"DurableAgent name {self.name!r} may not contain '/' or ':' or start with '~'")
        self.model_step_options = {**DEFAULT_MODEL_STEP_OPTIONS, **(model_step_options or {})}
        self.tool_step_options = {**DEFAULT_TOOL_STEP_OPTIONS, **(tool_step_options or {})}
        self.workflow_tools = frozenset(workflow_tools)

    def __repr__(self) -> str:
        return f"DurableAgent({self.name!r})"

    async def run(
        self,
        ctx: Any,
        prompt: Any = None,
        *,
        deps: Any = None,
        message_history: Sequence[ModelMessage] | None = None,
        stream: str | None = None,
        **run_options: Any,
    ) -> AgentRunResult[Any]:
        """Run the agent's loop in workflow code: ``await durable.run(ctx, prompt)`` -> the agent's
        ``AgentRunResult`` (``.output``, ``.all_messages()``, ``.usage()``).

        ``ctx`` is the workflow context (or a loop iteration's / branch's); ``prompt`` the user prompt (a
        str or pydantic-ai user content); ``deps`` the agent's dependencies (they live in the process: a
        replay passes them again); ``message_history`` earlier messages (e.g. a recorded
        ``result.all_messages()`` of a previous run, round-tripped with ``ModelMessagesTypeAdapter``);
        ``stream="name"`` writes the model's text deltas to the actor's durable stream ``name`` while each
        request runs (``step.stream(name).awrite``: at least once across attempts, the items of a failed
        attempt are marked discarded; readers use ``handle.read_stream(name)``). Other keyword arguments go
        to ``Agent.run`` (``model_settings``, ``usage_limits``, ``output_type``...).

        Each model request is the step ``<name>.model-<n>``, each tool call ``<name>.tool.<tool>-<n>``:
        a replay uses their recorded outcomes. Raises what the steps raise once their retries are spent
        (``StepExhaustedError``, ``CriticalError``) and pydantic-ai's own errors (``UsageLimitExceeded``,
        ``UnexpectedModelBehavior``...).
        """
        model = self.agent.model if run_options.get("model") is None else run_options.pop("model")
        if model is None:
            raise TypeError("DurableAgent.run needs a model: set one on the Agent or pass model=")
        run = _Run(
            ctx=ctx,
            name=self.name,
            stream=stream,
            model_options=self.model_step_options,
            tool_options=self.tool_step_options,
            workflow_tools=self.workflow_tools,
        )
        step_model = _StepModel(infer_model(model), run)
        toolsets: list[AbstractToolset[AgentDepsT]] = [
            _StepToolset(toolset, durable_run=run) for toolset in self.agent.toolsets
        ]
        token = _CURRENT_CTX.set(ctx)
        try:
            with (
                self.agent.override(model=step_model, tools=[], toolsets=toolsets),
                Agent.parallel_tool_call_execution_mode("sequential"),
            ):
                result = await self.agent.run(
                    prompt, deps=deps, message_history=message_history, **run_options
                )
        finally:
            _CURRENT_CTX.reset(token)
        return result
