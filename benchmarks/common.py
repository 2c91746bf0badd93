"""Pieces the benchmark scripts share: machine load, alternating timings, JSON reports.

The scripts run as ``python benchmarks/NAME.py``, so this module is importable as ``common``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch


def load_average() -> float:
    """The 1-minute load average (NaN where the system does not report one)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return float("nan")


def time_interleaved(first, second, runs: int, warmup: int) -> tuple[list, list]:
    """Seconds of each call of ``first()`` and ``second()``, called alternately ``runs`` times.

    Alternating the two calls makes a load spike from other processes hit both alike, so
    their ratio stays meaningful on a busy machine.
    """
    for _ in range(warmup):
        first()
        second()
    times_first, times_second = [], []
    for _ in range(runs):
        start = time.perf_counter()
        first()
        times_first.append(time.perf_counter() - start)
        start = time.perf_counter()
        second()
        times_second.append(time.perf_counter() - start)
    return times_first, times_second


def write_report(path: Path, **figures) -> None:
    """Write ``figures`` as JSON to ``path``, with the torch version, threads and CPU count."""
    report = {"torch": torch.__version__, "threads": torch.get_num_threads(),
              "cpus": os.cpu_count(), **figures}
    path.write_text(json.dumps(report, indent=2) + "\n")
