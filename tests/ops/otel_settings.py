"""The example project's settings plus the README's OpenTelemetry set-up ("OpenTelemetry traces"): a
``BatchSpanProcessor`` with the OTLP HTTP exporter, sending to ``OTEL_EXPORTER_OTLP_ENDPOINT``."""

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from project.settings import *  # noqa: F403

provider = TracerProvider(resource=Resource.create({"service.name": "rivet-tests"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
