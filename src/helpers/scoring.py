"""Attention scoring functions as modules: dot product, scaled dot product, additive, bilinear.

Every module's ``forward(queries, keys, values, mask=None)`` returns ``(out, weights)``
(weights are returned, never stashed on ``self``) and ``scores(queries, keys)`` returns
the raw scores before the softmax. Inputs may be 2-D (Q, D), 3-D (B, Q, D) or 4-D
(B, H, Q, D); leading axes broadcast as in ``torch.matmul``. The mask is boolean,
True = may attend, broadcastable to (…, Q, K). Each module makes its scores and hands
them to the one attention core, :func:`helpers.attention.attend` (mask, softmax, weighted
sum); the dot-product modules call :func:`helpers.attention.scaled_dot_product_attention`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from helpers.attention import _attend, _sdpa
from helpers.checks import (
    check_int,
    check_mask,
    check_probability,
    check_scoring_inputs,
    check_tensor,
)

__all__ = [
    "additive_scores",
    "bilinear_scores",
    "DotProductAttention",
    "ScaledDotProductAttention",
    "AdditiveAttention",
    "BilinearAttention",
]


def additive_scores(
    queries: torch.Tensor,
    keys: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    w_v: torch.Tensor,
) -> torch.Tensor:
    """Additive (Bahdanau) scores ``w_vᵀ tanh(W_q q + W_k k)`` for every query-key pair.

    Queries (…, Q, Dq) and keys (…, K, Dk) may have different feature sizes; both are
    projected to a hidden size Dh, added for every pair (a (…, Q, K, Dh) tensor) and read
    out by ``w_v``. This equals a one-hidden-layer MLP ``w_vᵀ tanh(W [q; k])`` on the
    concatenation, with ``W = [W_q W_k]``. Weights are given as in ``nn.Linear``:
    ``w_q`` (Dh, Dq), ``w_k`` (Dh, Dk), ``w_v`` (1, Dh) or (Dh,). Returns scores (…, Q, K).
    """
    check_tensor(queries, "queries", "(…, Q, Dq)", ndim=range(2, 65), floating=True)
    check_tensor(keys, "keys", "(…, K, Dk)", ndim=range(2, 65), dtype=queries.dtype)
    check_tensor(w_q, "w_q", "(Dh, Dq)", ndim=2, dtype=queries.dtype, size={1: queries.shape[-1]})
    check_tensor(
        w_k,
        "w_k",
        "(Dh, Dk)",
        ndim=2,
        dtype=queries.dtype,
        size={0: w_q.shape[0], 1: keys.shape[-1]},
    )
    check_tensor(w_v, "w_v", "(1, Dh) or (Dh,)", ndim=(1, 2), dtype=queries.dtype)
    if w_v.numel() != w_q.shape[0] or (w_v.dim() == 2 and w_v.shape[0] != 1):
        raise ValueError(
            f"w_v must have shape (1, Dh) or (Dh,) with Dh={w_q.shape[0]}, got "
            f"shape {tuple(w_v.shape)}"
        )
    return _additive_scores(queries, keys, w_q, w_k, w_v)


def _additive_scores(queries, keys, w_q, w_k, w_v):
    """The unchecked core of :func:`additive_scores`."""
    projected_queries = nn.functional.linear(queries, w_q).unsqueeze(-2)  # (…, Q, 1, Dh)
    projected_keys = nn.functional.linear(keys, w_k).unsqueeze(-3)  # (…, 1, K, Dh)
    features = torch.tanh(projected_queries + projected_keys)  # (…, Q, K, Dh)
    return features @ w_v.reshape(-1)  # (…, Q, K)


def bilinear_scores(
    queries: torch.Tensor, keys: torch.Tensor, weight: torch.Tensor
) -> torch.Tensor:
    """Bilinear (multiplicative, Luong "general") scores ``qᵀ W k`` for every pair.

    Queries (…, Q, Dq) and keys (…, K, Dk) may have different feature sizes; ``weight`` W
    is (Dq, Dk). With Dq = Dk and W the identity this is the plain dot product. Returns
    scores (…, Q, K).
    """
    check_tensor(queries, "queries", "(…, Q, Dq)", ndim=range(2, 65), floating=True)
    check_tensor(keys, "keys", "(…, K, Dk)", ndim=range(2, 65), dtype=queries.dtype)
    check_tensor(
        weight,
        "weight",
        "(Dq, Dk)",
        ndim=2,
        dtype=queries.dtype,
        size={0: queries.shape[-1], 1: keys.shape[-1]},
    )
    return _bilinear_scores(queries, keys, weight)


def _bilinear_scores(queries, keys, weight):
    """The unchecked core of :func:`bilinear_scores`."""
    return (queries @ weight) @ keys.transpose(-2, -1)  # (…, Q, Dk) @ (…, Dk, K)


class _ScoringAttention(nn.Module):
    """Shared ``scores`` / ``forward`` of the attention modules; subclasses give ``_scores``
    (unchecked) and ``_sizes``, what the inputs must match."""

    def __init__(self, dropout: float = 0.0):
        super().__init__()
        self.dropout_p = check_probability(dropout)

    def _sizes(self) -> dict:
        """``query_dim``, ``key_dim`` and ``dtype`` the inputs must have (a dot product: none)."""
        return {}

    def scores(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Raw scores (…, Q, K) of queries (…, Q, Dq) against keys (…, K, Dk), no softmax."""
        check_scoring_inputs(type(self).__name__, queries, keys, **self._sizes())
        return self._scores(queries, keys)

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        lead = check_scoring_inputs(type(self).__name__, queries, keys, values, **self._sizes())
        if mask is not None:
            check_mask(mask, (*lead, queries.shape[-2], keys.shape[-2]))
        scores = self._scores(queries, keys)  # (…, Q, K)
        return _attend(scores, values, mask, self.dropout_p, self.training)


class DotProductAttention(_ScoringAttention):
    """Dot-product attention: scores ``q·k``, then ``softmax(scores, masked) v``.

    ``forward(queries, keys, values, mask=None)`` takes queries (…, Q, D), keys (…, K, D),
    values (…, K, Dv), with … one of (), (B,) or (B, H), and an optional bool mask
    broadcastable to (…, Q, K), True = may attend; it returns ``(out, weights)``, out
    (…, Q, Dv) and weights (…, Q, K); a query with no allowed key gets zero weights.
    Queries and keys must share D. Equals ``F.scaled_dot_product_attention(..., scale=1.0)``.
    ``dropout`` is applied to the weights used for ``out`` while training.
    """

    def _scale(self, queries: torch.Tensor) -> float:
        return 1.0

    def _scores(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        scores = queries @ keys.transpose(-2, -1)  # (…, Q, K)
        scale = self._scale(queries)
        return scores if scale == 1.0 else scores * scale

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        lead = check_scoring_inputs(type(self).__name__, queries, keys, values)
        if mask is not None:
            check_mask(mask, (*lead, queries.shape[-2], keys.shape[-2]))
        scale = self._scale(queries)
        return _sdpa(
            queries,
            keys,
            values,
            mask,
            scale=scale,
            dropout_p=self.dropout_p,
            training=self.training,
        )


class ScaledDotProductAttention(DotProductAttention):
    """Scaled dot-product attention: scores ``q·k / √D``, then ``softmax(scores, masked) v``.

    Same shapes as :class:`DotProductAttention`: queries (…, Q, D), keys (…, K, D), values
    (…, K, Dv), … one of (), (B,) or (B, H), an optional bool mask broadcastable to
    (…, Q, K); returns ``(out (…, Q, Dv), weights (…, Q, K))``. Dividing by √D keeps the
    scores' variance near 1 for unit-variance inputs, whatever D. Equals
    ``F.scaled_dot_product_attention`` and :func:`helpers.attention.scaled_dot_product_attention`.
    """

    def _scale(self, queries: torch.Tensor) -> float:
        return 1.0 / math.sqrt(queries.shape[-1]) if queries.shape[-1] else 1.0  # D = 0


class AdditiveAttention(_ScoringAttention):
    """Additive (Bahdanau) attention: scores ``w_vᵀ tanh(W_q q + W_k k)``.

    Built as ``AdditiveAttention(query_dim, key_dim, hidden_dim, dropout=0.0)`` with
    bias-free ``nn.Linear`` attributes ``w_q`` (Dq → Dh), ``w_k`` (Dk → Dh) and ``w_v``
    (Dh → 1). ``forward(queries, keys, values, mask=None)`` takes queries (…, Q, Dq), keys
    (…, K, Dk), values (…, K, Dv), … one of (), (B,) or (B, H), and an optional bool mask
    broadcastable to (…, Q, K); it returns ``(out (…, Q, Dv), weights (…, Q, K))``. The
    scores alone come from ``scores(queries, keys)``, as in :func:`additive_scores`.
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int, dropout: float = 0.0):
        super().__init__(dropout)
        self.query_dim = check_int(query_dim, "query_dim", minimum=1)
        self.key_dim = check_int(key_dim, "key_dim", minimum=1)
        self.hidden_dim = check_int(hidden_dim, "hidden_dim", minimum=1)
        self.w_q = nn.Linear(self.query_dim, self.hidden_dim, bias=False)
        self.w_k = nn.Linear(self.key_dim, self.hidden_dim, bias=False)
        self.w_v = nn.Linear(self.hidden_dim, 1, bias=False)

    def extra_repr(self) -> str:
        return (
            f"query_dim={self.query_dim}, key_dim={self.key_dim}, "
            f"hidden_dim={self.hidden_dim}, dropout={self.dropout_p}"
        )

    def _sizes(self) -> dict:
        return dict(query_dim=self.query_dim, key_dim=self.key_dim, dtype=self.w_q.weight.dtype)

    def _scores(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return _additive_scores(queries, keys, self.w_q.weight, self.w_k.weight, self.w_v.weight)


class BilinearAttention(_ScoringAttention):
    """Bilinear (multiplicative) attention: scores ``qᵀ W k``, as in :func:`bilinear_scores`.

    Built as ``BilinearAttention(query_dim, key_dim, dropout=0.0)``; ``weight`` is an
    ``nn.Parameter`` W of shape (Dq, Dk), Xavier-uniform from torch's default generator
    (seed it for a reproducible start). ``forward(queries, keys, values, mask=None)`` takes
    queries (…, Q, Dq), keys (…, K, Dk), values (…, K, Dv), … one of (), (B,) or (B, H), an
    optional bool mask broadcastable to (…, Q, K); it returns ``(out (…, Q, Dv), weights
    (…, Q, K))``. The scores alone come from ``scores(queries, keys)``.
    """

    def __init__(self, query_dim: int, key_dim: int, dropout: float = 0.0):
        super().__init__(dropout)
        self.query_dim = check_int(query_dim, "query_dim", minimum=1)
        self.key_dim = check_int(key_dim, "key_dim", minimum=1)
        self.weight = nn.Parameter(torch.empty(self.query_dim, self.key_dim))
        nn.init.xavier_uniform_(self.weight)

    def extra_repr(self) -> str:
        return f"query_dim={self.query_dim}, key_dim={self.key_dim}, dropout={self.dropout_p}"

    def _sizes(self) -> dict:
        return dict(query_dim=self.query_dim, key_dim=self.key_dim, dtype=self.weight.dtype)

    def _scores(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return _bilinear_scores(queries, keys, self.weight)
