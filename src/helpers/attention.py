"""The attention core: the masked softmax, and the one step every attention module shares.

Attention is four steps, in the order the chapters derive them::

    scores  = score(queries, keys)            # (…, Q, K)   how well each key fits each query
    scores  = scores where mask, else -inf    # (…, Q, K)   the keys a query may not see
    weights = softmax(scores) over the keys   # (…, Q, K)   each row sums to 1
    out     = weights @ values                # (…, Q, Dv)  a weighted average of the values

:func:`attend` is the last three steps, given any scores; :func:`scaled_dot_product_attention`
adds the first with the scaled dot product ``q · k / √D``. Every attention in the helpers
calls one of the two: the scoring modules of :mod:`helpers.scoring`,
:class:`helpers.multihead.MultiHeadAttention` (so the Transformer blocks), the self-attention
of :mod:`helpers.selfattention` and the decoding steps of :mod:`helpers.kvcache`.

Mask convention (as in ``F.scaled_dot_product_attention``): a boolean mask, **True = may
attend**, broadcastable to the scores' shape (…, Q, K). Masked scores are filled with
``-inf``; a query whose keys are all masked gets all-zero weights and a zero output (never
NaN, never uniform).
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from helpers.checks import check_bool, check_bool_mask, check_probability, check_real, check_tensor

__all__ = ["masked_softmax", "attend", "scaled_dot_product_attention"]

_ANY_RANK_FROM_2 = range(2, 65)  # (…, Q, D): at least two axes


def _broadcast_mask(mask, shape: torch.Size, device: torch.device) -> torch.Tensor:
    """``mask`` checked to be bool and to broadcast to ``shape`` (…, Q, K), on ``device``."""
    check_bool_mask(mask, "mask")
    try:
        fits = torch.broadcast_shapes(mask.shape, shape) == shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} must broadcast to the scores' "
            f"shape {tuple(shape)} (…, Q, K)"
        )
    return mask.to(device)


def masked_softmax(
    scores: torch.Tensor, mask: torch.Tensor | None = None, dim: int = -1
) -> torch.Tensor:
    """Softmax of ``scores`` along ``dim`` over the entries the mask allows.

    Masked entries get weight exactly 0; a row whose entries are all masked gets all-zero
    weights (and finite, zero gradients), never NaN and never uniform. A score of ``-inf``
    counts as masked, so a row whose allowed scores are all ``-inf`` is an empty row too.
    The row maximum of the unmasked entries is subtracted before ``exp``, so any finite
    score (±1e4 included) is safe in float32 and float64. Usually ``scores`` is (B, Q, K)
    or (B, H, Q, K) and the softmax runs over the keys K. A zero-size axis gives an empty
    result, as ``torch.softmax`` does.

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
    if (
        isinstance(dim, bool)
        or not isinstance(dim, int)
        or not -max(scores.dim(), 1) <= dim < max(scores.dim(), 1)
    ):
        raise ValueError(
            f"dim must be an axis of scores (shape {tuple(scores.shape)}), got {dim!r}"
        )
    # A score of -inf counts as masked. The rows with a key left come from a reduction, so no
    # (…, Q, K) temporary is made beyond the filled scores: the peak memory of a plain softmax.
    filled = (
        scores
        if mask is None
        else torch.where(_broadcast_mask(mask, scores.shape, scores.device), scores, float("-inf"))
    )  # (…, Q, K)
    if filled.numel() == 0:
        return torch.softmax(filled, dim=dim)  # an empty axis: an empty result, as torch gives
    has_key = filled.detach().amax(dim=dim, keepdim=True) != float("-inf")  # (…, Q, 1); NaN rows
    # stay NaN; detached, so autograd keeps no second (…, Q, K) tensor for it
    if bool(has_key.all()):
        return torch.softmax(filled, dim=dim)
    # Rows with no key left: softmax over zeros (finite values and gradients), then zero.
    return torch.softmax(filled.where(has_key, 0.0), dim=dim).masked_fill(~has_key, 0.0)


def attend(
    scores: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    dropout: float = 0.0,
    training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The step every attention shares: mask the scores, softmax over the keys, average
    the values. ``weights = masked_softmax(scores, mask)``, ``out = weights @ values``.

    Args:
        scores: (…, Q, K), floating; from any scoring function.
        values: (…, K, Dv), the same dtype; leading axes broadcast with the scores'.
        mask: optional bool mask broadcastable to (…, Q, K); True = may attend.
        dropout: a probability in [0, 1); while ``training``, weights are dropped (and the
            rest scaled by 1 / (1 - dropout)) before they average the values.
        training: whether to apply ``dropout``.

    Returns:
        ``(out, weights)``: out (…, Q, Dv) and the undropped weights (…, Q, K).
    """
    check_tensor(scores, "scores", "(…, Q, K)", ndim=_ANY_RANK_FROM_2, floating=True)
    check_tensor(values, "values", "(…, K, Dv)", ndim=_ANY_RANK_FROM_2, dtype=scores.dtype)
    dropout = check_probability(dropout)
    check_bool(training, "training")
    if values.shape[-2] != scores.shape[-1]:
        raise ValueError(
            f"values must hold one row per key: scores of shape "
            f"{tuple(scores.shape)} have K={scores.shape[-1]} keys, values of "
            f"shape {tuple(values.shape)} have {values.shape[-2]}"
        )
    try:
        torch.broadcast_shapes(scores.shape[:-2], values.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading (batch, head) axes of scores {tuple(scores.shape)} and "
            f"values {tuple(values.shape)} must broadcast"
        ) from None
    weights = masked_softmax(scores, mask)  # (…, Q, K): masked, then softmax over the keys
    used = F.dropout(weights, dropout, training=True) if dropout and training else weights
    return used @ values, weights  # (…, Q, Dv): each query's weighted average of the values


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    dropout: float = 0.0,
    training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention with scores ``q kᵀ / √D``: ``softmax(q kᵀ / √D) v``, weights returned.

    Leading (batch, head) axes must broadcast, as in ``torch.matmul``; typical shapes are
    q (B, Q, D), k (B, K, D), v (B, K, Dv), or with heads (B, H, Q, D) and so on. Queries and
    keys must have the same feature size D; for different sizes use additive or bilinear
    scoring. A query whose keys are all masked gets zero weights and a zero output. Equal
    to ``F.scaled_dot_product_attention`` (which returns no weights).

    Args:
        q: queries, shape (…, Q, D).
        k: keys, shape (…, K, D).
        v: values, shape (…, K, Dv).
        mask: optional bool mask broadcastable to (…, Q, K); True = may attend.
        scale: the factor of the scores, 1 / √D by default (1.0 gives plain dot products).
        dropout, training: dropout on the weights, as in :func:`attend`.

    Returns:
        ``(out, weights)``: out of shape (…, Q, Dv) and weights of shape (…, Q, K).
    """
    for name, tensor, letter in (("q", q, "Q"), ("k", k, "K"), ("v", v, "K")):
        check_tensor(tensor, name, f"(…, {letter}, D)", ndim=_ANY_RANK_FROM_2, floating=True)
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same feature size D, got q of shape "
            f"{tuple(q.shape)} and k of shape {tuple(k.shape)}; for queries "
            f"and keys of different sizes use additive or bilinear scoring"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must hold the same number of keys K, got k of shape "
            f"{tuple(k.shape)} and v of shape {tuple(v.shape)}"
        )
    try:
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading (batch, head) axes of q {tuple(q.shape)}, "
            f"k {tuple(k.shape)} and v {tuple(v.shape)} must broadcast"
        ) from None
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1]) if q.shape[-1] else 1.0
    scale = check_real(scale, "scale")
    scores = _scaled_products(q, k, scale)  # (…, Q, K) = q @ kᵀ · scale: every query, every key
    return attend(scores, v, mask, dropout=dropout, training=training)


def _scaled_products(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """``(q @ k.transpose(-2, -1)) * scale`` for checked q (…, Q, D) and k (…, K, D).

    Computed as one batched product with the scale applied inside it (``torch.baddbmm``):
    no second (…, Q, K) tensor for the scaling, and the rounding (forward and backward) that
    every chapter's printed numbers were computed with. Tests check it against the formula.
    """
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    n = math.prod(lead)  # N: the leading axes flattened (explicit: any size may be 0)
    q3 = q.expand(*lead, *q.shape[-2:]).reshape(n, *q.shape[-2:])  # (N, Q, D)
    k3 = k.expand(*lead, *k.shape[-2:]).reshape(n, *k.shape[-2:])  # (N, K, D)
    scores = torch.baddbmm(q3.new_zeros(()), q3, k3.transpose(1, 2), beta=0.0, alpha=scale)
    return scores.view(*lead, q.shape[-2], k.shape[-2])  # (…, Q, K)
