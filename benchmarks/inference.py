"""Attention at inference: decoding with shared key-value heads, and sliding-window attention.

    python benchmarks/inference.py [--runs N] [--warmup N] [--json PATH]

Chapter 9 counts these costs exactly (bytes, score entries); this script measures their time
on this machine, which the chapter does not print.

1. Decoding step, ``helpers.multihead.MultiHeadAttention`` with a ``KVCache``, for
   H_kv = H (multi-head), H/4 (grouped-query) and 1 (multi-query): (B, D, H) = (8, 1024, 16),
   d_h = 64, float32, a cache prefilled with T = 2048 random keys and values, then one
   token per call, ``mha(x_t, x_t, x_t, cache=cache)`` under ``torch.no_grad()``. The cache
   is preallocated, so a timed call appends without copying the cache. Printed: the cache's
   bytes (exact: 2 · B · H_kv · T · d_h · 4) and the median time of a step, against
   multi-head.
2. Sliding-window attention with global tokens, one head of d_h = 64, B · H = 2 rows of
   attention, window w = 128 either side, G = 2 global tokens (positions 0 and 1), float32,
   for T = 1024, 2048 and 4096: full attention (``F.scaled_dot_product_attention``, no
   mask), the same with the dense (T, T) ``sliding_window_mask`` (masking alone computes
   every score), and :func:`blocked_sliding_window` (below), which computes only the score
   tiles the mask needs. Checked equal to the dense masked version (max |diff| printed).
   Printed: the score entries each computes (counted) and the median time.

Timing: one thread (``torch.set_num_threads(1)``: on a shared 2-core machine two threads
waiting for each other made every figure several times slower and erratic), ``--warmup``
calls, then ``--runs`` calls of each variant, alternating between the
variants (a load spike hits all alike); medians, with the load average before and after.
Figures only, no budgets: the exit code is 0 unless a check of equality fails.
"""

from __future__ import annotations

import os
import platform
import statistics
import time

import torch
from common import load_average, timing_arguments, write_report  # noqa: E402
from torch.nn import functional as F

from helpers.masks import sliding_window_mask
from helpers.multihead import KVCache, MultiHeadAttention

BATCH, D_MODEL, NUM_HEADS, PREFILL = 8, 1024, 16, 2048  # decoding: B, D, H, T
KV_HEADS = (16, 4, 1)
ROWS, D_HEAD, WINDOW, GLOBALS = 2, 64, 128, (0, 1)  # sliding window: B·H, d_h, w, tokens
LENGTHS = (1024, 2048, 4096)
EQUAL_TOL = 1e-4


def alternate(calls: dict, runs: int, warmup: int) -> dict:
    """Median seconds of each call, the calls run in turn ``runs`` times."""
    for _ in range(warmup):
        for call in calls.values():
            call()
    times = {name: [] for name in calls}
    for _ in range(runs):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def decoding(runs: int, warmup: int) -> list[dict]:
    """Time one decoding step for each number of key-value heads (part 1)."""
    gen = torch.Generator().manual_seed(0)
    d_head = D_MODEL // NUM_HEADS
    token = torch.randn(BATCH, 1, D_MODEL, generator=gen)  # (B, 1, D)
    steps, caches = {}, {}
    with torch.no_grad():
        for kv_heads in KV_HEADS:
            torch.manual_seed(0)
            mha = MultiHeadAttention(D_MODEL, NUM_HEADS, num_kv_heads=kv_heads).eval()
            cache = KVCache(capacity=PREFILL + runs + warmup + 1)  # no reallocation
            prefill = torch.randn(2, BATCH, kv_heads, PREFILL, d_head, generator=gen)
            cache.append(*prefill)  # T cached keys and values (their values do not matter)
            caches[kv_heads] = cache
            steps[kv_heads] = lambda mha=mha, cache=cache: mha(token, token, token, cache=cache)
        medians = alternate(steps, runs, warmup)
    rows = []
    for kv_heads in KV_HEADS:
        cache_bytes = 2 * BATCH * kv_heads * PREFILL * d_head * 4  # keys and values, float32
        assert caches[kv_heads].keys.shape[1] == kv_heads, caches[kv_heads].keys.shape
        rows.append(
            {
                "num_kv_heads": kv_heads,
                "cache_bytes_at_prefill": cache_bytes,
                "step_ms": medians[kv_heads] * 1e3,
                "speedup_vs_mha": medians[KV_HEADS[0]] / medians[kv_heads],
            }
        )
    return rows


def window_blocks(length: int, window: int, global_tokens, block: int):
    """The tiles sliding-window attention needs: for each block of ``block`` queries, the key
    positions it scores (its window, the block widened by ``window`` on both sides, and the
    global keys outside it) and their (b, n) mask; yields ``(start, stop, keys, mask)``."""
    is_global = torch.zeros(length, dtype=torch.bool)
    is_global[list(global_tokens)] = True
    global_keys = torch.tensor(list(global_tokens))
    for start in range(0, length, block):
        stop = min(start + block, length)
        low, high = max(start - window, 0), min(stop + window, length)
        outside = global_keys[(global_keys < low) | (global_keys >= high)]
        keys = torch.cat([torch.arange(low, high), outside])  # (n,) key positions
        near = (torch.arange(start, stop)[:, None] - keys[None, :]).abs() <= window  # (b, n)
        yield start, stop, keys, near | is_global[keys][None, :] | is_global[start:stop, None]


def blocked_sliding_window(q, k, v, window: int, global_tokens, block: int) -> torch.Tensor:
    """Attention under ``sliding_window_mask(T, window, global_tokens=...)`` that computes
    only the tiles of :func:`window_blocks`, then the global queries' rows against every
    key. q, k, v (R, T, d_h) → out (R, T, d_h)."""
    out = torch.empty_like(q)
    for start, stop, keys, mask in window_blocks(q.shape[-2], window, global_tokens, block):
        out[:, start:stop] = F.scaled_dot_product_attention(
            q[:, start:stop], k[:, keys], v[:, keys], attn_mask=mask
        )
    rows = list(global_tokens)  # the global queries attend to every key
    out[:, rows] = F.scaled_dot_product_attention(q[:, rows], k, v)
    return out


def time_window(length: int, runs: int, warmup: int) -> dict:
    """Time full, dense-masked and blocked sliding-window attention at one length T."""
    gen = torch.Generator().manual_seed(length)
    q, k, v = torch.randn(3, ROWS, length, D_HEAD, generator=gen).unbind(0)  # (R, T, d_h)
    mask = sliding_window_mask(length, WINDOW, global_tokens=GLOBALS)  # (T, T)
    block = WINDOW  # queries per tile
    with torch.no_grad():
        dense = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        diff = (dense - blocked_sliding_window(q, k, v, WINDOW, GLOBALS, block)).abs().max()
        medians = alternate(
            {
                "full": lambda: F.scaled_dot_product_attention(q, k, v),
                "masked": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                "blocked": lambda: blocked_sliding_window(q, k, v, WINDOW, GLOBALS, block),
            },
            runs,
            warmup,
        )
    tiles = window_blocks(length, WINDOW, GLOBALS, block)
    return {
        "length": length,
        "allowed_entries": int(mask.sum()),
        "full_entries": length**2,
        "blocked_entries": sum(t.numel() for *_, t in tiles) + len(GLOBALS) * length,
        "full_ms": medians["full"] * 1e3,
        "masked_ms": medians["masked"] * 1e3,
        "blocked_ms": medians["blocked"] * 1e3,
        "max_abs_diff": diff.item(),
        "equal": diff.item() <= EQUAL_TOL,
    }


def main(argv: list[str] | None = None) -> int:
    args = timing_arguments(__doc__.splitlines()[0], argv)
    torch.set_num_threads(1)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, "
        f"{platform.machine()}; float32, medians of {args.runs} alternating runs after "
        f"{args.warmup} warm-up"
    )
    load_before = load_average()
    print(f"load average (1 min) before: {load_before:.2f}")

    print(
        f"\n1. one decoding step, (B, D, H) = {(BATCH, D_MODEL, NUM_HEADS)}, d_h = "
        f"{D_MODEL // NUM_HEADS}, cache prefilled with T = {PREFILL} tokens"
    )
    decode_rows = decoding(args.runs, args.warmup)
    for row in decode_rows:
        print(
            f"  H_kv = {row['num_kv_heads']:2d}: cache {row['cache_bytes_at_prefill'] / 2**20:6.1f}"
            f" MiB, step {row['step_ms']:7.2f} ms, {row['speedup_vs_mha']:5.2f}x the speed of "
            f"H_kv = {KV_HEADS[0]}"
        )

    print(
        f"\n2. sliding window w = {WINDOW} with global tokens {GLOBALS}, {ROWS} rows of "
        f"attention, d_h = {D_HEAD}"
    )
    window_rows = [time_window(length, args.runs, args.warmup) for length in LENGTHS]
    for row in window_rows:
        print(
            f"  T = {row['length']:5d}: allowed {row['allowed_entries']:>10,d} of "
            f"{row['full_entries']:>11,d} scores; blocked computes {row['blocked_entries']:>10,d}"
        )
        print(
            f"  {'':9s} full {row['full_ms']:8.2f} ms, dense mask {row['masked_ms']:8.2f} ms, "
            f"blocked {row['blocked_ms']:8.2f} ms ({row['full_ms'] / row['blocked_ms']:.1f}x "
            f"faster than full); max |blocked - masked| {row['max_abs_diff']:.1e}"
        )
    load_after = load_average()
    print(f"\nload average (1 min) after: {load_after:.2f}")
    if args.json is not None:
        write_report(
            args.json,
            runs=args.runs,
            warmup=args.warmup,
            load_before=load_before,
            load_after=load_after,
            decoding=decode_rows,
            sliding_window=window_rows,
        )
        print(f"wrote {args.json}")
    if not all(row["equal"] for row in window_rows):
        print(f"check failed: blocked sliding-window attention differs by more than {EQUAL_TOL}")
        return 1
    print("no budgets: figures only")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
