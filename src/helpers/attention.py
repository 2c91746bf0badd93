"""The attention core: the masked softmax, and the one step every attention module shares.

Attention is four steps, in the order the chapters derive them::

    scores  = score(queries, keys)            # (…, Q, K)   how well each key fits each query
    scores  = scores where mask, else -inf    # (…, Q, K)   the keys a query may not see
    weights = softmax(scores) over the keys   # (…, Q, K)   each row sums to 1
    out     = weights @ values                # (…, Q, Dv)  a weighted average of the values

:func:`attend` is the last three steps, given any scores; :func:`scaled_dot_product_attention`
adds the first with the scaled dot product ``q · k / √D``. Every attention in the helpers
calls one of the two: the scoring modules of :mod:`helpers.scoring`,
:class:`helpers.multihead.MultiHeadAttention` (so the Transformer blocks and the KV cache)
and the self-attention of :mod:`helpers.selfattention`.

Check once, where a call enters the library: each public function checks its arguments with
:mod:`helpers.checks` and then calls its unchecked core (``_masked_softmax``, ``_attend``,
``_sdpa``), which is the maths alone. Library code that has checked its own arguments calls
the cores; they are the only private names another library module may import.

Mask convention (as in ``F.scaled_dot_product_attention``): a boolean mask, **True = may
attend**, broadcastable to the scores' shape (…, Q, K). Masked scores are filled with
``-inf``; a query whose keys are all masked gets all-zero weights and a zero output (never
NaN, never uniform). No Python branch depends on the values, so the core works under
``torch.func.vmap``, ``torch.compile(fullgraph=True)``, ``torch.jit.trace`` and on the meta
device. In float16 and bfloat16 the scores and the softmax are computed in float32 (as
PyTorch's fused kernels do) and the results cast back. ``torch.jit.script`` is not
supported, by design: the checks use keyword-only arguments and f-strings, which
TorchScript cannot compile; ``torch.jit.trace`` and ``torch.compile`` work.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from helpers.checks import (
    ANY_RANK_FROM_2,
    check_axis,
    check_bool,
    check_leading_axes,
    check_mask,
    check_probability,
    check_qkv,
    check_real,
    check_tensor,
    require,
)

__all__ = ["masked_softmax", "attend", "scaled_dot_product_attention"]


def masked_softmax(
    scores: torch.Tensor, mask: torch.Tensor | None = None, dim: int = -1
) -> torch.Tensor:
    """Softmax of ``scores`` along ``dim`` over the entries the mask allows.

    Masked entries get weight exactly 0; a row whose entries are all masked gets all-zero
    weights (and finite, zero gradients), never NaN and never uniform. A score of ``-inf``
    counts as masked, so a row whose allowed scores are all ``-inf`` is an empty row too;
    a NaN score gives a NaN row, and ``+inf`` (outside the finite-score contract) gives NaN
    as ``torch.softmax`` does. Any finite score (±1e4 included) is safe. Usually ``scores``
    is (B, Q, K) or (B, H, Q, K) and the softmax runs over the keys K. A zero-size axis
    gives an empty result, as ``torch.softmax`` does.

    Args:
        scores: a floating tensor of shape (…, Q, K).
        mask: optional bool tensor broadcastable to ``scores``' shape, e.g. (Q, K) from
            :func:`helpers.masks.causal_mask` or (B, 1, K) from
            :func:`helpers.masks.valid_length_mask` unsqueezed; True = may attend.
        dim: the axis to normalise over (the keys, by default the last).

    Returns:
        Weights of ``scores``' shape; each row sums to 1, or to 0 if fully masked.
    """
    check_tensor(scores, "scores", "(…, Q, K)", floating=True)
    check_axis(dim, scores, "scores")
    if mask is not None:
        check_mask(mask, scores.shape)
    return _masked_softmax(scores, mask, dim)


def _masked_softmax(scores, mask=None, dim=-1):
    """The unchecked core of :func:`masked_softmax`."""
    if mask is not None:
        scores = scores.masked_fill(~mask.to(scores.device), float("-inf"))  # (…, Q, K)
    if scores.shape[dim] == 0:  # no keys at all: an empty result, as torch gives
        return torch.softmax(scores, dim=dim)
    exact = torch.promote_types(scores.dtype, torch.float32)  # float16/bfloat16: in float32
    return _SoftmaxEmptyRowsZero.apply(scores.to(exact), dim).to(scores.dtype)  # (…, Q, K)


class _SoftmaxEmptyRowsZero(torch.autograd.Function):
    """``torch.softmax`` with the rows that have no key (every score −inf) set to 0, not NaN.

    Those rows are zeroed in place in the softmax's own output, so it takes no more memory
    than ``torch.softmax`` and has no Python branch on the values (it works under vmap,
    torch.compile, jit.trace and on the meta device). NaN rows stay NaN. The backward pass
    is the softmax's own, which is 0 in a zero row: finite gradients.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(scores, dim):
        weights = torch.softmax(scores, dim=dim)  # (…, Q, K); NaN in a row of only -inf
        has_key = scores.amax(dim=dim, keepdim=True) != float("-inf")  # (…, Q, 1)
        return weights.masked_fill_(~has_key, 0.0)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.dim = inputs[1]
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad):
        (weights,) = ctx.saved_tensors
        return torch._softmax_backward_data(grad, weights, ctx.dim, weights.dtype), None


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
    check_tensor(scores, "scores", "(…, Q, K)", ndim=ANY_RANK_FROM_2, floating=True)
    check_tensor(values, "values", "(…, K, Dv)", ndim=ANY_RANK_FROM_2, dtype=scores.dtype)
    require(
        values.shape[-2] == scores.shape[-1],
        f"values must hold one row per key: scores of shape {tuple(scores.shape)} have "
        f"K={scores.shape[-1]} keys, values of shape {tuple(values.shape)} have "
        f"{values.shape[-2]}",
    )
    lead = check_leading_axes({"scores": scores, "values": values})
    if mask is not None:
        check_mask(mask, (*lead, *scores.shape[-2:]))
    return _attend(
        scores, values, mask, check_probability(dropout), check_bool(training, "training")
    )


def _attend(scores, values, mask=None, dropout_p=0.0, training=False):
    """The unchecked core of :func:`attend`."""
    weights = _masked_softmax(scores, mask)  # (…, Q, K): masked, then softmax over the keys
    used = F.dropout(weights, dropout_p) if training and dropout_p else weights
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
    to ``F.scaled_dot_product_attention`` (which returns no weights); in float16 and
    bfloat16 the scores and weights are kept in float32 between the steps, as torch does.

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
    lead = check_qkv(q, k, v)
    if mask is not None:
        check_mask(mask, (*lead, q.shape[-2], k.shape[-2]))
    scale = None if scale is None else check_real(scale, "scale")
    dropout, training = check_probability(dropout), check_bool(training, "training")
    return _sdpa(q, k, v, mask, scale=scale, dropout_p=dropout, training=training)


def _sdpa(q, k, v, mask=None, *, scale=None, dropout_p=0.0, training=False):
    """The unchecked core of :func:`scaled_dot_product_attention`."""
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1]) if q.shape[-1] else 1.0
    exact = torch.promote_types(q.dtype, torch.float32)  # float16/bfloat16: in float32
    scores = (q.to(exact) @ k.to(exact).transpose(-2, -1)) * scale  # (…, Q, K)
    out, weights = _attend(scores, v.to(exact), mask, dropout_p, training)  # (…, Q, Dv)
    return out.to(q.dtype), weights.to(q.dtype)
