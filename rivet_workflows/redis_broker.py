"""Moved to ``rivet_workflows.driver.redis_broker``; this name stays so settings written before the move keep working.

``import rivet_workflows.redis_broker`` gives the same module object as ``rivet_workflows.driver.redis_broker``.
"""

import sys

from .driver import redis_broker as _moved

sys.modules[__name__] = _moved
