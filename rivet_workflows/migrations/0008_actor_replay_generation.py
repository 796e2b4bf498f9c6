# Actor.replay_generation: bumped by every replay, so steps recorded after it get fresh idempotency keys

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rivet_workflows", "0007_trace_context"),
    ]

    operations = [
        migrations.AddField(
            model_name="actor",
            name="replay_generation",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
