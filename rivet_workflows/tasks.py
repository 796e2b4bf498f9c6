"""Moved to ``rivet_workflows.driver.tasks``; this name stays so settings written before the move keep working.

``import rivet_workflows.tasks`` gives the same module object as ``rivet_workflows.driver.tasks``.
"""

import sys

from .driver import tasks as _moved

sys.modules[__name__] = _moved
