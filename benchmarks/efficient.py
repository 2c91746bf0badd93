"""Attention at scale: naive vs tiled attention (time, peak memory) and KV-cache decoding.

    python benchmarks/efficient.py [--runs N] [--decode-repeats N] [--json PATH]

What is measured, and how:

- Naive vs tiled: ``helpers.efficient.naive_attention`` (materialises the (L, L) scores)
  and ``tiled_attention`` (key blocks of 128, all queries at once) on q = k = v of shape
  (B, H, L, D) = (1, 1, L, 64), float32, CPU, for L = 512 … 4096, under ``torch.no_grad()``.
  Time: median of ``--runs`` calls of each, alternating (a busy machine slows both alike),
  after one warm-up call. Peak memory: ``helpers.measure.peak_memory_bytes`` (torch
  profiler allocation events: exact bytes, deterministic). Agreement: max |diff| between
  the two outputs.
- KV cache: ``helpers.measure.time_decoding`` on a seeded ``MultiHeadAttention(128, 4)``
  in eval mode, batch 1: decode T tokens one by one with the cache (project only the new
  token, attend over cached keys/values) vs recomputing causal self-attention over the
  whole prefix at every step; best of ``--decode-repeats`` alternating runs, T = 32 … 512.

Prints two tables and the L = 4096 memory ratio. Figures vary with the load of the
machine (printed); the memory figures do not. None of these figures has a budget, so the
last line is ``no budgets: figures only`` and the exit code is 0 (non-zero only if the
script itself fails).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch
from common import budget_exit, load_average, write_report  # noqa: E402  (benchmarks/common.py)

from helpers.efficient import naive_attention, tiled_attention
from helpers.measure import memory_comparison, time_decoding
from helpers.multihead import MultiHeadAttention

LENGTHS = [512, 1024, 2048, 4096]
DECODE_LENGTHS = [32, 64, 128, 256, 512]
D_HEAD, BLOCK, D_MODEL, NUM_HEADS = 64, 128, 128, 4
MIB = 2**20


def time_attention(length: int, runs: int) -> dict:
    """Median seconds of naive and tiled attention at sequence length ``length``."""
    x = torch.randn(1, 1, length, D_HEAD, generator=torch.Generator().manual_seed(0))
    naive_times, tiled_times = [], []
    with torch.no_grad():
        diff = (naive_attention(x, x, x) - tiled_attention(x, x, x, block_size=BLOCK)).abs().max()
        for _ in range(runs):
            for fn, times, kwargs in (
                (naive_attention, naive_times, {}),
                (tiled_attention, tiled_times, {"block_size": BLOCK}),
            ):
                start = time.perf_counter()
                fn(x, x, x, **kwargs)
                times.append(time.perf_counter() - start)
    return {
        "naive_ms": statistics.median(naive_times) * 1e3,
        "tiled_ms": statistics.median(tiled_times) * 1e3,
        "max_abs_diff": diff.item(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed calls of each")
    parser.add_argument(
        "--decode-repeats",
        type=int,
        default=2,
        help="decoding runs of each, best kept (recompute at T=512 is slow)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.decode_repeats < 1:
        parser.error("--runs and --decode-repeats must be at least 1")
    load_before = load_average()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs; "
        f"load average (1 min) before: {load_before:.2f}"
    )

    print(
        f"\nnaive vs tiled attention, (B, H, L, D) = (1, 1, L, {D_HEAD}), float32, "
        f"block {BLOCK}, median of {args.runs}"
    )
    print(
        f"{'L':>6} {'naive ms':>10} {'tiled ms':>10} {'naive MiB':>10} {'tiled MiB':>10} "
        f"{'mem ratio':>10} {'max|diff|':>10}"
    )
    attention_rows = []
    for memory in memory_comparison(LENGTHS, d_head=D_HEAD, block_size=BLOCK):
        row = {**memory, **time_attention(memory["length"], args.runs)}
        attention_rows.append(row)
        print(
            f"{row['length']:>6} {row['naive_ms']:>10.2f} {row['tiled_ms']:>10.2f} "
            f"{row['naive_bytes'] / MIB:>10.2f} {row['tiled_bytes'] / MIB:>10.2f} "
            f"{row['ratio']:>10.1f} {row['max_abs_diff']:>10.1e}"
        )
    last = attention_rows[-1]
    print(f"peak memory at L = {last['length']}: naive / tiled = {last['ratio']:.1f}")

    torch.manual_seed(0)
    mha = MultiHeadAttention(D_MODEL, NUM_HEADS).eval()
    print(
        f"\nKV-cache decoding, MultiHeadAttention({D_MODEL}, {NUM_HEADS}), batch 1, "
        f"best of {args.decode_repeats} alternating runs"
    )
    print(f"{'T':>6} {'cache ms':>10} {'recompute ms':>13} {'speed-up':>9}")
    decode_rows = time_decoding(mha, DECODE_LENGTHS, batch=1, repeats=args.decode_repeats)
    for row in decode_rows:
        print(
            f"{row['length']:>6} {row['cache_s'] * 1e3:>10.1f} "
            f"{row['recompute_s'] * 1e3:>13.1f} {row['speedup']:>9.1f}"
        )
    load_after = load_average()
    print(f"load average (1 min) after: {load_after:.2f}")
    if args.json is not None:
        write_report(
            args.json,
            d_head=D_HEAD,
            block_size=BLOCK,
            runs=args.runs,
            decode_repeats=args.decode_repeats,
            load_before=load_before,
            load_after=load_after,
            attention=attention_rows,
            memory_ratio_at_max_length=last["ratio"],
            decode={"d_model": D_MODEL, "num_heads": NUM_HEADS, "batch": 1, "rows": decode_rows},
        )
        print(f"wrote {args.json}")
    return budget_exit([])  # no budgeted figures


if __name__ == "__main__":
    raise SystemExit(main())
