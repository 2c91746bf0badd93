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
    """Return ``mask`` with ``scores``' rank (leading axes of size 1 added, not expanded),
    on ``scores``' device, or raise ValueError saying why it does not fit (…, Q, K)."""
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
    if mask.dim() < scores.dim():
        mask = mask.reshape((1,) * (scores.dim() - mask.dim()) + tuple(mask.shape))
    return mask.to(scores.device)


def _masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None, dim: int,
                    inplace: bool) -> torch.Tensor:
    """The softmax behind :func:`masked_softmax`, without the check of ``scores``.

    One ``masked_fill`` and one ``torch.softmax`` (which subtracts the row maximum). Rows
    with no allowed key are left unmasked for the softmax, so it stays finite with finite
    gradients, and are zeroed afterwards; their gradient is then exactly zero. With
    ``inplace`` the scores (an intermediate nobody else holds) are filled in place.
    """
    return _masked_softmax(scores, mask, dim, inplace=False)


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
    scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-2, -1)  # (…, Q, K)
    weights = _masked_softmax(scores, mask, dim=-1, inplace=True)  # (…, Q, K)
    return weights @ v, weights  # (…, Q, Dv), (…, Q, K)
