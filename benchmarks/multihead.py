"""Speed and agreement of ``helpers.multihead.MultiHeadAttention`` with ``nn.MultiheadAttention``.

    python benchmarks/multihead.py [--runs N] [--warmup N] [--json PATH]

What is measured, and how:

- Modules: ``nn.MultiheadAttention(D, H, batch_first=True)`` (seeded, with random biases,
  in eval mode) and ``MultiHeadAttention.from_torch`` of it, so both hold the same weights.
- Inputs: self-attention on x of shape (B, T, D) = (8, 256, 256), H = 8 heads, float32, on
  the CPU; ``torch.set_num_threads`` is left at its default (the thread count is printed).
- Cases: no mask; a padding mask from ``helpers.masks.valid_length_mask`` (seeded lengths),
  given to the helper as ``mask[:, None, None, :]`` and to PyTorch as
  ``key_padding_mask=to_key_padding_mask(mask)``. PyTorch is called with
  ``need_weights=True, average_attn_weights=False`` so that both return the per-head
  weights (B, H, Q, K), like with like; for reference only, PyTorch with
  ``need_weights=False`` (its fused path, no weights) is timed too, without a budget.
- Timing: under ``torch.no_grad()``, ``--warmup`` calls of each, then ``--runs`` timed calls
  of each with ``time.perf_counter``, helper and PyTorch *alternating* so that a busy
  machine slows both alike; the figure is the median, the fastest run is printed too, and
  the load average before and after. Budget: helper time / PyTorch time at most 1.5.
- Agreement: maximum absolute difference of the outputs and of the per-head weights.
  Budget: at most 1e-5.

Prints one line per case with OK / OVER BUDGET, then a last line: ``all budgets met`` (exit
code 0) or ``budget missed: <figures>`` (exit code 1) when any time ratio or max |diff|
printed with a budget is OVER BUDGET (the reference lines' time ratios have none).
"""

from __future__ import annotations

import os
import platform

import torch
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
from torch import nn

from helpers.masks import to_key_padding_mask, valid_length_mask
from helpers.multihead import MultiHeadAttention

BATCH, LENGTH, D_MODEL, NUM_HEADS = 8, 256, 256, 8  # B, T, D, H
RATIO_BUDGET = 1.5
DIFF_BUDGET = 1e-5


def make_modules(seed: int = 0) -> tuple[nn.MultiheadAttention, MultiHeadAttention]:
    """A seeded ``nn.MultiheadAttention`` with random biases and the helper copied from it."""
    torch.manual_seed(seed)
    reference = nn.MultiheadAttention(D_MODEL, NUM_HEADS, batch_first=True).eval()
    with torch.no_grad():
        reference.in_proj_bias.normal_(std=0.1)
        reference.out_proj.bias.normal_(std=0.1)
    return reference, MultiHeadAttention.from_torch(reference).eval()


def run_case(
    name: str,
    helper_call,
    torch_call,
    runs: int,
    warmup: int,
    compare_weights: bool = True,
    budget: bool = True,
) -> dict:
    """Time one case and compare its outputs (and weights); return the figures as a dict."""
    with torch.no_grad():
        (out, weights), (out_ref, weights_ref) = helper_call(), torch_call()
        diffs = [(out - out_ref).abs().max().item()]
        if compare_weights:
            diffs.append((weights - weights_ref).abs().max().item())
        helper_times, torch_times = time_interleaved(helper_call, torch_call, runs, warmup)
    return {
        "case": name,
        **timing_summary(helper_times, torch_times, RATIO_BUDGET if budget else None),
        "max_abs_diff_out": diffs[0],
        "max_abs_diff_weights": diffs[1] if compare_weights else None,
        "diff_budget": DIFF_BUDGET,
        "diff_ok": max(diffs) <= DIFF_BUDGET,
    }


def main(argv: list[str] | None = None) -> int:
    args = timing_arguments(__doc__.splitlines()[0], argv)

    reference, helper = make_modules()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, LENGTH, D_MODEL, generator=gen)  # (B, T, D)
    valid_lens = torch.randint(1, LENGTH + 1, (BATCH,), generator=gen)
    mask = valid_length_mask(valid_lens, LENGTH)  # (B, K), True = may attend
    book_mask, padding = mask[:, None, None, :], to_key_padding_mask(mask)  # (B,1,1,K), (B,K)

    def torch_weights(**kwargs):
        return lambda: reference(x, x, x, need_weights=True, average_attn_weights=False, **kwargs)

    cases = [  # (name, helper, torch, compare weights, has a time budget)
        ("no mask", lambda: helper(x, x, x), torch_weights(), True, True),
        (
            "padding mask",
            lambda: helper(x, x, x, book_mask),
            torch_weights(key_padding_mask=padding),
            True,
            True,
        ),
        (
            "no mask vs need_weights=False (ref.)",
            lambda: helper(x, x, x),
            lambda: reference(x, x, x, need_weights=False),
            False,
            False,
        ),
        (
            "padding vs need_weights=False (ref.)",
            lambda: helper(x, x, x, book_mask),
            lambda: reference(x, x, x, key_padding_mask=padding, need_weights=False),
            False,
            False,
        ),
    ]
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, "
        f"{platform.machine()}; (B, T, D, H) = {(BATCH, LENGTH, D_MODEL, NUM_HEADS)}, "
        f"float32, self-attention, median of {args.runs} alternating runs after "
        f"{args.warmup} warm-up"
    )
    load_before = load_average()
    print(f"load average (1 min) before: {load_before:.2f}")
    results = []
    for name, helper_call, torch_call, compare_weights, budget in cases:
        result = run_case(
            name, helper_call, torch_call, args.runs, args.warmup, compare_weights, budget
        )
        results.append(result)
        weights_diff = (
            ""
            if result["max_abs_diff_weights"] is None
            else f", weights {result['max_abs_diff_weights']:.2e}"
        )
        print_timing(name, result, 38)
        print_difference(
            38,
            f"out {result['max_abs_diff_out']:.2e}{weights_diff}",
            result["diff_ok"],
            DIFF_BUDGET,
        )
    load_after = load_average()
    print(f"load average (1 min) after: {load_after:.2f}")
    if args.json is not None:
        write_report(
            args.json,
            shape_BTDH=[BATCH, LENGTH, D_MODEL, NUM_HEADS],
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
