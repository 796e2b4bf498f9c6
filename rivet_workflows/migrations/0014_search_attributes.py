"""Search attributes on the actor row and the index of listings by creation (DESIGN.md section 19).

On PostgreSQL the attributes column is jsonb with a GIN index (``jsonb_path_ops``: it serves the ``@>``
containment a filter on attributes compiles to); other databases keep the JSON column unindexed.
"""

from django.db import migrations, models

GIN_INDEX = "rivet_actor_attributes_gin"


def create_gin_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {GIN_INDEX} ON rivet_workflows_actor "
            "USING gin (attributes jsonb_path_ops)"
        )


def drop_gin_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {GIN_INDEX}")


class Migration(migrations.Migration):
    dependencies = [
        ("rivet_workflows", "0013_schedules_as_data"),
    ]

    operations = [
        migrations.AddField(
            model_name="actor",
            name="attributes",
            field=models.JSONField(blank=True, db_default=models.Value({}, models.JSONField()), default=dict),
        ),
        migrations.AddIndex(
            model_name="actor",
            index=models.Index(fields=["created_at", "actor_id"], name="rivet_actor_created_idx"),
        ),
        migrations.RunPython(create_gin_index, drop_gin_index),
    ]
