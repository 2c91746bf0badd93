"""Attention at scale: online softmax, tiled attention, peak memory, KV cache, linear attention.

- :func:`online_softmax` / :func:`online_softmax_update`: the softmax in one pass over
  blocks, with a running maximum ``m`` and a running sum ``l`` rescaled by ``exp(m_old - m_new)``.
- :func:`tiled_attention`: exact attention that loops over key blocks (and, optionally,
  query blocks) with the online softmax, never holding the (Q, K) score matrix: the idea of
  FlashAttention, in plain torch. :func:`naive_attention` materialises the scores.
- :func:`peak_memory_bytes`: the peak CPU memory a call allocates (torch's profiler).
- :class:`KVCache`, :func:`decode_step`, :func:`decode_without_cache`: autoregressive
  decoding with and without a cache (defined in :mod:`helpers.kvcache`, re-exported here).
- :func:`linear_attention`: kernelised attention, ``φ(q) (φ(k)ᵀ v)`` (Katharopoulos et al., 2020).

Mask convention as everywhere: boolean, **True = may attend**; a query with no allowed key
gets a zero output (as ``F.scaled_dot_product_attention`` gives from torch 2.5 on).
"""

from __future__ import annotations

import math
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from helpers.attention import masked_softmax
from helpers.masks import causal_mask
# The KV cache lives in helpers.kvcache; re-exported here, where chapter 9 finds it.
from helpers.kvcache import (KVCache, decode_step, decode_with_cache,  # noqa: F401
                             decode_without_cache, time_decoding)

__all__ = ["OnlineSoftmaxState", "online_softmax_update", "online_softmax", "naive_attention",
           "tiled_attention", "peak_memory_bytes", "memory_comparison", "KVCache",
           "decode_step", "decode_with_cache", "decode_without_cache", "time_decoding",
           "elu_feature_map", "linear_attention"]
NEG_INF = float("-inf")


# ---------------------------------------------------------------- online softmax
@dataclass
class OnlineSoftmaxState:
    """Running statistics of a row of scores seen block by block: ``max`` m and ``sum``
    l = Σ exp(s − m), both of shape (…, 1). Start from :meth:`empty`."""
    max: torch.Tensor
    sum: torch.Tensor

    @classmethod
    def empty(cls, shape, dtype=torch.float32, device=None) -> "OnlineSoftmaxState":
        """The state before any block: m = −inf, l = 0, each of shape ``shape`` (…, 1)."""
        return cls(torch.full(shape, NEG_INF, dtype=dtype, device=device),
                   torch.zeros(shape, dtype=dtype, device=device))


def _safe(m: torch.Tensor) -> torch.Tensor:
    """The running max, −inf replaced by 0: ``exp(s − m)`` is then 0, not NaN, if s = m = −inf."""
    return torch.where(m == NEG_INF, torch.zeros_like(m), m)


def online_softmax_update(state: OnlineSoftmaxState, block: torch.Tensor) -> OnlineSoftmaxState:
    """Fold a block of scores (…, Kb) into the state: m' = max(m, max block),
    l' = l · exp(m − m') + Σ exp(block − m'). Entries of −inf add nothing."""
    new_max = torch.maximum(state.max, block.amax(dim=-1, keepdim=True))  # (…, 1)
    safe = _safe(new_max)
    block_sum = torch.exp(block - safe).sum(dim=-1, keepdim=True)  # (…, 1)
    new_sum = state.sum * torch.exp(state.max - safe) + block_sum
    return OnlineSoftmaxState(new_max, new_sum)


def online_softmax(scores: torch.Tensor, dim: int = -1, block_size: int = 128) -> torch.Tensor:
    """``torch.softmax(scores, dim)`` with the statistics gathered in ONE pass over blocks of
    ``block_size`` entries (:func:`online_softmax_update`), then normalised: exp(s − m) / l.
    Stable for any finite score; −inf entries get weight 0 and a row of only −inf gets
    all-zero weights (``torch.softmax`` would give NaN). Shape in = shape out (…, K)."""
    _check_positive(block_size, "block_size")
    scores = scores.movedim(dim, -1)
    state = OnlineSoftmaxState.empty((*scores.shape[:-1], 1), scores.dtype, scores.device)
    for start in range(0, scores.shape[-1], block_size):
        state = online_softmax_update(state, scores[..., start:start + block_size])
    weights = torch.exp(scores - _safe(state.max))
    weights = torch.where(state.sum > 0, weights / state.sum, torch.zeros_like(weights))
    return weights.movedim(-1, dim)


# ---------------------------------------------------------------- naive and tiled attention
def _check_positive(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _check_qkv(q, k, v) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() < 2 or not t.is_floating_point():
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a floating tensor with at least 2 axes, got {got}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"need q (…, Q, D), k (…, K, D), v (…, K, Dv); got q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}, v {tuple(v.shape)}")


def _full_mask(mask, is_causal: bool, num_queries: int, num_keys: int, device):
    """The bool mask (…, Q, K) (a broadcast view, nothing copied) combining ``mask`` and the
    top-left causal mask, or None."""
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor (True = may attend), got "
                             f"{getattr(mask, 'dtype', type(mask).__name__)}")
        try:
            mask = mask.to(device).broadcast_to((*mask.shape[:-2], num_queries, num_keys))
        except RuntimeError:
            raise ValueError(f"mask of shape {tuple(mask.shape)} must broadcast to "
                             f"(…, Q, K) = (…, {num_queries}, {num_keys})") from None
    if is_causal:
        causal = causal_mask(num_queries, num_keys, device=device)
        mask = causal if mask is None else mask & causal
    return mask


def naive_attention(q, k, v, mask=None, is_causal=False, scale=None) -> torch.Tensor:
    """Reference attention that materialises the (…, Q, K) scores and weights:
    ``masked_softmax(q kᵀ · scale) v`` with scale = 1/√D by default. q (…, Q, D),
    k (…, K, D), v (…, K, Dv), bool mask broadcastable to (…, Q, K); ``is_causal`` adds the
    top-left causal mask (as ``F.scaled_dot_product_attention``). Returns out (…, Q, Dv)."""
    _check_qkv(q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    mask = _full_mask(mask, is_causal, q.shape[-2], k.shape[-2], q.device)
    scores = q @ k.transpose(-2, -1) * scale  # (…, Q, K): the O(Q·K) memory
    return masked_softmax(scores, mask) @ v  # (…, Q, Dv)


def tiled_attention(q, k, v, mask=None, is_causal=False, block_size=128,
                    query_block_size=None, scale=None) -> torch.Tensor:
    """Exact attention without the (Q, K) score matrix: for each block of ``block_size``
    keys, scores s = q kbᵀ · scale (…, Qb, Kb), then with the running max m, denominator l
    and weighted sum of values acc (all rescaled by exp(m_old − m_new)):
    ``acc ← acc · α + exp(s − m) vb``, ``l ← l · α + Σ exp(s − m)``; finally out = acc / l.

    Shapes and mask as :func:`naive_attention` / ``F.scaled_dot_product_attention``: q
    (…, Q, D), k (…, K, D), v (…, K, Dv), bool mask broadcastable to (…, Q, K), True = may
    attend, ``is_causal`` top-left aligned (both may be given: they are combined). A query
    with no allowed key gets zeros. ``query_block_size`` (default: all Q at once) also tiles
    the queries. The largest intermediate is (…, Qb, Kb): O(Q · block) memory, not O(Q · K).
    Returns out (…, Q, Dv)."""
    _check_qkv(q, k, v)
    block_size = _check_positive(block_size, "block_size")
    num_queries, num_keys = q.shape[-2], k.shape[-2]
    query_block_size = max(num_queries, 1) if query_block_size is None else query_block_size
    query_block_size = _check_positive(query_block_size, "query_block_size")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    full_mask = _full_mask(mask, False, num_queries, num_keys, q.device)
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    outs = []
    for q0 in range(0, num_queries, query_block_size):
        qb = q[..., q0:q0 + query_block_size, :] * scale  # (…, Qb, D)
        rows = qb.shape[-2]
        m = qb.new_full((*lead, rows, 1), NEG_INF)  # running max (…, Qb, 1)
        l = qb.new_zeros((*lead, rows, 1))  # running denominator (…, Qb, 1)
        acc = qb.new_zeros((*lead, rows, v.shape[-1]))  # running Σ p v (…, Qb, Dv)
        last_key = q0 + rows - 1 if is_causal else num_keys - 1
        for k0 in range(0, min(num_keys, last_key + 1), block_size):
            s = qb @ k[..., k0:k0 + block_size, :].transpose(-2, -1)  # (…, Qb, Kb)
            allowed = None if full_mask is None else \
                full_mask[..., q0:q0 + rows, k0:k0 + block_size]  # (…, Qb, Kb)
            if is_causal:  # key j allowed for query i iff j <= i
                qi = torch.arange(q0, q0 + rows, device=q.device)[:, None]
                kj = torch.arange(k0, k0 + s.shape[-1], device=q.device)
                allowed = kj <= qi if allowed is None else allowed & (kj <= qi)
            if allowed is not None:
                s.masked_fill_(~allowed, NEG_INF)  # in place: s is fresh, nothing else holds it
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (…, Qb, 1)
            safe = _safe(m_new)
            # (…, Qb, Kb) unnormalised weights, in s's memory unless autograd needs s
            p = torch.exp(s - safe) if needs_grad else s.sub_(safe).exp_()
            alpha = torch.exp(m - safe)  # rescales what was summed under the old max
            l = l * alpha + p.sum(dim=-1, keepdim=True)
            acc = acc * alpha + p @ v[..., k0:k0 + block_size, :]
            m = m_new
        # A query with no allowed key has l = 0: divide by 1 there, so that neither the
        # value nor the gradient of the branch torch.where discards is 0/0 (NaN).
        has_key = l > 0
        outs.append(torch.where(has_key, acc / torch.where(has_key, l, 1.0),
                                torch.zeros_like(acc)))  # (…, Qb, Dv)
    if not outs:  # Q == 0
        return q.new_zeros((*lead, 0, v.shape[-1]))
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=-2)  # (…, Q, Dv)


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
    """For each sequence length L: peak bytes of :func:`naive_attention` and of
    :func:`tiled_attention` on q = k = v of shape (1, 1, L, D), D = ``d_head``, float32,
    and their ratio. Returns ``[{"length", "naive_bytes", "tiled_bytes", "ratio"}, …]``."""
    rows = []
    for length in lengths:
        x = torch.randn(1, 1, length, d_head, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            naive = peak_memory_bytes(naive_attention, x, x, x)
            tiled = peak_memory_bytes(tiled_attention, x, x, x, block_size=block_size)
        rows.append({"length": length, "naive_bytes": naive, "tiled_bytes": tiled,
                     "ratio": naive / tiled})
    return rows


# ---------------------------------------------------------------- linear attention
def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1 > 0, the feature map of Katharopoulos et al. (2020)."""
    return F.elu(x) + 1


def linear_attention(q, k, v, feature_map=elu_feature_map, causal=False) -> torch.Tensor:
    """Kernelised attention with similarity φ(q)ᵀφ(k) instead of exp(q·k/√D), computed in
    O(L) as ``out_i = φ(q_i)ᵀ (Σ_j φ(k_j) v_jᵀ) / φ(q_i)ᵀ (Σ_j φ(k_j))``. With ``causal``
    the sums run over j ≤ i (prefix sums; needs Q == K). q (…, Q, D), k (…, K, D),
    v (…, K, Dv) → out (…, Q, Dv). φ must be positive (the default elu + 1 is)."""
    _check_qkv(q, k, v)
    phi_q, phi_k = feature_map(q), feature_map(k)  # (…, Q, D'), (…, K, D')
    if not causal:
        kv = phi_k.transpose(-2, -1) @ v  # (…, D', Dv)
        normaliser = phi_q @ phi_k.sum(dim=-2).unsqueeze(-1)  # (…, Q, 1)
        return phi_q @ kv / normaliser
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal linear attention needs Q == K, got q {tuple(q.shape)} "
                         f"and k {tuple(k.shape)}")
    kv = torch.cumsum(phi_k.unsqueeze(-1) * v.unsqueeze(-2), dim=-3)  # (…, T, D', Dv)
    z = torch.cumsum(phi_k, dim=-2)  # (…, T, D')
    numerator = (phi_q.unsqueeze(-2) @ kv).squeeze(-2)  # (…, T, Dv)
    return numerator / (phi_q * z).sum(dim=-1, keepdim=True)
