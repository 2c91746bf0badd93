"""Attention at scale: online softmax, tiled attention, linear attention.

- :func:`online_softmax` / :func:`online_softmax_update`: the softmax in one pass over
  blocks, with a running maximum ``m`` and a running sum ``l`` rescaled by ``exp(m_old - m_new)``.
- :func:`tiled_attention`: exact attention that loops over key blocks (and, optionally,
  query blocks) with the online softmax, never holding the (Q, K) score matrix: the idea of
  FlashAttention, in plain torch. :func:`naive_attention` materialises the scores (it is
  :func:`helpers.attention.scaled_dot_product_attention`, the output only).
- :func:`linear_attention`: kernelised attention, ``φ(q) (φ(k)ᵀ v)`` (Katharopoulos et al., 2020),
  with :func:`elu_feature_map` (D' = D features) or :func:`taylor_feature_map` (the
  degree-2 Taylor map of Based, Arora et al., 2024: D' = 1 + D + D² features).

The KV cache is in :mod:`helpers.kvcache`; peak memory and timings are measured with
:mod:`helpers.measure`.

Mask convention as everywhere: boolean, **True = may attend**; a query with no allowed key
gets a zero output (as ``F.scaled_dot_product_attention`` gives from torch 2.5 on).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from helpers.attention import _sdpa
from helpers.checks import (
    ANY_RANK_FROM_1,
    check_axis,
    check_bool,
    check_device,
    check_float_dtype,
    check_int,
    check_mask,
    check_qkv,
    check_real,
    check_tensor,
    require,
)
from helpers.masks import causal_mask

__all__ = [
    "OnlineSoftmaxState",
    "online_softmax_update",
    "online_softmax",
    "naive_attention",
    "tiled_attention",
    "elu_feature_map",
    "taylor_feature_map",
    "linear_attention",
]
NEG_INF = float("-inf")


# ---------------------------------------------------------------- online softmax
@dataclass
class OnlineSoftmaxState:
    """Running statistics of a row of scores seen block by block: ``max`` m and ``sum``
    l = Σ exp(s − m), floating tensors of one shape (…, 1). Start from :meth:`empty`."""

    max: torch.Tensor
    sum: torch.Tensor

    def __post_init__(self):
        check_tensor(self.max, "max", "(…, 1)", ndim=ANY_RANK_FROM_1, floating=True, size={-1: 1})
        check_tensor(self.sum, "sum", "(…, 1)", ndim=ANY_RANK_FROM_1, floating=True)
        require(
            self.sum.shape == self.max.shape,
            f"sum must have max's shape {tuple(self.max.shape)}, got shape {tuple(self.sum.shape)}",
        )

    @classmethod
    def empty(cls, shape, dtype=torch.float32, device=None) -> OnlineSoftmaxState:
        """The state before any block: m = −inf, l = 0, each of shape ``shape`` (…, 1)."""
        ok = (
            isinstance(shape, (tuple, list, torch.Size))
            and len(shape) >= 1
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
        )
        require(
            ok and shape[-1] == 1,
            f"shape must be a tuple of sizes (…, 1) ending in 1, got {shape!r}",
        )
        dtype, device = check_float_dtype(dtype), check_device(device)
        return cls(
            torch.full(tuple(shape), NEG_INF, dtype=dtype, device=device),
            torch.zeros(tuple(shape), dtype=dtype, device=device),
        )


def _safe(m: torch.Tensor) -> torch.Tensor:
    """The running max, −inf replaced by 0: ``exp(s − m)`` is then 0, not NaN, if s = m = −inf."""
    return torch.where(m == NEG_INF, torch.zeros_like(m), m)


def online_softmax_update(state: OnlineSoftmaxState, block: torch.Tensor) -> OnlineSoftmaxState:
    """Fold a block of scores (…, Kb) into the state (…, 1): m' = max(m, max block),
    l' = l · exp(m − m') + Σ exp(block − m'). Entries of −inf add nothing; an empty block
    (Kb = 0) leaves the state as it is."""
    require(
        isinstance(state, OnlineSoftmaxState),
        f"state must be an OnlineSoftmaxState, got {type(state).__name__}",
    )
    check_tensor(block, "block", "(…, Kb)", ndim=ANY_RANK_FROM_1, floating=True)
    if state.max.shape != (*block.shape[:-1], 1):
        raise ValueError(
            f"state of shape {tuple(state.max.shape)} does not fit block of shape "
            f"{tuple(block.shape)}: it must be (…, 1) = "
            f"{(*block.shape[:-1], 1)}"
        )
    return _online_softmax_update(state, block)


def _online_softmax_update(state: OnlineSoftmaxState, block: torch.Tensor) -> OnlineSoftmaxState:
    """The unchecked core of :func:`online_softmax_update`."""
    if block.shape[-1] == 0:
        return OnlineSoftmaxState(state.max, state.sum)
    new_max = torch.maximum(state.max, block.amax(dim=-1, keepdim=True))  # (…, 1)
    safe = _safe(new_max)
    block_sum = torch.exp(block - safe).sum(dim=-1, keepdim=True)  # (…, 1)
    new_sum = state.sum * torch.exp(state.max - safe) + block_sum
    return OnlineSoftmaxState(new_max, new_sum)


def online_softmax(scores: torch.Tensor, dim: int = -1, block_size: int = 128) -> torch.Tensor:
    """``torch.softmax(scores, dim)`` with the statistics gathered in ONE pass over blocks of
    ``block_size`` entries (:func:`online_softmax_update`), then normalised: exp(s − m) / l.
    Stable for any finite score; −inf entries get weight 0 and a row of only −inf gets
    all-zero weights, with finite gradients (``torch.softmax`` would give NaN); a NaN score
    gives a NaN row, as in ``torch.softmax``. In float16 and bfloat16 the running max and
    sum are kept in float32 (as FlashAttention keeps them). Shape in = shape out (…, K)."""
    check_tensor(scores, "scores", "(…, K)", ndim=ANY_RANK_FROM_1, floating=True)
    check_axis(dim, scores, "scores")
    block_size = check_int(block_size, "block_size", minimum=1)
    scores = scores.movedim(dim, -1)
    exact = torch.promote_types(scores.dtype, torch.float32)  # the statistics' dtype
    state = OnlineSoftmaxState.empty((*scores.shape[:-1], 1), exact, scores.device)
    for start in range(0, scores.shape[-1], block_size):
        state = _online_softmax_update(state, scores[..., start : start + block_size])
    # A row with no key (max −inf) divides by 1, not by its sum 0: no 0/0 in the value or
    # in the gradient of the branch torch.where discards. A NaN max is not −inf: NaN stays.
    has_key = state.max != NEG_INF  # (…, 1)
    weights = torch.exp(scores - _safe(state.max)) / torch.where(has_key, state.sum, 1.0)
    weights = torch.where(has_key, weights, 0.0).to(scores.dtype)  # (…, K)
    return weights.movedim(-1, dim)


# ---------------------------------------------------------------- naive and tiled attention
def _full_mask(mask, is_causal, lead: torch.Size, num_queries: int, num_keys: int, device):
    """The bool mask (…, Q, K) (a broadcast view, nothing copied) combining ``mask`` and the
    top-left causal mask, or None; ``mask`` must broadcast to the scores' shape."""
    check_bool(is_causal, "is_causal")
    if mask is not None:
        mask = (
            check_mask(mask, (*lead, num_queries, num_keys))
            .to(device)
            .broadcast_to((*mask.shape[:-2], num_queries, num_keys))
        )
    if is_causal:
        causal = causal_mask(num_queries, num_keys, device=device)
        mask = causal if mask is None else mask & causal
    return mask


def naive_attention(q, k, v, mask=None, is_causal=False, scale=None) -> torch.Tensor:
    """Reference attention that materialises the (…, Q, K) scores and weights:
    ``masked_softmax(q kᵀ · scale) v`` with scale = 1/√D by default, i.e. the output of
    :func:`helpers.attention.scaled_dot_product_attention`. q (…, Q, D), k (…, K, D),
    v (…, K, Dv), one floating dtype; bool mask broadcastable to (…, Q, K); ``is_causal``
    adds the top-left causal mask (as ``F.scaled_dot_product_attention``). A query with no
    allowed key gets zeros. Returns out (…, Q, Dv)."""
    lead = check_qkv(q, k, v)
    mask = _full_mask(mask, is_causal, lead, q.shape[-2], k.shape[-2], q.device)
    scale = None if scale is None else check_real(scale, "scale")
    out, _ = _sdpa(q, k, v, mask, scale=scale)
    return out  # (…, Q, Dv); the (…, Q, K) scores and weights are the O(Q·K) memory


def tiled_attention(
    q, k, v, mask=None, is_causal=False, block_size=128, query_block_size=None, scale=None
) -> torch.Tensor:
    """Exact attention without the (Q, K) score matrix: for each block of ``block_size``
    keys, scores s = q kbᵀ · scale (…, Qb, Kb), then with the running max m, denominator l
    and weighted sum of values acc (all rescaled by exp(m_old − m_new)):
    ``acc ← acc · α + exp(s − m) vb``, ``l ← l · α + Σ exp(s − m)``; finally out = acc / l.

    Shapes and mask as :func:`naive_attention` / ``F.scaled_dot_product_attention``: q
    (…, Q, D), k (…, K, D), v (…, K, Dv), bool mask broadcastable to (…, Q, K), True = may
    attend, ``is_causal`` top-left aligned (both may be given: they are combined). A query
    with no allowed key gets zeros. ``query_block_size`` (default: all Q at once) also tiles
    the queries. The largest intermediate is (…, Qb, Kb): O(Q · block) memory, not O(Q · K).
    In float16 and bfloat16 the scores, running statistics and sums are kept in float32.
    A NaN or +inf score makes its query's output NaN, as in naive attention.
    Returns out (…, Q, Dv)."""
    lead = check_qkv(q, k, v)
    block_size = check_int(block_size, "block_size", minimum=1)
    num_queries, num_keys = q.shape[-2], k.shape[-2]
    query_block_size = (
        max(num_queries, 1)
        if query_block_size is None
        else check_int(query_block_size, "query_block_size", minimum=1)
    )
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1]) if q.shape[-1] else 1.0
    scale = check_real(scale, "scale")
    full_mask = _full_mask(mask, False, lead, num_queries, num_keys, q.device)
    check_bool(is_causal, "is_causal")
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    exact = torch.promote_types(q.dtype, torch.float32)  # float16/bfloat16: in float32
    k, v = k.to(exact), v.to(exact)
    outs = []
    for q0 in range(0, num_queries, query_block_size):
        qb = q[..., q0 : q0 + query_block_size, :].to(exact) * scale  # (…, Qb, D)
        rows = qb.shape[-2]
        m = qb.new_full((*lead, rows, 1), NEG_INF)  # running max (…, Qb, 1)
        l = qb.new_zeros((*lead, rows, 1))  # running denominator (…, Qb, 1)
        acc = qb.new_zeros((*lead, rows, v.shape[-1]))  # running Σ p v (…, Qb, Dv)
        last_key = q0 + rows - 1 if is_causal else num_keys - 1
        for k0 in range(0, min(num_keys, last_key + 1), block_size):
            s = qb @ k[..., k0 : k0 + block_size, :].transpose(-2, -1)  # (…, Qb, Kb)
            allowed = (
                None if full_mask is None else full_mask[..., q0 : q0 + rows, k0 : k0 + block_size]
            )  # (…, Qb, Kb)
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
            acc = acc * alpha + p @ v[..., k0 : k0 + block_size, :]
            m = m_new
        # A query with no allowed key has m = −inf and l = 0: divide by 1 there, so that
        # neither the value nor the gradient of the branch torch.where discards is 0/0.
        # A NaN (or +inf) score makes m NaN, not −inf: the NaN reaches the output.
        has_key = m != NEG_INF
        outs.append(
            torch.where(has_key, acc / torch.where(has_key, l, 1.0), torch.zeros_like(acc))
        )  # (…, Qb, Dv)
    if not outs:  # Q == 0
        return q.new_zeros((*lead, 0, v.shape[-1]))
    return (outs[0] if len(outs) == 1 else torch.cat(outs, dim=-2)).to(q.dtype)  # (…, Q, Dv)


# ---------------------------------------------------------------- linear attention
def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1 > 0, the feature map of Katharopoulos et al. (2020); x floating,
    any shape."""
    check_tensor(x, "x", "(…, D)", floating=True)
    return F.elu(x) + 1


def taylor_feature_map(x: torch.Tensor) -> torch.Tensor:
    """The degree-2 Taylor features of exp(q·k/√D) (the map of Based, Arora et al., 2024):
    φ(x) = [1, x / D^¼, vec(x xᵀ) / (√2 √D)], so that φ(q)ᵀφ(k) = 1 + s + s²/2 with
    s = q·k/√D, which is at least 1/2 for every s. x floating (…, D) → (…, D') with
    D' = 1 + D + D². Some features are negative, the similarities never are
    (``similarities_nonnegative``, which :func:`linear_attention` trusts)."""
    check_tensor(x, "x", "(…, D)", ndim=ANY_RANK_FROM_1, floating=True)
    d = x.shape[-1]
    root = math.sqrt(d) if d else 1.0
    x = x / math.sqrt(root)  # x / D^(1/4): then x·y = s
    square = (x.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2) / math.sqrt(2)  # (…, D²)
    return torch.cat([x.new_ones((*x.shape[:-1], 1)), x, square], dim=-1)  # (…, 1 + D + D²)


taylor_feature_map.similarities_nonnegative = True  # 1 + s + s²/2 >= 1/2


def _features(feature_map, x: torch.Tensor, name: str) -> torch.Tensor:
    """``feature_map(x)``, checked to be a tensor (…, T, D') of x's leading shape and >= 0
    (negative features only from a map marked ``similarities_nonnegative``)."""
    phi = feature_map(x)
    if (
        not isinstance(phi, torch.Tensor)
        or phi.dim() != x.dim()
        or phi.shape[:-1] != x.shape[:-1]
        or phi.dtype != x.dtype
    ):
        raise ValueError(
            f"feature_map must map {name} of shape {tuple(x.shape)} to a tensor of "
            f"shape (…, T, D') = {(*x.shape[:-1], 'D')} and dtype {x.dtype}, got "
            f"{tuple(phi.shape) if isinstance(phi, torch.Tensor) else phi!r}"
        )
    if (
        phi.numel()
        and not getattr(feature_map, "similarities_nonnegative", False)
        and bool(phi.min() < 0)
    ):
        raise ValueError(
            f"feature_map must return non-negative features (a kernel's "
            f"similarities φ(q)·φ(k) may not be negative), got a minimum of "
            f"{float(phi.min()):.4g} for {name}"
        )
    return phi


def linear_attention(q, k, v, feature_map=elu_feature_map, is_causal=False) -> torch.Tensor:
    """Kernelised attention with similarity φ(q)ᵀφ(k) instead of exp(q·k/√D), computed in
    O(L) as ``out_i = φ(q_i)ᵀ (Σ_j φ(k_j) v_jᵀ) / φ(q_i)ᵀ (Σ_j φ(k_j))``. With ``is_causal``
    the sums run over j ≤ i (prefix sums; needs Q == K). q (…, Q, D), k (…, K, D),
    v (…, K, Dv) → out (…, Q, Dv). φ must return non-negative features of shape (…, D')
    (the default elu + 1 is positive, D' = D), or be marked ``similarities_nonnegative``
    when only φ(q)ᵀφ(k) is sure to be >= 0 (:func:`taylor_feature_map`, D' = 1 + D + D²).
    The state Σ_j φ(k_j) v_jᵀ is (…, D', Dv): its size, and the rank of the weights, are
    set by D', not D. A query whose similarities are all 0 (e.g. K = 0) gets a zero
    output, as a query that may attend no key. Memory, by design of the prefix-sum form:
    with ``is_causal`` the running states are materialised, (…, T, D', Dv), so it uses
    less memory than naive attention's (…, T, T) only when T > D'·Dv (about 4000 for
    D' = Dv = 64); the recurrent form in chapter 9 keeps one state."""
    check_qkv(q, k, v)
    require(callable(feature_map), f"feature_map must be a callable, got {feature_map!r}")
    check_bool(is_causal, "is_causal")
    if is_causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"causal linear attention needs Q == K, got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    phi_q, phi_k = _features(feature_map, q, "q"), _features(feature_map, k, "k")
    if phi_q.shape[-1] != phi_k.shape[-1]:
        raise ValueError(
            f"feature_map must give q and k the same feature size D', got "
            f"{phi_q.shape[-1]} and {phi_k.shape[-1]}"
        )
    if not is_causal:
        kv = phi_k.transpose(-2, -1) @ v  # (…, D', Dv)
        normaliser = phi_q @ phi_k.sum(dim=-2).unsqueeze(-1)  # (…, Q, 1)
        numerator = phi_q @ kv  # (…, Q, Dv)
    else:
        kv = torch.cumsum(phi_k.unsqueeze(-1) * v.unsqueeze(-2), dim=-3)  # (…, T, D', Dv)
        z = torch.cumsum(phi_k, dim=-2)  # (…, T, D')
        numerator = (phi_q.unsqueeze(-2) @ kv).squeeze(-2)  # (…, T, Dv)
        normaliser = (phi_q * z).sum(dim=-1, keepdim=True)  # (…, T, 1)
    # A query whose similarities are all 0 (no key, say) has a zero numerator too: divide it
    # by 1 there, so that it gets zeros (as a query that may attend no key), never 0/0.
    return numerator / normaliser.where(normaliser > 0, 1.0)  # (…, Q, Dv)
