# The permission of the actor API (manual: Control access): rivet_workflows.use_actor_api

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("rivet_workflows", "0002_history_storage"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="actor",
            options={
                "permissions": [
                    ("replay_workflow", "Can replay and recover workflows"),
                    ("use_actor_api", "Can use the actor API (create, read, call actions, send messages)"),
                ]
            },
        ),
    ]
