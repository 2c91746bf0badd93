"""Attention: the masked softmax and scaled dot-product attention.

Mask convention (as in ``F.scaled_dot_product_attention``): a boolean mask, **True = may
attend**. Masked scores are filled with ``-inf`` after the mask is checked; a query whose
keys are all masked gets all-zero weights (never NaN, never uniform).
"""

from __future__ import annotations

import math

import torch

__all__ = ["masked_softmax", "scaled_dot_product_attention"]


def _check_mask(mask, scores: torch.Tensor) -> torch.Tensor:
    """Return ``mask`` expanded to ``scores``' shape, or raise ValueError saying why not."""
    if not isinstance(mask, torch.Tensor):
        raise ValueError(f"mask must be a torch.Tensor of dtype torch.bool, "
                         f"got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must have dtype torch.bool (True = may attend), got dtype "
                         f"{mask.dtype}; build one with helpers.masks or compare, e.g. x > 0")
    try:
        broadcast = torch.broadcast_shapes(mask.shape, scores.shape)
    except RuntimeError:
        broadcast = None
    if broadcast != scores.shape:
        raise ValueError(f"mask of shape {tuple(mask.shape)} must broadcast to the scores' "
                         f"shape {tuple(scores.shape)} (…, Q, K)")
    return mask.to(scores.device).expand(scores.shape)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None,
                   dim: int = -1) -> torch.Tensor:
    """Softmax of ``scores`` along ``dim`` over the entries the mask allows.

    Masked entries get weight exactly 0; a row whose entries are all masked gets all-zero
    weights (and finite, zero gradients), never NaN and never uniform. The row maximum of
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
    if mask is None:
        return torch.softmax(scores, dim=dim)
    mask = _check_mask(mask, scores)
    masked = scores.masked_fill(~mask, float("-inf"))
    row_max = masked.amax(dim=dim, keepdim=True).detach()  # softmax is shift-invariant
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exp = torch.exp(masked - row_max)  # exp(-inf) = 0 at masked entries, gradient 0 too
    total = exp.sum(dim=dim, keepdim=True)
    total = torch.where(total > 0, total, torch.ones_like(total))  # fully masked: 0 / 1
    return exp / total


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
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (…, Q, K)
    weights = masked_softmax(scores, mask)  # (…, Q, K)
    return weights @ v, weights  # (…, Q, Dv), (…, Q, K)
