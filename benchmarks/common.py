"""Pieces the benchmark scripts share: machine load, alternating timings, JSON reports, and
the exit code (1 when a budget is missed; see :func:`budget_exit`).

The scripts run as ``python benchmarks/NAME.py``, so this module is importable as ``common``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

# glibc returns a freed block of more than a few MB to the system at moments that depend on
# the address layout, so a chain of tensor ops that allocates (…, Q, K) temporaries runs
# either with ~2 page faults per call or with ~9,000 (measured: 12 ms or 27 ms for the same
# code, the same inputs, from one process start to the next). That measures the allocator,
# not the code. The timing scripts therefore run with glibc's trimming and mmap thresholds
# raised, so freed blocks are reused as PyTorch's own caching allocators do on a GPU.
MALLOC_SETTINGS = {"MALLOC_MMAP_THRESHOLD_": str(256 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}


def steady_allocator() -> None:
    """Re-run this script with :data:`MALLOC_SETTINGS` in its environment unless they are set."""
    if all(os.environ.get(name) == value for name, value in MALLOC_SETTINGS.items()):
        return
    import sys

    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **MALLOC_SETTINGS})


def timing_arguments(
    description: str, argv: list[str] | None = None, **extra: dict
) -> argparse.Namespace:
    """Parse ``--runs`` (at least 20), ``--warmup`` and ``--json`` plus ``extra`` options
    (name -> ``add_argument`` keywords); first make the allocator steady (see
    :func:`steady_allocator`)."""
    if argv is None:
        steady_allocator()
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--runs", type=int, default=30, help="timed calls of each (>= 20)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls of each first")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    for name, keywords in extra.items():
        parser.add_argument(f"--{name}", **keywords)
    args = parser.parse_args(argv)
    if args.runs < 20:
        parser.error(f"--runs must be at least 20, got {args.runs}")
    return args


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


def timing_summary(helper_times: list, torch_times: list, ratio_budget: float | None) -> dict:
    """Median and best times (ms) of the helper and of PyTorch, their ratio and its verdict.

    ``ratio_budget=None`` marks a reference case with no budget.
    """
    helper_s, torch_s = statistics.median(helper_times), statistics.median(torch_times)
    ratio = helper_s / torch_s
    return {
        "helper_ms": helper_s * 1e3,
        "torch_ms": torch_s * 1e3,
        "ratio": ratio,
        "helper_best_ms": min(helper_times) * 1e3,
        "torch_best_ms": min(torch_times) * 1e3,
        "best_ratio": min(helper_times) / min(torch_times),
        "ratio_budget": ratio_budget,
        "ratio_ok": None if ratio_budget is None else ratio <= ratio_budget,
    }


def print_timing(name: str, result: dict, width: int) -> None:
    """Print the median and best-run lines of a :func:`timing_summary` result."""
    budget = result["ratio_budget"]
    verdict = (
        "no budget"
        if budget is None
        else f"(<= {budget}) {'OK' if result['ratio_ok'] else 'OVER BUDGET'}"
    )
    print(
        f"{name:{width}s} median: helper {result['helper_ms']:7.2f} ms, "
        f"torch {result['torch_ms']:7.2f} ms, ratio {result['ratio']:4.2f} {verdict}"
    )
    print(
        f"{'':{width}s} best:   helper {result['helper_best_ms']:7.2f} ms, "
        f"torch {result['torch_best_ms']:7.2f} ms, ratio {result['best_ratio']:4.2f}"
    )


def print_difference(width: int, text: str, ok: bool, budget: float) -> None:
    """Print the line comparing the helper's output with PyTorch's against ``budget``."""
    print(f"{'':{width}s} max |diff|: {text} (<= {budget:.0e}) {'OK' if ok else 'OVER BUDGET'}")


def write_report(path: Path, **figures) -> None:
    """Write ``figures`` as JSON to ``path``, with the torch version, threads and CPU count."""
    report = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        **figures,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")


def budget_exit(verdicts) -> int:
    """Print a benchmark's last line and return its exit code.

    ``verdicts``: ``(figure, ok)`` pairs, one per budgeted figure the script printed, where
    ``figure`` names it (and may give its value) and ``ok`` is False when it is OVER BUDGET
    (``None`` marks a figure without a budget: skipped). Prints ``budget missed: <figures>``
    and returns 1 when any was missed; otherwise prints ``all budgets met`` and returns 0
    (``no budgets: figures only`` when there were no budgeted figures at all).
    """
    budgeted = [(figure, ok) for figure, ok in verdicts if ok is not None]
    missed = [figure for figure, ok in budgeted if not ok]
    if missed:
        print(f"budget missed: {'; '.join(missed)}")
        return 1
    print("all budgets met" if budgeted else "no budgets: figures only")
    return 0
