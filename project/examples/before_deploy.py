"""The registry "before the deploy": the example actors with the version-gate actor's old code.

The demo's first worker runs with ``RIVET_REGISTRY=project.examples.before_deploy.registry``; the worker
started after the crash runs the current code (``project.registry``), so an instance that began under the
old code is resumed by the new one (spec: "Version gates with getVersion").
"""

from __future__ import annotations

from rivet_workflows import setup

from ..registry import ACTORS
from . import versioning

#: dotted path of the registry below (for RIVET_REGISTRY)
REGISTRY_PATH = "project.examples.before_deploy.registry"

registry = setup(
    use={
        **ACTORS,
        "version_gate_actor": versioning.version_gate_actor_v1,
        "versioned_deploy_actor": versioning.versioned_workflow_actor_v1,
    }
)
