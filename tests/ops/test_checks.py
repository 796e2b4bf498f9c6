"""System checks added for operations (issue 5): W004 in-memory channel layer with a network broker,
W005 a sweep interval not shorter than the lease."""

from __future__ import annotations

from rivet_workflows.checks import check_settings

REGISTRY = "tests.integration.workflows.registry"


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def test_in_memory_layer_with_a_network_broker_warns(settings) -> None:
    settings.RIVET_WORKFLOWS = {"REGISTRY": REGISTRY}
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.CELERY_BROKER_URL = "filesystem://"
    assert "rivet_workflows.W004" not in ids(check_settings())  # the embedded default is accepted
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    messages = [m for m in check_settings() if m.id == "rivet_workflows.W004"]
    assert len(messages) == 1 and "channels_redis" in messages[0].hint


def test_sweep_interval_not_below_the_lease_warns(settings) -> None:
    settings.RIVET_WORKFLOWS = {"REGISTRY": REGISTRY, "LEASE_SECONDS": 5, "SWEEP_INTERVAL": 5}
    messages = [m for m in check_settings() if m.id == "rivet_workflows.W005"]
    assert len(messages) == 1 and "SWEEP_INTERVAL" in messages[0].hint
    settings.RIVET_WORKFLOWS = {"REGISTRY": REGISTRY, "LEASE_SECONDS": 30, "SWEEP_INTERVAL": 1}
    assert "rivet_workflows.W005" not in ids(check_settings())
