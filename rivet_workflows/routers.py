"""The database router shipped with rivet_workflows for sharded actors (DESIGN.md section 21).

Add it to ``DATABASE_ROUTERS`` when ``RIVET_WORKFLOWS["SHARDS"]`` names several aliases::

    DATABASE_ROUTERS = ["rivet_workflows.routers.ShardRouter"]

It only decides where the rivet_workflows tables are migrated: on every alias of ``SHARDS`` (on ``default``
when ``SHARDS`` is unset), so ``migrate --database ALIAS`` creates them on each shard. Reads and writes pick
their shard themselves (``storage.sharded.ShardedStore`` and the readers use ``.using(alias)``), and every
other app is left to the next router (None).
"""

from __future__ import annotations

from typing import Any

APP_LABEL = "rivet_workflows"


class ShardRouter:
    """Migrate the rivet_workflows app on every shard alias; no opinion on anything else (None)."""

    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool | None:
        """True on a shard alias and False elsewhere for the rivet_workflows app; None for other apps."""
        if app_label != APP_LABEL:
            return None
        from .conf import rivet_settings

        return db in rivet_settings.shard_aliases()
