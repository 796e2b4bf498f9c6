"""Moved to ``rivet_workflows.driver.dispatch``; this name stays so settings written before the move keep working.

``import rivet_workflows.dispatch`` gives the same module object as ``rivet_workflows.driver.dispatch``.
"""

import sys

from .driver import dispatch as _moved

sys.modules[__name__] = _moved
