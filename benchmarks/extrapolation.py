"""The length-extrapolation study of chapter 7, in full: every length, median and range.

    python benchmarks/extrapolation.py [--seeds N] [--steps N]

The chapter (section "Measured: one small model at 2L, 4L and 8L") runs the same study and
prints only coarse bands at 8L, because a trained model's behaviour at lengths it never saw
moves from seed to seed and with the CPU's rounding. This script prints the numbers:
for each position scheme of :mod:`helpers.tasks.recall` (one attention layer, 2 heads,
D = 32, trained at L = 16 for ``--steps`` steps of Adam, batch 32, lr 0.01, seeds 0 … N − 1),
the loss and accuracy on 500 sequences with the needle within L (1 to 15 back) at
T = L, 2L, 4L, 8L, and with the needle beyond L (16 to T − 1 back) at 2L, 4L, 8L, as
median (min-max) over the seeds. It is a measurement, not a test: no budget, exit code 0.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from helpers.tasks.recall import SCHEMES, RecallModel, recall_scores, recall_task, train_recall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    train_len = 16
    lengths = (train_len, 2 * train_len, 4 * train_len, 8 * train_len)
    within = {t: recall_task(500, t, max_distance=train_len - 1, seed=t) for t in lengths}
    beyond = {t: recall_task(500, t, min_distance=train_len, seed=1000 + t) for t in lengths[1:]}
    results = {}
    for scheme in SCHEMES:
        model = RecallModel(scheme, seeds=range(args.seeds), train_len=train_len)
        train_recall(model, steps=args.steps, batch_size=32, lr=0.01)
        results[scheme] = {("within", t): recall_scores(model, within[t]) for t in lengths}
        results[scheme].update(
            {("beyond", t): recall_scores(model, beyond[t]) for t in lengths[1:]}
        )

    def cell(values, percent):
        show = (lambda x: f"{100 * x:.0f}") if percent else (lambda x: f"{x:.2g}")
        return f"{show(statistics.median(values))} ({show(min(values))}-{show(max(values))})"

    for title, condition, column, percent in [
        ("loss (nats), needle within L", "within", 1, False),
        ("accuracy (%), needle within L", "within", 0, True),
        ("loss (nats), needle beyond L", "beyond", 1, False),
        ("accuracy (%), needle beyond L", "beyond", 0, True),
    ]:
        print(f"{title}: median (range) over {args.seeds} seeds, trained at T = {train_len}")
        print(f"{'':>10} " + " ".join(f"{f'T = {t}':>21}" for t in lengths))
        for scheme in SCHEMES:
            cells = [
                cell(results[scheme][condition, t][column], percent)
                if (condition, t) in results[scheme]
                else ""
                for t in lengths
            ]
            print(f"{scheme:>10} " + " ".join(f"{c:>21}" for c in cells))
        print()


if __name__ == "__main__":
    main()
