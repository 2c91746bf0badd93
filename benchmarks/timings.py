"""The chapters' timing lessons, checked as budgets (the chapters only note a miss).

    python benchmarks/timings.py [--json PATH]

Chapters 3, 5, 6 and 9 time a few computations and draw a lesson from the pattern, not from
the numbers: additive scoring is slow for its elementwise work, not its multiply-adds (ch 3);
self-attention's time grows faster with the length than a convolution's or a GRU's (ch 5);
more heads at the same width cost about the same (ch 6); attention grows quadratically and
the KV cache wins, by far less than its FLOP ratio (ch 9). A chapter's cell checks its
pattern with a wide margin but, since a busy machine blurs any timing, prints a note rather
than failing (a reader's kernel and ``make test`` must not fail on a loaded machine). This
script runs the same measurements, with the same helpers, sizes and margins, and fails
(exit code 1) when a pattern is not seen: run it on a quiet machine (``make bench``).

Everything runs on one CPU thread, as in the chapters. Prints one line per pattern with its
figures and OK / OVER BUDGET, the load average before and after, then ``all budgets met``
(exit 0) or ``budget missed: ...`` (exit 1).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from common import budget_exit, load_average, steady_allocator, write_report  # noqa: E402
from torch import nn

from helpers.attention import scaled_dot_product_attention
from helpers.efficient import naive_attention
from helpers.measure import loglog_slope, time_call, time_decoding
from helpers.multihead import MultiHeadAttention
from helpers.scoring import (
    AdditiveAttention,
    BilinearAttention,
    DotProductAttention,
    ScaledDotProductAttention,
)
from helpers.seeding import set_seed
from helpers.tasks.scoring import concat_mlp_scores, time_scorers


def scoring() -> list[tuple[str, bool]]:
    """Chapter 3: the five scorers and tanh alone at T = 64 ... 1024, h = d = 32."""
    set_seed(4)
    dim = 32
    additive = AdditiveAttention(dim, dim, dim)
    w_1 = torch.cat([additive.w_q.weight, additive.w_k.weight], dim=1)
    scorers = {
        "additive": additive.scores,
        "MLP on [q; k]": lambda q, k: concat_mlp_scores(q, k, w_1, additive.w_v.weight),
        "bilinear": BilinearAttention(dim, dim).scores,
        "dot product": DotProductAttention().scores,
        "scaled dot product": ScaledDotProductAttention().scores,
        "tanh alone": lambda q, k: torch.tanh(q.new_zeros(q.shape[0], k.shape[0], dim)),
    }
    lengths = [64, 128, 256, 512, 1024]
    seconds = time_scorers(scorers, lengths, dim, repeats=2)
    last = {name: times[-1] for name, times in seconds.items()}
    fast = ["dot product", "scaled dot product", "bilinear"]
    slowest_fast = max(last[name] for name in fast)
    growth = last["additive"] / seconds["additive"][lengths.index(256)]
    mlp_over_additive = last["MLP on [q; k]"] / last["additive"]
    print(
        f"ch 3, T = 1024: additive {last['additive'] / slowest_fast:.0f}x, MLP on [q; k] "
        f"{last['MLP on [q; k]'] / slowest_fast:.0f}x, tanh alone "
        f"{last['tanh alone'] / slowest_fast:.0f}x the slowest fast form; additive grows "
        f"{growth:.1f}x from T = 256; MLP / additive {mlp_over_additive:.1f}"
    )
    return [
        (
            "ch 3: additive, MLP and tanh alone > 10x every fast form",
            all(last[s] > 10 * slowest_fast for s in ["additive", "MLP on [q; k]", "tanh alone"]),
        ),
        ("ch 3: additive grows > 6x from T = 256 to 1024", growth > 6),
        ("ch 3: MLP on [q; k] < 20x additive", mlp_over_additive < 20),
    ]


def layers() -> list[tuple[str, bool]]:
    """Chapter 5: one layer of self-attention, a convolution and a GRU at D = 64."""
    sizes = [128, 256, 512, 1_024, 2_048, 4_096]
    set_seed(7)
    w_q, w_k, w_v = (torch.randn(64, 64) / 8 for _ in range(3))
    conv1d = nn.Conv1d(64, 64, kernel_size=3, padding=1)
    gru = nn.GRU(64, 64, batch_first=True)
    timed = {
        "self-attention": lambda x: scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v),
        "convolution": lambda x: conv1d(x.T[None]),
        "GRU": lambda x: gru(x[None]),
    }
    seconds = {name: [] for name in timed}
    for n in sizes:
        x = torch.randn(n, 64)
        for name, run in timed.items():
            repeats = 25 if name == "convolution" else (3 if n > 1_024 else 5)
            seconds[name].append(time_call(lambda run=run, x=x: run(x), repeats=repeats))
    slopes = {name: loglog_slope(sizes[2:], times[2:]) for name, times in seconds.items()}
    print(
        "ch 5, fitted slopes over n = 512 ... 4096: "
        + ", ".join(f"{name} {slope:.2f}" for name, slope in slopes.items())
        + f"; n = 128: self-attention / GRU {seconds['self-attention'][0] / seconds['GRU'][0]:.2f}"
    )
    return [
        ("ch 5: self-attention's slope > 1.4", slopes["self-attention"] > 1.4),
        (
            "ch 5: convolution's and GRU's slopes < 1.5",
            slopes["convolution"] < 1.5 and slopes["GRU"] < 1.5,
        ),
        (
            "ch 5: self-attention's slope the largest",
            max(slopes, key=slopes.get) == "self-attention",
        ),
        (
            "ch 5: at n = 128 self-attention faster than the GRU",
            seconds["self-attention"][0] < seconds["GRU"][0],
        ),
    ]


def heads() -> list[tuple[str, bool]]:
    """Chapter 6: MultiHeadAttention with H = 1 and 8 at B, T, D = 4, 64, 512."""
    torch.manual_seed(0)
    x = torch.randn(4, 64, 512)
    set_seed(0)
    timed = {h: MultiHeadAttention(512, h).eval() for h in (1, 2, 4, 8)}
    ratios = []
    with torch.no_grad():
        for _ in range(20):  # interleaved rounds, as in the chapter
            seconds = {}
            for h, module in timed.items():
                seconds[h] = time_call(lambda module=module: module(x, x, x), repeats=1, warmup=0)
            ratios.append(seconds[8] / seconds[1])
    median = torch.tensor(ratios).median().item()
    print(f"ch 6: H = 8 / H = 1, median over 20 rounds: {median:.2f}")
    return [("ch 6: eight heads take 0.5 to 2 x the time of one", 0.5 <= median <= 2.0)]


def step_flops(t: int, d_model: int, cached: bool) -> int:
    rows = 1 if cached else t  # as chapter 9 counts one decoding step
    return 2 * (4 * rows * d_model**2 + 2 * rows * t * d_model)


def scale() -> list[tuple[str, bool]]:
    """Chapter 9: naive attention against one projection, and the KV cache's speed-up."""
    lengths = [256, 512, 1_024, 2_048, 4_096]
    projection = torch.randn(64, 64) / 8
    seconds = {"attention": [], "projection": []}
    for length in lengths:
        x = torch.randn(1, 1, length, 64)
        seconds["attention"].append(time_call(lambda x=x: naive_attention(x, x, x), repeats=3))
        seconds["projection"].append(time_call(lambda x=x: x @ projection, repeats=3))
    slopes = {name: loglog_slope(lengths[2:], times[2:]) for name, times in seconds.items()}
    ratio = seconds["attention"][-1] / seconds["projection"][-1]
    set_seed(5)
    rows = time_decoding(MultiHeadAttention(64, 4).eval(), [32, 64, 128, 256], batch=1, repeats=3)
    speedups = [row["speedup"] for row in rows]
    flop_ratio = sum(step_flops(t, 64, False) for t in range(1, 257)) / sum(
        step_flops(t, 64, True) for t in range(1, 257)
    )
    print(
        f"ch 9: slopes attention {slopes['attention']:.2f}, projection "
        f"{slopes['projection']:.2f}; at L = 4096 attention / projection {ratio:.0f}; KV-cache "
        f"speed-ups {', '.join(f'{s:.1f}' for s in speedups)} (FLOP ratio {flop_ratio:.0f})"
    )
    return [
        (
            "ch 9: attention's slope > projection's + 0.5",
            slopes["attention"] > slopes["projection"] + 0.5,
        ),
        ("ch 9: attention > 20x one projection at L = 4096", ratio > 20),
        ("ch 9: KV cache > 1.5x faster at T = 256", speedups[-1] > 1.5),
        ("ch 9: KV cache < a third of its FLOP ratio", max(speedups) < flop_ratio / 3),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the verdicts to this file")
    args = parser.parse_args(argv)
    if argv is None:
        steady_allocator()
    torch.set_num_threads(1)  # as the chapters time them
    print(f"load average before: {load_average():.2f}")
    verdicts = scoring() + layers() + heads() + scale()
    print(f"load average after: {load_average():.2f}")
    for figure, ok in verdicts:
        print(f"  {figure:60s} {'OK' if ok else 'OVER BUDGET'}")
    if args.json:
        write_report(args.json, verdicts=[{"figure": f, "ok": ok} for f, ok in verdicts])
    return budget_exit(verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
