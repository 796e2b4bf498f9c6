"""The registry of the example project: every actor of project/examples (settings: RIVET_WORKFLOWS["REGISTRY"])."""

from __future__ import annotations

from rivet_workflows import setup
from rivet_workflows.contrib.django_tasks import django_task

from .examples import (
    approval_gate,
    batch_drainer,
    bounded_drain,
    checkout,
    checkout_saga,
    checkpoint_friendly,
    child_workers,
    control_loop,
    coordinator,
    crash_demo,
    cron,
    error_hook,
    fan_in_out,
    payment,
    poll_backoff,
    queue_worker,
    rpc,
    scatter_gather,
    setup_teardown,
    shop_order,
    support_agent,
    timeout,
    timeout_fallback,
    versioning,
)

#: every example actor by registered name (tests build their own registries from this)
ACTORS = {
    "payment_actor": payment.payment_actor,
    "payment_flow_actor": payment.payment_flow_actor,
    "checkpoint_friendly_actor": checkpoint_friendly.checkpoint_friendly_actor,
    "queue_worker_actor": queue_worker.queue_worker_actor,
    "rpc_actor": rpc.rpc_actor,
    "batch_drainer_actor": batch_drainer.batch_drainer_actor,
    "bounded_drain_actor": bounded_drain.bounded_drain_actor,
    "control_loop_actor": control_loop.control_loop_actor,
    "approval_gate_actor": approval_gate.approval_gate_actor,
    "timeout_actor": timeout.timeout_actor,
    "fan_in_out_actor": fan_in_out.fan_in_out_actor,
    "scatter_gather_actor": scatter_gather.scatter_gather_actor,
    "shard_actor": scatter_gather.shard_actor,
    "poll_backoff_actor": poll_backoff.poll_backoff_actor,
    "coordinator_actor": coordinator.coordinator_actor,
    "worker_actor": coordinator.worker_actor,
    "orchestrator_actor": child_workers.orchestrator_actor,
    "child_worker_actor": child_workers.child_worker_actor,
    "timeout_fallback_actor": timeout_fallback.timeout_fallback_actor,
    "primary_service_actor": timeout_fallback.primary_service_actor,
    "fallback_service_actor": timeout_fallback.fallback_service_actor,
    "error_hook_actor": error_hook.error_hook_actor,
    "error_hook_rivetkit_actor": error_hook.error_hook_rivetkit_actor,
    "checkout_actor": checkout.checkout_actor,
    "shop_order_actor": shop_order.shop_order_actor,
    "checkout_saga_actor": checkout_saga.checkout_saga_actor,
    "inventory_actor": checkout_saga.inventory_actor,
    "billing_actor": checkout_saga.billing_actor,
    "versioned_workflow_actor": versioning.versioned_workflow_actor,
    "version_gate_actor": versioning.version_gate_actor,
    "versioned_deploy_actor": versioning.versioned_workflow_actor_migrated,
    "cron_actor": cron.cron_actor,
    "setup_run_teardown_actor": setup_teardown.setup_run_teardown_actor,
    "crash_demo_actor": crash_demo.crash_demo_actor,
    "support_agent_actor": support_agent.support_agent_actor,
}

#: the examples and the workflow that runs Django tasks (settings.TASKS, docs/howto/django-tasks.md)
registry = setup(use={**ACTORS, "django_task": django_task})
