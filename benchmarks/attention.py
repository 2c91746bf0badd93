"""Speed and agreement of ``helpers.attention.scaled_dot_product_attention`` with PyTorch's.

    python benchmarks/attention.py [--runs N] [--warmup N] [--json PATH]

What is measured, and how:

- Inputs: q, k, v of shape (B, H, T, D) = (8, 8, 256, 64), float32, on the CPU, seeded;
  ``torch.set_num_threads`` is left at its default (the thread count is printed).
- Cases: no mask; a causal bool mask (T, T) from ``helpers.masks.causal_mask`` given to
  both functions as ``attn_mask`` (the same work on both sides); and, for reference, the
  same causal mask against PyTorch's ``is_causal=True`` (its fastest path, which skips the
  masked half of the work; the helper cannot, as it returns the full weights). That last
  line is a reference only and has no budget.
- Timing: under ``torch.no_grad()``, ``--warmup`` calls of each function, then ``--runs``
  timed calls of each with ``time.perf_counter``, the helper and PyTorch *interleaved*
  (helper, torch, helper, torch, ...) so that a busy machine slows both alike; the figure
  is the median. Budget: helper time / PyTorch time at most 2.0. The fastest run of each
  (and their ratio) is printed too, and the load average before and after: on a busy
  machine a chain of tensor ops (the helper) loses more than one fused kernel (PyTorch),
  so the medians' ratio grows with the load while the fastest runs' ratio does not.
- Agreement: the maximum absolute difference of the outputs. ``F.scaled_dot_product_attention``
  returns no weights, so only outputs are compared. Budget: at most 1e-5.

Prints one line per case with OK / OVER BUDGET, then a last line: ``all budgets met`` (exit
code 0) or ``budget missed: <figures>`` (exit code 1) when any time ratio or max |diff|
printed with a budget is OVER BUDGET (the reference lines' time ratios have none).
"""

from __future__ import annotations

import os
import platform

import torch
import torch.nn.functional as F
from common import (  # noqa: E402
    budget_exit,
    load_average,
    print_difference,
    print_timing,
    time_interleaved,
    timing_arguments,
    timing_summary,
    write_report,
)

from helpers.attention import scaled_dot_product_attention
from helpers.masks import causal_mask

SHAPE = (8, 8, 256, 64)  # (B, H, T, D)
RATIO_BUDGET = 2.0
DIFF_BUDGET = 1e-5


def make_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded float32 q, k, v of shape (B, H, T, D)."""
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(SHAPE, generator=gen, dtype=torch.float32) for _ in range(3))


def run_case(
    name: str, helper_call, torch_call, runs: int, warmup: int, budget: bool = True
) -> dict:
    """Time one case and compare its outputs; return the figures as a dict."""
    with torch.no_grad():
        ours, theirs = helper_call(), torch_call()
        max_abs_diff = (ours - theirs).abs().max().item()
        helper_times, torch_times = time_interleaved(helper_call, torch_call, runs, warmup)
    return {
        "case": name,
        **timing_summary(helper_times, torch_times, RATIO_BUDGET if budget else None),
        "max_abs_diff": max_abs_diff,
        "diff_budget": DIFF_BUDGET,
        "diff_ok": max_abs_diff <= DIFF_BUDGET,
    }


def main(argv: list[str] | None = None) -> int:
    args = timing_arguments(__doc__.splitlines()[0], argv)

    q, k, v = make_inputs()
    mask = causal_mask(SHAPE[2])  # (T, T), True = may attend
    cases = [  # (name, helper, torch, has a time budget)
        (
            "no mask",
            lambda: scaled_dot_product_attention(q, k, v)[0],
            lambda: F.scaled_dot_product_attention(q, k, v),
            True,
        ),
        (
            "causal bool mask",
            lambda: scaled_dot_product_attention(q, k, v, mask)[0],
            lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
            True,
        ),
        (
            "causal mask vs is_causal (ref.)",
            lambda: scaled_dot_product_attention(q, k, v, mask)[0],
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            False,
        ),
    ]
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{os.cpu_count()} CPUs, {platform.machine()}; (B, H, T, D) = {SHAPE}, float32, "
        f"median of {args.runs} interleaved runs after {args.warmup} warm-up"
    )
    load_before = load_average()
    print(f"load average (1 min) before: {load_before:.2f}")
    results = []
    for name, helper_call, torch_call, budget in cases:
        result = run_case(name, helper_call, torch_call, args.runs, args.warmup, budget)
        results.append(result)
        print_timing(name, result, 32)
        print_difference(32, f"{result['max_abs_diff']:.2e}", result["diff_ok"], DIFF_BUDGET)
    load_after = load_average()
    print(f"load average (1 min) after: {load_after:.2f}")
    if args.json is not None:
        write_report(
            args.json,
            shape_BHTD=list(SHAPE),
            dtype="float32",
            runs=args.runs,
            warmup=args.warmup,
            load_before=load_before,
            load_after=load_after,
            results=results,
        )
        print(f"wrote {args.json}")
    return budget_exit(
        verdict
        for r in results
        for verdict in (
            (f"{r['case']}: time ratio {r['ratio']:.2f} (<= {r['ratio_budget']})", r["ratio_ok"]),
            (f"{r['case']}: max |diff| (<= {DIFF_BUDGET:.0e})", r["diff_ok"]),
        )
    )


if __name__ == "__main__":
    raise SystemExit(main())
