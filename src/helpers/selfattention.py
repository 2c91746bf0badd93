"""Self-attention: queries, keys and values from one set of T vectors, and its banded form.

Self-attention takes its queries, keys and values from one set of T vectors. Where that set
is long (speech) or has a structure of its own (an image, a graph), a boolean mask (True =
may attend, as everywhere in the book) restricts which keys each query sees; those masks
(:func:`helpers.masks.band_mask`, :func:`helpers.masks.grid_mask`,
:func:`helpers.masks.adjacency_mask`, :func:`helpers.masks.reachable`) live in
:mod:`helpers.masks`. :func:`windowed_attention` computes banded attention without ever
forming the (T, T) score matrix. Cutting an image into patches is in
:mod:`helpers.tasks.images`; timing (``time_call``, ``loglog_slope``) in
:mod:`helpers.measure`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from helpers.attention import _masked_softmax, _sdpa
from helpers.checks import check_int, check_mask, check_qkv, check_tensor, require

__all__ = ["SelfAttention", "windowed_attention"]


class SelfAttention(nn.Module):
    """Single-head scaled dot-product self-attention: ``softmax(QKᵀ/√Dk) V`` with
    ``Q = X W_q``, ``K = X W_k``, ``V = X W_v`` taken from the same input ``X``.

    The projections are ``nn.Linear`` attributes ``w_q``, ``w_k``, ``w_v`` without bias (so
    ``Q = x @ w_q.weight.T``). ``forward(x, mask=None)`` takes x of shape (B, T, D) or
    (T, D), in the parameters' dtype, and an optional bool mask broadcastable to (B, T, T),
    True = may attend, and returns ``(out, weights)``: out (B, T, Dv) and weights (B, T, T).
    The number of parameters, D·(2·Dk + Dv), does not depend on T.

    Args:
        d_model: D, the input's feature size (a positive integer).
        d_k: Dk, the size of queries and keys; defaults to D.
        d_v: Dv, the size of values (and outputs); defaults to D.
    """

    def __init__(self, d_model: int, d_k: int | None = None, d_v: int | None = None):
        super().__init__()
        d_model = check_int(d_model, "d_model", 1)
        d_k = d_model if d_k is None else check_int(d_k, "d_k", 1)
        d_v = d_model if d_v is None else check_int(d_v, "d_v", 1)
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        d_model = self.w_q.in_features
        check_tensor(
            x,
            "x",
            f"(B, T, {d_model}) or (T, {d_model})",
            ndim=(2, 3),
            dtype=self.w_q.weight.dtype,
            size={-1: d_model},
        )
        if mask is not None:
            check_mask(mask, (*x.shape[:-2], x.shape[-2], x.shape[-2]))
        return _sdpa(self.w_q(x), self.w_k(x), self.w_v(x), mask)


def windowed_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product self-attention under :func:`helpers.masks.band_mask`, computing
    only the band.

    Equal to ``scaled_dot_product_attention(q, k, v, band_mask(T, window))`` but it scores
    each query against its 2w + 1 neighbouring keys only, so time and memory grow as
    T·(2w + 1) instead of T². The weights come back in band layout: column ``c`` of row
    ``i`` is the weight of key ``i - w + c`` (0 where that key lies outside the sequence).
    T = 0 gives empty results.

    Args:
        q: queries, shape (…, T, D), floating.
        k: keys, shape (…, T, D) (the same T: this is self-attention), q's dtype.
        v: values, shape (…, T, Dv), q's dtype; leading axes broadcast with q's and k's.
        window: w >= 0.

    Returns:
        ``(out, band_weights)``: out (…, T, Dv), band_weights (…, T, 2w' + 1) where
        w' = min(w, T - 1) (and w' = 0 when T = 0).
    """
    window = check_int(window, "window")
    lead = check_qkv(q, k, v)
    require(
        q.shape[-2] == k.shape[-2],
        f"q, k and v must hold the same T positions, got q {tuple(q.shape)}, "
        f"k {tuple(k.shape)}, v {tuple(v.shape)}",
    )
    num_positions = q.shape[-2]
    window = min(window, max(num_positions - 1, 0))
    width = 2 * window + 1
    if num_positions == 0:  # nothing to attend: empty results (unfold needs one position)
        return (q.new_zeros(*lead, 0, v.shape[-1]), q.new_zeros(*lead, 0, width))
    pad = (0, 0, window, window)  # pad the T axis by w on both sides
    k_band = nn.functional.pad(k, pad).unfold(-2, width, 1)  # (…, T, D, 2w+1)
    v_band = nn.functional.pad(v, pad).unfold(-2, width, 1)  # (…, T, Dv, 2w+1)
    scale = math.sqrt(q.shape[-1]) if q.shape[-1] else 1.0  # D = 0: all scores are 0
    scores = torch.einsum("...td,...tdc->...tc", q, k_band) / scale
    rows = torch.arange(num_positions, device=q.device)[:, None]  # (T, 1)
    key_index = rows - window + torch.arange(width, device=q.device)  # (T, 2w+1)
    inside = (key_index >= 0) & (key_index < num_positions)
    weights = _masked_softmax(scores, inside)  # (…, T, 2w+1)
    return torch.einsum("...tc,...tdc->...td", weights, v_band), weights
