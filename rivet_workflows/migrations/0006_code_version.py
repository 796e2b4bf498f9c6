# Rolling deploys (manual: Deploy new code; DESIGN.md section 12): the code version of each write of a run.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rivet_workflows", "0005_dashboard"),
    ]

    operations = [
        migrations.AddField(
            model_name="actor",
            name="code_version",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddField(
            model_name="actor",
            name="awaiting_code_version",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddField(
            model_name="historyentry",
            name="code_version",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
    ]
