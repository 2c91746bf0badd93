"""Training time of the tiny Transformer to 99 % held-out accuracy, and greedy-decoding speed.

    python benchmarks/transformer.py [--threads N] [--seed N] [--runs N] [--json PATH]

What is measured, and how:

- Model: ``helpers.tasks.reversal.reversal_model(seed)``, a ``helpers.seq2seq``
  ``Seq2SeqTransformer``: D = 64, H = 4, FFN 128, 2 encoder and 2 decoder layers, post-LN,
  sinusoidal positions (about 170 k parameters), float32, CPU.
- Task: reverse 8 digits (``helpers.tasks.reversal.reversal_batch(64, 8)``, fresh batches
  from the seed).
- Training: ``helpers.tasks.reversal.train_seq2seq`` with Adam, lr 1e-3, 50 warm-up steps,
  batch 64; every 25 steps the held-out token accuracy (greedy decoding of 500 sequences
  from seed 10 000) is measured, and training stops at the first measurement >= 99 %.
  Reported: steps, wall seconds (evaluations included) and CPU seconds of the process.
  Budget: 60 s wall. Then the accuracy is measured again on 2 000 fresh sequences (seed
  20 000).
- Decoding: ``helpers.seq2seq.greedy_decode`` of 9 tokens (no early stop) for batch 64 and
  batch 1, under ``torch.no_grad``; one warm-up call, then ``--runs`` timed calls; the
  figure is the median, in generated tokens per second. No budget.
- Threads: ``torch.set_num_threads(--threads)``, 1 by default: these tensors are tiny, and
  on a shared 2-core machine a second thread mostly waits (measured 20x slower matmuls
  with 2 threads while other jobs ran). The load average is printed before and after.

Prints the training time with OK / OVER BUDGET, then a last line: ``all budgets met`` (exit
code 0) or ``budget missed: training ...`` (exit code 1) when training did not reach the
target accuracy within the 60 s budget.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import torch
from common import budget_exit, load_average, write_report  # noqa: E402  (benchmarks/common.py)

from helpers.seq2seq import greedy_decode
from helpers.tasks.reversal import (
    BOS_ID,
    reversal_batch,
    reversal_model,
    token_accuracy,
    train_seq2seq,
)

LENGTH, BATCH, LR, WARMUP = 8, 64, 1e-3, 50
TARGET, BUDGET_SECONDS, MAX_STEPS = 0.99, 60.0, 2000


def time_to_target(seed: int) -> tuple[dict, torch.nn.Module]:
    model = reversal_model(seed)
    cpu_start = time.process_time()
    history = train_seq2seq(
        model,
        MAX_STEPS,
        batch_size=BATCH,
        lr=LR,
        warmup_steps=WARMUP,
        seed=seed,
        progress=False,
        length=LENGTH,
        eval_every=25,
        target_accuracy=TARGET,
        eval_sequences=500,
    )
    cpu_seconds = time.process_time() - cpu_start
    final = token_accuracy(model, 2000, seed=20_000, length=LENGTH)
    reached = bool(history["accuracy"]) and history["accuracy"][-1][1] >= TARGET
    return {
        "steps": history["steps"],
        "seconds": history["seconds"],
        "cpu_seconds": cpu_seconds,
        "reached_target": reached,
        "eval_accuracy": history["accuracy"][-1][1] if history["accuracy"] else None,
        "final_loss": history["loss"][-1],
        "fresh_accuracy_2000": final,
        "ok": reached and history["seconds"] <= BUDGET_SECONDS,
    }, model


def decode_speed(model: torch.nn.Module, batch: int, runs: int) -> dict:
    src, _, _ = reversal_batch(batch, LENGTH, torch.Generator().manual_seed(1))
    new_tokens = LENGTH + 1
    greedy_decode(model, src, new_tokens, BOS_ID)  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        tokens = greedy_decode(model, src, new_tokens, BOS_ID)
        times.append(time.perf_counter() - start)
    assert tokens.shape == (batch, new_tokens)
    median = statistics.median(times)
    return {
        "batch": batch,
        "new_tokens": new_tokens,
        "median_seconds": median,
        "tokens_per_second": batch * new_tokens / median,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=20, help="timed decoding calls per batch")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = load_average()
    print(
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"threads={torch.get_num_threads()}, load average {load_before:.2f}"
    )

    training, model = time_to_target(args.seed)
    verdict = "OK" if training["ok"] else "OVER BUDGET"
    print(
        f"training to {TARGET:.0%} held-out token accuracy (reverse {LENGTH} digits): "
        f"{training['steps']} steps, {training['seconds']:.1f} s wall "
        f"({training['cpu_seconds']:.1f} s CPU), accuracy {training['eval_accuracy']:.4f}; "
        f"budget {BUDGET_SECONDS:.0f} s: {verdict}"
    )
    print(
        f"  fresh check: token accuracy {training['fresh_accuracy_2000']:.4f} on 2000 "
        f"sequences (seed 20000)"
    )
    decoding = [decode_speed(model, batch, args.runs) for batch in (64, 1)]
    for row in decoding:
        print(
            f"greedy decoding, batch {row['batch']:>2}: {row['tokens_per_second']:,.0f} "
            f"tokens/s ({row['median_seconds'] * 1e3:.1f} ms for {row['new_tokens']} steps)"
        )
    load_after = load_average()
    print(f"load average after: {load_after:.2f}")
    if args.json is not None:
        write_report(
            args.json,
            load_average=[load_before, load_after],
            seed=args.seed,
            config={
                "length": LENGTH,
                "batch": BATCH,
                "lr": LR,
                "warmup": WARMUP,
                "target": TARGET,
                "budget_seconds": BUDGET_SECONDS,
            },
            training=training,
            decoding=decoding,
        )
        print(f"wrote {args.json}")
    return budget_exit(
        [
            (
                f"training to {TARGET:.0%} in {training['seconds']:.1f} s "
                f"(<= {BUDGET_SECONDS:.0f} s)"
                + ("" if training["reached_target"] else ", target not reached"),
                training["ok"],
            )
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())
