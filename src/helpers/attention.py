"""Attention: the masked softmax, scaled dot-product attention and the scoring modules.

The modules ``DotProductAttention``, ``ScaledDotProductAttention``, ``AdditiveAttention``
and ``BilinearAttention`` (and ``additive_scores``, ``bilinear_scores``) live in
:mod:`helpers.scoring` and are importable from here.

Mask convention (as in ``F.scaled_dot_product_attention``): a boolean mask, **True = may
attend**. Masked scores are filled with ``-inf`` after the mask is checked; a query whose
keys are all masked gets all-zero weights (never NaN, never uniform).
"""

from __future__ import annotations

import math

import torch

from .masks import _check_bool_mask

__all__ = [
    "masked_softmax",
    "scaled_dot_product_attention",
    # defined in helpers.scoring, re-exported here (loaded on first use, see __getattr__)
    "DotProductAttention",
    "ScaledDotProductAttention",
    "AdditiveAttention",
    "BilinearAttention",
    "additive_scores",
    "bilinear_scores",
    # defined in helpers.multihead, re-exported here the same way
    "MultiHeadAttention",
]
_FROM_MULTIHEAD = frozenset({"MultiHeadAttention"})
_FROM_SCORING = frozenset(__all__[2:]) - _FROM_MULTIHEAD


def __getattr__(name: str):
    """Re-export the scoring modules of :mod:`helpers.scoring`, which imports this module."""
    if name in _FROM_SCORING:
        from helpers import scoring

        return getattr(scoring, name)
    if name in _FROM_MULTIHEAD:
        from helpers import multihead

        return getattr(multihead, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _FROM_SCORING | _FROM_MULTIHEAD)


def _check_mask(mask, shape: torch.Size, device: torch.device) -> torch.Tensor:
    """Return ``mask`` with the rank of ``shape`` (leading axes of size 1 added, nothing
    expanded) on ``device``, or raise ValueError saying why it does not fit (…, Q, K)."""
    _check_bool_mask(mask, "mask")
    try:
        broadcast = torch.broadcast_shapes(mask.shape, shape)
    except RuntimeError:
        broadcast = None
    if broadcast != shape:
        raise ValueError(f"mask of shape {tuple(mask.shape)} must broadcast to the scores' "
                         f"shape {tuple(shape)} (…, Q, K)")
    if mask.dim() < len(shape):
        mask = mask.reshape((1,) * (len(shape) - mask.dim()) + tuple(mask.shape))
    return mask.to(device)


def _visible_and_rows(mask: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(visible, has_key)``: where the softmax may look, and (only if some row has no
    allowed key, else None) the rows that do have one. A row with no allowed key is made
    fully visible, so its softmax stays finite, and is zeroed afterwards with ``has_key``."""
    has_key = mask.any(dim=dim, keepdim=True)
    if bool(has_key.all()):
        return mask, None
    return mask | ~has_key, has_key


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None,
                   dim: int = -1) -> torch.Tensor:
    """Softmax of ``scores`` along ``dim`` over the entries the mask allows.

    Masked entries get weight exactly 0; a row whose entries are all masked gets all-zero
    weights (and finite, zero gradients), never NaN and never uniform. A score of ``-inf``
    counts as masked, so a row whose allowed scores are all ``-inf`` is an empty row too. The row maximum of
    the unmasked entries is subtracted before ``exp``, so any finite score (±1e4 included)
    is safe in float32 and float64. Usually ``scores`` is (B, Q, K) or (B, H, Q, K) and the
    softmax runs over the keys K.

    Args:
        scores: a floating tensor of shape (…, Q, K).
        mask: optional bool tensor broadcastable to ``scores``' shape, e.g. (Q, K) from
            :func:`helpers.masks.causal_mask` or (B, 1, K) from
            :func:`helpers.masks.valid_length_mask` unsqueezed; True = may attend.
        dim: the axis to normalise over (the keys, by default the last).

    Returns:
        Weights of ``scores``' shape; each row sums to 1, or to 0 if fully masked.
    """
    if not isinstance(scores, torch.Tensor) or not scores.is_floating_point():
        got = scores.dtype if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise ValueError(f"scores must be a floating-point tensor, got {got}")
    # A score of -inf counts as masked. No (…, Q, K) temporary outlives this block except the
    # filled scores the softmax reads, so the peak memory is that of a plain softmax.
    if mask is None:
        if not bool(torch.isneginf(scores).any()):
            return torch.softmax(scores, dim=dim)
        filled = scores
    else:
        filled = torch.where(_check_mask(mask, scores.shape, scores.device), scores,
                             float("-inf"))
    has_key = (filled > float("-inf")).any(dim=dim, keepdim=True)  # rows with a key left
    if bool(has_key.all()):
        return torch.softmax(filled, dim=dim)
    # Rows with no key left: softmax over zeros (finite values and gradients), then zero.
    return torch.softmax(filled.where(has_key, 0.0), dim=dim).masked_fill(~has_key, 0.0)


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None
                                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention with scores ``q kᵀ / √D``: ``softmax(q kᵀ / √D) v``, weights returned.

    Leading (batch, head) axes must broadcast, as in ``torch.matmul``; typical shapes are
    q (B, Q, D), k (B, K, D), v (B, K, Dv), or with heads (B, H, Q, D) and so on. Queries and
    keys must have the same feature size D; for different sizes use additive or bilinear
    scoring. A query whose keys are all masked gets zero weights and a zero output.

    Args:
        q: queries, shape (…, Q, D).
        k: keys, shape (…, K, D).
        v: values, shape (…, K, Dv).
        mask: optional bool mask broadcastable to (…, Q, K); True = may attend.

    Returns:
        ``(out, weights)``: out of shape (…, Q, Dv) and weights of shape (…, Q, K).
    """
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor) or tensor.dim() < 2:
            got = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor)
            raise ValueError(f"{name} must be a tensor with at least 2 axes "
                             f"(…, {'Q' if name == 'q' else 'K'}, D), got {got}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same feature size D, got q of shape "
                         f"{tuple(q.shape)} and k of shape {tuple(k.shape)}; for queries "
                         f"and keys of different sizes use additive or bilinear scoring")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must hold the same number of keys K, got k of shape "
                         f"{tuple(k.shape)} and v of shape {tuple(v.shape)}")
    try:
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(f"the leading (batch, head) axes of q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)} and v {tuple(v.shape)} must broadcast") from None
    return _attend(q, k, v, mask, scale=1.0 / math.sqrt(q.shape[-1]))


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
            scale: float, dropout: float = 0.0, training: bool = False
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(scale · q kᵀ, masked) v`` for checked inputs, as few tensor passes as we can.

    The leading axes are broadcast and flattened to one batch axis N, so the scores come
    from a single ``torch.baddbmm`` that also applies ``scale`` and adds the mask as a bias
    (0 where True, -inf where False) in the same pass; then one softmax and one ``bmm``.
    ``dropout`` (when ``training``) is applied to the weights used for the output.
    """
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    num_queries, num_keys = q.shape[-2], k.shape[-2]
    q3 = q.expand(*lead, *q.shape[-2:]).reshape(-1, num_queries, q.shape[-1])  # (N, Q, D)
    k3 = k.expand(*lead, *k.shape[-2:]).reshape(-1, num_keys, k.shape[-1])  # (N, K, D)
    v3 = v.expand(*lead, *v.shape[-2:]).reshape(-1, num_keys, v.shape[-1])  # (N, K, Dv)
    scores_shape = torch.Size((*lead, num_queries, num_keys))
    has_key = None
    if mask is None:
        bias, beta = q3.new_zeros(()), 0.0
    else:
        visible, has_key = _visible_and_rows(_check_mask(mask, scores_shape, q.device), -1)
        zero = torch.zeros((), dtype=q.dtype, device=q.device)
        bias = torch.where(visible, zero, float("-inf"))  # (…, Q, K) with broadcast axes
        if any(size != 1 for size in bias.shape[:-2]):  # a per-batch mask: materialise it
            bias = bias.expand(scores_shape).reshape(-1, num_queries, num_keys)
        else:
            bias = bias.reshape(bias.shape[-2:])  # (Q or 1, K or 1), broadcast by baddbmm
        beta = 1.0
    scores = torch.baddbmm(bias, q3, k3.transpose(1, 2), beta=beta, alpha=scale)  # (N, Q, K)
    weights = torch.softmax(scores, dim=-1).view(scores_shape)  # (…, Q, K)
    if has_key is not None:
        weights = weights.masked_fill(~has_key, 0.0)  # rows with no allowed key: all zero
    used = torch.nn.functional.dropout(weights, dropout, training) if dropout else weights
    out = torch.bmm(used.reshape(-1, num_queries, num_keys), v3)  # (N, Q, Dv)
    return out.view(*lead, num_queries, v.shape[-1]), weights  # (…, Q, Dv), (…, Q, K)
