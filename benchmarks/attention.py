"""Speed and agreement of ``helpers.attention.scaled_dot_product_attention`` with PyTorch's.

    python benchmarks/attention.py [--runs N] [--warmup N] [--json PATH]

What is measured, and how:

- Inputs: q, k, v of shape (B, H, T, D) = (8, 8, 256, 64), float32, on the CPU, seeded;
  ``torch.set_num_threads`` is left at its default (the thread count is printed).
- Cases: no mask; a causal bool mask (T, T) from ``helpers.masks.causal_mask`` given to
  both functions as ``attn_mask`` (the same work on both sides); and, for reference, the
  same causal mask against PyTorch's ``is_causal=True`` (its fastest path).
- Timing: under ``torch.no_grad()``, ``--warmup`` calls of each function, then ``--runs``
  timed calls of each with ``time.perf_counter``, the helper and PyTorch *interleaved*
  (helper, torch, helper, torch, ...) so that a busy machine slows both alike; the figure
  is the median. Budget: helper time / PyTorch time at most 2.0.
- Agreement: the maximum absolute difference of the outputs. ``F.scaled_dot_product_attention``
  returns no weights, so only outputs are compared. Budget: at most 1e-5.

Prints one line per case with OK / OVER BUDGET. Exits 0 even when a budget is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from helpers.attention import scaled_dot_product_attention
from helpers.masks import causal_mask

SHAPE = (8, 8, 256, 64)  # (B, H, T, D)
RATIO_BUDGET = 2.0
DIFF_BUDGET = 1e-5


def make_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded float32 q, k, v of shape (B, H, T, D)."""
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(SHAPE, generator=gen, dtype=torch.float32) for _ in range(3))


def time_interleaved(first, second, runs: int, warmup: int) -> tuple[float, float]:
    """Median seconds of ``first()`` and ``second()``, called alternately ``runs`` times."""
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
    return statistics.median(times_first), statistics.median(times_second)


def run_case(name: str, helper_call, torch_call, runs: int, warmup: int) -> dict:
    """Time one case and compare its outputs; return the figures as a dict."""
    with torch.no_grad():
        ours, theirs = helper_call(), torch_call()
        max_abs_diff = (ours - theirs).abs().max().item()
        helper_s, torch_s = time_interleaved(helper_call, torch_call, runs, warmup)
    ratio = helper_s / torch_s
    return {"case": name, "helper_ms": helper_s * 1e3, "torch_ms": torch_s * 1e3,
            "ratio": ratio, "ratio_budget": RATIO_BUDGET, "ratio_ok": ratio <= RATIO_BUDGET,
            "max_abs_diff": max_abs_diff, "diff_budget": DIFF_BUDGET,
            "diff_ok": max_abs_diff <= DIFF_BUDGET}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="timed calls of each (>= 20)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls of each first")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.runs < 20:
        parser.error(f"--runs must be at least 20, got {args.runs}")

    q, k, v = make_inputs()
    mask = causal_mask(SHAPE[2])  # (T, T), True = may attend
    cases = [
        ("no mask", lambda: scaled_dot_product_attention(q, k, v)[0],
         lambda: F.scaled_dot_product_attention(q, k, v)),
        ("causal bool mask", lambda: scaled_dot_product_attention(q, k, v, mask)[0],
         lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)),
        ("causal mask vs torch is_causal", lambda: scaled_dot_product_attention(q, k, v, mask)[0],
         lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
    ]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{os.cpu_count()} CPUs, {platform.machine()}; (B, H, T, D) = {SHAPE}, float32, "
          f"median of {args.runs} interleaved runs after {args.warmup} warm-up")
    results = []
    for name, helper_call, torch_call in cases:
        result = run_case(name, helper_call, torch_call, args.runs, args.warmup)
        results.append(result)
        print(f"{name:32s} helper {result['helper_ms']:8.2f} ms  "
              f"torch {result['torch_ms']:8.2f} ms  "
              f"ratio {result['ratio']:5.2f} (<= {RATIO_BUDGET}) "
              f"{'OK' if result['ratio_ok'] else 'OVER BUDGET'}  "
              f"max |diff| {result['max_abs_diff']:.2e} (<= {DIFF_BUDGET:.0e}) "
              f"{'OK' if result['diff_ok'] else 'OVER BUDGET'}")
    if args.json is not None:
        report = {"torch": torch.__version__, "threads": torch.get_num_threads(),
                  "cpus": os.cpu_count(), "shape_BHTD": list(SHAPE), "dtype": "float32",
                  "runs": args.runs, "warmup": args.warmup, "results": results}
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
