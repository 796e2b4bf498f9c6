"""Profile our side of an in-process benchmark with pyinstrument: ``python -m bench.profile P1 [json params]``.

Creates the scratch database, runs ``bench.ours_side.<bench>`` in this interpreter under the profiler
and writes ``bench/results/profile-<bench>.txt`` (call tree) and ``.html``. Only P1 and P3 run entirely
in-process; the worker benchmarks (P2, P5, P6) need ``py-spy record --pid <worker pid>`` instead.
Needs ``pyinstrument`` (``pip install -e .[bench]``).
"""

from __future__ import annotations

import json
import os
import sys

from bench import __main__ as harness
from bench import pg, proc

DEFAULTS = {"P1": {"workflows": 100, "warmup": 3, "idle_window": 0}, "P3": {"iterations": 2000}}


def main(argv: list[str]) -> int:
    """Profile benchmark ``argv[0]`` (P1 or P3) with optional JSON params ``argv[1]``; returns an exit code."""
    from pyinstrument import Profiler

    bench = (argv[0] if argv else "P1").upper()
    if bench not in DEFAULTS:
        print(f"only {sorted(DEFAULTS)} run in-process", file=sys.stderr)
        return 2
    params = {**DEFAULTS[bench], **(json.loads(argv[1]) if len(argv) > 1 else {})}
    harness.fresh_ours_db()
    os.environ.update(harness.ours_env())
    from bench import ours_side

    profiler = Profiler(interval=0.0005)
    try:
        profiler.start()
        result = ours_side.BENCHES[bench](**params)
        profiler.stop()
    finally:
        from django.db import connections

        connections.close_all()
        pg.drop_database(harness.OURS_DB)
        pg.drop_database(harness.OURS_TEMPLATE)
    out = proc.ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"profile-{bench}.txt").write_text(profiler.output_text(unicode=False, color=False))
    (out / f"profile-{bench}.html").write_text(profiler.output_html())
    print(json.dumps({k: v for k, v in result.items() if k != "explain_large"}, indent=2))
    print(f"profile written to {out}/profile-{bench}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
