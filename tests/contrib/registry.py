"""The registry of the WorkflowBackend tests: the task workflow, unlimited and limited to one per queue."""

from rivet_workflows import setup
from rivet_workflows.contrib.django_tasks import django_task, task_workflow

registry = setup(use={"django_task": django_task, "one_per_queue_task": task_workflow(concurrency=1)})
