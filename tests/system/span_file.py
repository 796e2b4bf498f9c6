"""A test-only OpenTelemetry span exporter: one JSON line per finished span appended to a file, so a test
can read the spans a worker subprocess made (``worker_settings`` installs it when RIVET_SPANS_FILE is set)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


def _hex(value: int, width: int) -> str:
    return format(value, f"0{width}x")


def span_dict(span: ReadableSpan) -> dict[str, Any]:
    """The fields of ``span`` a test looks at, ids as hex strings."""
    return {
        "name": span.name,
        "trace_id": _hex(span.context.trace_id, 32),
        "span_id": _hex(span.context.span_id, 16),
        "parent_id": _hex(span.parent.span_id, 16) if span.parent is not None else None,
        "attributes": dict(span.attributes or {}),
        "links": [_hex(link.context.span_id, 16) for link in span.links],
        "status": span.status.status_code.name,
        "events": [{"name": e.name, "attributes": dict(e.attributes or {})} for e in span.events],
    }


class JsonLinesExporter(SpanExporter):
    """Appends each exported span as one JSON line to ``path`` (thread-safe within the process)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(span_dict(s)) + "\n" for s in spans)
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(lines)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def install(path: str | Path) -> None:
    """Set this process's tracer provider to one exporting every span at once to ``path``."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    trace.set_tracer_provider(provider)


def read(path: str | Path) -> list[dict[str, Any]]:
    """The spans written to ``path`` so far."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
