"""``manage.py`` with a clock: prints ``exit-hooks-done <time.monotonic()>`` to stderr after every other
exit hook ran (the tracer provider's shutdown included), so a test can time a command's end without the
interpreter's own teardown, which a busy machine slows."""

from __future__ import annotations

import atexit
import os
import sys
import time
from pathlib import Path

# registered first, so it runs last
atexit.register(lambda: print(f"exit-hooks-done {time.monotonic()}", file=sys.stderr, flush=True))

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

from django.core.management import execute_from_command_line  # noqa: E402

execute_from_command_line(["manage.py", *sys.argv[1:]])
