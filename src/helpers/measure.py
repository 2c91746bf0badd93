"""Measurement: wall-clock time, peak memory, FLOP counts and the entropy of attention weights.

The chapters measure what attention costs and how peaked its weights are with these tools:

- :func:`time_call`: the fastest of several timings of a call, under ``torch.no_grad()``;
  :func:`loglog_slope`: the exponent p of a power law ``cost ∝ size^p`` fitted to the
  measurements.
- :func:`peak_memory_bytes`: the peak CPU memory a call allocates (torch's profiler);
  :func:`memory_comparison`: naive against tiled attention, length by length.
- :func:`time_decoding`: autoregressive decoding with and without a KV cache.
- :func:`attention_flops`: the floating-point operations of multi-head attention.
- :func:`attention_entropy`: the entropy of each row of attention weights.

Times vary from run to run and between machines: plot them, never print them in an output
that is compared. Byte counts, FLOP counts and entropies are deterministic.

Shape letters, as everywhere in the book: B batch, Q queries, K keys, D features, H heads,
T positions.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager

import numpy as np
import torch

from helpers.checks import check_axis, check_int, check_tensor, describe, require
from helpers.efficient import naive_attention, tiled_attention
from helpers.kvcache import decode_with_cache, decode_without_cache
from helpers.multihead import MultiHeadAttention

__all__ = [
    "time_call",
    "loglog_slope",
    "peak_memory_bytes",
    "memory_comparison",
    "time_decoding",
    "attention_flops",
    "attention_entropy",
]


# ---------------------------------------------------------------- time
def time_call(fn: Callable[[], object], *, repeats: int = 5, warmup: int = 1) -> float:
    """The fastest of ``repeats`` wall-clock timings of ``fn()``, in seconds, after
    ``warmup`` untimed calls.

    The minimum is the least noisy estimate on a shared machine (other processes only ever
    add time). Every call, the warm-up ones included, runs under ``torch.no_grad()``. The
    number varies between runs and machines: plot it, never print it in an output that is
    compared.

    Args:
        fn: a callable taking no arguments.
        repeats: timed calls, at least 1.
        warmup: untimed calls before them, at least 0.
    """
    require(callable(fn), f"fn must be a callable taking no arguments, got {describe(fn)}")
    repeats, warmup = check_int(repeats, "repeats", 1), check_int(warmup, "warmup")
    best = math.inf
    with torch.no_grad():
        for _ in range(warmup):
            fn()
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
    return best


def loglog_slope(sizes: Sequence[float], times: Sequence[float]) -> float:
    """The slope of the least-squares line through (log size, log time): the exponent p
    of a power law ``time ∝ size^p`` (about 2 for quadratic growth, 1 for linear).

    Args:
        sizes, times: 1-D sequences of the same length (at least 2) of finite, positive
            numbers; ``times`` may be any cost (seconds, bytes, FLOPs).
    """
    try:
        sizes, times = np.asarray(sizes, dtype=float), np.asarray(times, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"sizes and times must be 1-D sequences of numbers, got "
            f"{describe(sizes)} and {describe(times)}"
        ) from None
    if sizes.shape != times.shape or sizes.ndim != 1 or len(sizes) < 2:
        raise ValueError(
            f"sizes and times must be 1-D of the same length >= 2, got "
            f"shapes {sizes.shape} and {times.shape}"
        )
    if not (np.isfinite(sizes).all() and np.isfinite(times).all()):
        raise ValueError("sizes and times must be finite, got NaN or inf")
    if (sizes <= 0).any() or (times <= 0).any():
        raise ValueError("sizes and times must be positive to take logarithms")
    if np.ptp(sizes) == 0:
        raise ValueError(
            f"sizes must hold at least two different sizes to fit a slope, got {sizes}"
        )
    return float(np.polyfit(np.log(sizes), np.log(times), 1)[0])


# ---------------------------------------------------------------- peak memory
@contextmanager
def _quiet_stderr():
    """Silence file descriptor 2 (the profiler's C++ log lines, which carry timestamps, would
    otherwise reach a notebook's output); a no-op where fd 2 cannot be redirected."""
    try:
        sys.stderr.flush()
        saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
    except (OSError, AttributeError, ValueError):
        yield
        return
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def peak_memory_bytes(fn, *args, **kwargs) -> int:
    """Peak bytes of CPU tensor memory allocated by ``fn(*args, **kwargs)`` above what was
    allocated when it started (its result included; it is freed afterwards).

    Method: ``torch.profiler.profile(profile_memory=True)`` records every allocation and
    free of torch's CPU allocator as a ``[memory]`` event with its size in bytes (negative
    for a free). Sorting the events by time and taking the running sum gives the memory
    held at each moment; its maximum is the peak. This is exact and deterministic (the same
    byte count every run), unlike the process RSS, which the allocator and the OS blur.
    ``tracemalloc`` cannot be used: it sees only Python's allocator, not torch's. Not
    counted: scratch memory that BLAS libraries allocate outside torch's allocator.
    """
    require(callable(fn), f"fn must be a callable, got {describe(fn)}")
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            result = fn(*args, **kwargs)
            del result
        events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    held = peak = 0
    for event in events:
        held += event.nbytes()
        peak = max(peak, held)
    return peak


def memory_comparison(lengths, d_head=64, block_size=128, seed=0) -> list[dict]:
    """For each sequence length L: peak bytes of :func:`helpers.efficient.naive_attention`
    and of :func:`helpers.efficient.tiled_attention` on q = k = v of shape (1, 1, L, D),
    D = ``d_head``, float32, and their ratio.

    Args:
        lengths: the sequence lengths L, positive integers.
        d_head: D, a positive integer.
        block_size: the key block of the tiled attention, a positive integer.
        seed: the seed of the generator that draws x (the global RNG is not touched).

    Returns:
        ``[{"length", "naive_bytes", "tiled_bytes", "ratio"}, …]``, one dict per length.
    """
    require(
        isinstance(lengths, Iterable)
        and getattr(lengths, "ndim", 1) == 1
        and not isinstance(lengths, (str, bytes, dict, torch.Tensor)),
        f"lengths must be a sequence of positive integers, got {describe(lengths)}",
    )
    lengths = [check_int(length, "every entry of lengths", 1) for length in lengths]
    d_head = check_int(d_head, "d_head", 1)
    block_size = check_int(block_size, "block_size", 1)
    seed = check_int(seed, "seed")
    rows = []
    for length in lengths:
        x = torch.randn(1, 1, length, d_head, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            naive = peak_memory_bytes(naive_attention, x, x, x)
            tiled = peak_memory_bytes(tiled_attention, x, x, x, block_size=block_size)
        rows.append(
            {"length": length, "naive_bytes": naive, "tiled_bytes": tiled, "ratio": naive / tiled}
        )
    return rows


# ---------------------------------------------------------------- decoding
def time_decoding(mha, lengths, batch=1, repeats=3, seed=0) -> list[dict]:
    """Seconds to decode T tokens with and without the KV cache
    (:func:`helpers.kvcache.decode_with_cache`, :func:`helpers.kvcache.decode_without_cache`;
    best of ``repeats`` alternating runs, under ``no_grad``) for each T in ``lengths``.

    Args:
        mha: a :class:`helpers.multihead.MultiHeadAttention`; x of shape (B, T, D) is drawn
            on the CPU, in the dtype of its parameters, and moved to their device (on CUDA
            each run ends with ``torch.cuda.synchronize``, so the GPU's work is timed).
        lengths: the numbers of tokens T, positive integers.
        batch: B, a positive integer.
        repeats: runs of each decoder per length, at least 1.
        seed: the seed of the generator that draws x (the global RNG is not touched).

    Returns:
        ``[{"length", "cache_s", "recompute_s", "speedup"}, …]``; prints nothing.
    """
    require(
        isinstance(mha, MultiHeadAttention),
        f"mha must be a helpers.multihead.MultiHeadAttention, got {describe(mha)}",
    )
    require(
        isinstance(lengths, Iterable)
        and getattr(lengths, "ndim", 1) == 1
        and not isinstance(lengths, (str, bytes, dict, torch.Tensor)),
        f"lengths must be a sequence of positive integers, got {describe(lengths)}",
    )
    lengths = [check_int(length, "every entry of lengths", 1) for length in lengths]
    batch = check_int(batch, "batch", 1)
    repeats = check_int(repeats, "repeats", 1)
    seed = check_int(seed, "seed")
    rows = []
    for length in lengths:
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(batch, length, mha.d_model, generator=gen, dtype=mha.w_o.weight.dtype)
        x = x.to(mha.w_o.weight.device)
        best = {"cache_s": math.inf, "recompute_s": math.inf}
        with torch.no_grad():
            for _ in range(repeats):  # alternate, so that a busy machine slows both alike
                for name, fn in (
                    ("cache_s", decode_with_cache),
                    ("recompute_s", decode_without_cache),
                ):
                    start = time.perf_counter()
                    fn(mha, x)
                    if x.is_cuda:
                        torch.cuda.synchronize(x.device)
                    best[name] = min(best[name], time.perf_counter() - start)
        rows.append({"length": length, **best, "speedup": best["recompute_s"] / best["cache_s"]})
    return rows


# ---------------------------------------------------------------- FLOPs
def attention_flops(
    batch: int,
    num_queries: int,
    num_keys: int,
    d_model: int,
    num_heads: int,
    head_dim: int | None = None,
) -> dict[str, int]:
    """Floating-point operations of one multi-head attention forward pass, stage by stage.

    A matrix product of (m, n) by (n, p) counts 2·m·n·p FLOPs (a multiply and an add), the
    convention of ``torch.utils.flop_counter``; biases, the scaling, the softmax and
    reshapes are not counted. With ``head_dim=None`` each head has D/H features (the
    standard split); pass another ``head_dim`` to price heads of any size, the output
    projection then mapping H·head_dim features back to D.

    Args:
        batch, num_queries, num_keys: B, Q and K, positive integers.
        d_model: D, the feature size of queries, keys, values and output.
        num_heads: H.
        head_dim: features per head; D/H by default (D must then be divisible by H).

    Returns:
        A dict of ints: "projections" (Q, K, V), "scores" (Q·Kᵀ of every head),
        "weighted sum" (weights · V), "output" (W^O), "total", and "score entries"
        (B·H·Q·K, the number of softmax inputs: the one count that grows with H).
    """
    B = check_int(batch, "batch", 1)
    Q = check_int(num_queries, "num_queries", 1)
    K = check_int(num_keys, "num_keys", 1)
    D = check_int(d_model, "d_model", 1)
    H = check_int(num_heads, "num_heads", 1)
    if head_dim is None:
        if D % H:
            raise ValueError(f"d_model={D} must be divisible by num_heads={H}, or pass head_dim")
        head_dim = D // H
    d_h = check_int(head_dim, "head_dim", 1)
    flops = {
        "projections": 2 * B * (Q + 2 * K) * D * H * d_h,
        "scores": 2 * B * H * Q * K * d_h,
        "weighted sum": 2 * B * H * Q * K * d_h,
        "output": 2 * B * Q * H * d_h * D,
    }
    flops["total"] = sum(flops.values())
    flops["score entries"] = B * H * Q * K
    return flops


# ---------------------------------------------------------------- entropy
def attention_entropy(weights: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Entropy ``-Σ α log α`` (in nats, with 0 log 0 = 0) of each row of attention weights.

    A row with all its weight on one key has entropy 0; a uniform row over K keys has the
    largest possible entropy, log K. For the mean entropy of each head of weights
    (B, H, Q, K), average the result over the batch and the queries:
    ``attention_entropy(weights).mean(dim=(0, 2))`` (H,).

    Args:
        weights: floating, shape (…, K) (usually (…, Q, K)), each row along ``dim`` a
            distribution (rows summing to 1). An empty row (K = 0) has entropy 0.
        dim: the axis of the distributions (the keys, by default the last).

    Returns:
        The entropies, ``weights``' shape without ``dim``: (…) (one per query).
    """
    check_tensor(weights, "weights", "(…, K)", ndim=range(1, 65), floating=True)
    check_axis(dim, weights, "weights")
    # Weights are probabilities: a negative one has no entropy (its log is NaN).
    require(
        weights.numel() == 0 or bool((weights >= 0).all()),
        "weights must be non-negative (rows of probabilities), got a negative weight",
    )
    return -torch.special.xlogy(weights, weights).sum(dim=dim)
