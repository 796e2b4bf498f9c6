"""History storage for long loops (benchmark P3): one index less per history row, and on PostgreSQL the
per-table settings that keep pruned and updated rows from piling up.

* ``historyentry.actor`` loses its own index (and, on PostgreSQL, its ``varchar_pattern_ops`` twin): the
  unique ``(actor_id, key)`` index serves every look-up by actor, and each history insert wrote four index
  entries instead of two. It also let the planner run a prune's ``DELETE ... key IN (...)`` as a scan of
  every index entry of the actor, dead ones included (292 buffers per prune after 10,000 iterations).
* PostgreSQL only: a loop prunes its history every ``history_prune_interval`` iterations, so the history
  table fills with dead rows at a fixed rate however large it is; the default autovacuum trigger (20 % of
  the table dead) lets a small hot table bloat and a large one wait for millions. Vacuum after 1,000 dead
  rows instead. A fill factor below 100 leaves room on each page so a step's update of its entry (attempt
  started -> completed) and of the actor row stays a HOT update (no new index entries).
"""

import django.db.models.deletion
from django.db import migrations, models

_TABLES = {
    "rivet_workflows_historyentry": (
        "fillfactor = 90, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000, "
        "autovacuum_analyze_scale_factor = 0.02"
    ),
    "rivet_workflows_actor": "fillfactor = 80",
}
_DEFAULTS = {
    "rivet_workflows_historyentry": (
        "fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, "
        "autovacuum_analyze_scale_factor"
    ),
    "rivet_workflows_actor": "fillfactor",
}


def _set_storage(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, options in _TABLES.items():
        schema_editor.execute(f"ALTER TABLE {table} SET ({options})")


def _reset_storage(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, options in _DEFAULTS.items():
        schema_editor.execute(f"ALTER TABLE {table} RESET ({options})")


class Migration(migrations.Migration):
    dependencies = [
        ("rivet_workflows", "0001_initial"),
    ]

    operations = [
        migrations.AlterField(
            model_name="historyentry",
            name="actor",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="history",
                to="rivet_workflows.actor",
            ),
        ),
        migrations.RunPython(_set_storage, _reset_storage, elidable=False),
    ]
