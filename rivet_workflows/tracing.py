"""OpenTelemetry spans of rivet_workflows (DESIGN.md section 14): the engine observer that traces.

Spans (tracer ``rivet_workflows``):

* ``rivet.create`` (producer) when the client creates an actor: ``rivet.actor.name``, ``rivet.actor.id``;
* ``rivet.send`` (producer) when a message is sent: ``rivet.actor.name``, ``rivet.actor.id``,
  ``rivet.queue.name``;
* ``rivet.run`` (consumer) per executor run: ``rivet.actor.name``, ``rivet.actor.id``, at the end
  ``rivet.workflow.state`` (``evicted`` when the run lost its lease);
* ``rivet.step`` per step attempt, a child of its run: ``rivet.step.name``, ``rivet.step.attempt``,
  ``rivet.step.status`` (completed, failed, exhausted, abandoned), the exception recorded on failure.

The W3C trace context of the creating request (the span current when ``create``/``get_or_create`` ran, or
the ``rivet.create`` span itself) is stored with the actor (``Actor.trace_context``), so every run of the
actor is a child of it, in whichever process it runs; the context of a send is stored with the message
(``QueueMessage.trace_context``) and the run that receives it links to it. Only the API is needed: without
a configured SDK every span is a no-op and nothing is stored.

``request_context(headers)`` makes the W3C ``traceparent`` of an incoming HTTP request the parent of the
spans the API's create, send and action views start (no Django instrumentation needed);
``end_of_command()`` bounds how long a management command waits for its spans at exit.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from .engine.model import observe

TRACER_NAME = "rivet_workflows"
#: the W3C trace-context headers of an incoming request (``propagate``'s default propagators read them)
TRACE_HEADERS = ("traceparent", "tracestate", "baggage")
#: the longest a management command waits at its end for its spans to be exported, in seconds: a
#: collector that is down must not hold ``rivet start`` for the exporter's retries (10 s and more)
COMMAND_FLUSH_SECONDS = 0.5

_tracer = trace.get_tracer(TRACER_NAME)  # a proxy: it follows the SDK the project sets up later
#: the API's providers that make no spans: without an SDK, a span started under an invalid parent is the
#: invalid span itself, which carries nothing
_NO_SDK = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)


class SpanObservation(observe.Observation):
    """A started span, current until ``end`` (so the spans of step bodies, HTTP clients say, nest in it)."""

    __slots__ = ("span", "token", "status_key")

    def __init__(self, span: trace.Span, status_key: str | None) -> None:
        self.span = span
        self.status_key = status_key
        self.token = otel_context.attach(trace.set_span_in_context(span))

    def end(self, status: str | None = None, error: BaseException | None = None) -> None:
        if self.token is None:  # ended already
            return
        span, token, self.token = self.span, self.token, None
        if status is not None and self.status_key is not None:
            span.set_attribute(self.status_key, status)
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        try:
            otel_context.detach(token)
        finally:
            span.end()

    def set(self, name: str, value: Any) -> None:
        self.span.set_attribute(name, value)

    def trace_context(self) -> dict | None:
        if not self.span.get_span_context().is_valid:
            return None
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(self.span))
        return carrier or None


def _parent(carrier: dict | None) -> Any:
    return propagate.extract(carrier) if carrier else None


def _links(carrier: dict | None) -> list[Link]:
    if not carrier:
        return []
    context = trace.get_current_span(propagate.extract(carrier)).get_span_context()
    return [Link(context)] if context.is_valid else []


class TracingObserver(observe.Observer):
    """The engine observer that makes the spans of the module docstring."""

    def __init__(self, tracer: Any = None) -> None:
        self.tracer = tracer if tracer is not None else _tracer
        self._proxy = isinstance(self.tracer, trace.ProxyTracer)

    def _inert(self) -> bool:
        """True when a span started now would be the invalid span and change nothing: the API's proxy
        tracer (``trace.get_tracer``), no SDK configured (yet), and no valid span current (a remote parent extracted from a
        request's ``traceparent`` is one: without an SDK its context still passes on to stored actors and
        messages). Then ``observe.NOTHING`` stands in for the span: no context attached and detached per
        step (issue 19: CPU per step)."""
        return (
            self._proxy
            and isinstance(trace.get_tracer_provider(), _NO_SDK)
            and not trace.get_current_span().get_span_context().is_valid
        )

    def run(self, actor: Any, now: Any) -> observe.Observation:
        if actor.trace_context is None and self._inert():
            return observe.NOTHING
        span = self.tracer.start_span(
            "rivet.run",
            context=_parent(actor.trace_context),
            kind=SpanKind.CONSUMER,
            attributes={"rivet.actor.name": actor.name, "rivet.actor.id": actor.actor_id},
        )
        return SpanObservation(span, "rivet.workflow.state")

    def step(self, actor: Any, step: str, attempt: int) -> observe.Observation:
        if self._inert():
            return observe.NOTHING
        span = self.tracer.start_span(
            "rivet.step",
            attributes={
                "rivet.actor.name": actor.name,
                "rivet.actor.id": actor.actor_id,
                "rivet.step.name": step,
                "rivet.step.attempt": attempt,
            },
        )
        return SpanObservation(span, "rivet.step.status")

    def send(self, name: str, actor_id: str, queue: str) -> observe.Observation:
        if self._inert():
            return observe.NOTHING
        span = self.tracer.start_span(
            "rivet.send",
            kind=SpanKind.PRODUCER,
            attributes={"rivet.actor.name": name, "rivet.actor.id": actor_id, "rivet.queue.name": queue},
        )
        return SpanObservation(span, None)

    def create(self, name: str, key: list) -> observe.Observation:
        if self._inert():
            return observe.NOTHING
        span = self.tracer.start_span(
            "rivet.create", kind=SpanKind.PRODUCER, attributes={"rivet.actor.name": name}
        )
        return SpanObservation(span, None)

    def message_received(self, actor: Any, queue: str, trace_context: dict | None) -> None:
        span = trace.get_current_span()
        for link in _links(trace_context):
            span.add_link(link.context, {"rivet.queue.name": queue})


def observer() -> TracingObserver:
    """The tracing observer (spans go to whatever tracer provider the project configured)."""
    return TracingObserver()


@contextlib.contextmanager
def request_context(headers: Mapping[str, str]) -> Iterator[None]:
    """While the block runs, the trace context of an incoming HTTP request (its W3C ``traceparent`` and
    ``tracestate`` headers, read by ``opentelemetry.propagate``) is current, so the ``rivet.create`` and
    ``rivet.send`` spans started in it are children of the caller's span (docs/howto/monitoring.md).
    ``headers``: the request's headers (Django's ``request.headers``, case-insensitive). Nothing changes
    when a span is current already (a project that instruments Django made the request's span current) or
    the request carries no trace context."""
    if trace.get_current_span().get_span_context().is_valid:
        yield
        return
    carrier = {name: headers[name] for name in TRACE_HEADERS if headers.get(name)}
    if "traceparent" not in carrier:
        yield
        return
    token = otel_context.attach(propagate.extract(carrier))
    try:
        yield
    finally:
        otel_context.detach(token)


def end_of_command(timeout: float = COMMAND_FLUSH_SECONDS) -> bool:
    """Shut the configured tracer provider down (its processors export the spans still buffered), waiting
    at most ``timeout`` seconds: what is not exported by then is dropped and the command exits. The SDK's
    own exit hook would wait for the exporter's retries (an unreachable collector held ``rivet start`` for
    9 s). True when the shutdown finished in time, or there is nothing to shut down (no SDK configured)."""
    shutdown = getattr(trace.get_tracer_provider(), "shutdown", None)
    if shutdown is None:  # the API's proxy or no-op provider: nothing buffered
        return True
    done = threading.Event()

    def run() -> None:
        try:
            shutdown()
        finally:
            done.set()

    # a daemon thread: the interpreter does not wait for it, and the SDK's exit hook finds the provider
    # shut down already and returns at once
    threading.Thread(target=run, name="rivet-trace-flush", daemon=True).start()
    return done.wait(timeout)
