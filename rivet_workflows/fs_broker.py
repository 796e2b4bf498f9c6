"""Moved to ``rivet_workflows.driver.fs_broker``; this name stays so settings written before the move keep working.

``import rivet_workflows.fs_broker`` gives the same module object as ``rivet_workflows.driver.fs_broker``.
"""

import sys

from .driver import fs_broker as _moved

sys.modules[__name__] = _moved
