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

from helpers.attention import attend, scaled_dot_product_attention
from helpers.checks import check_int, check_probability, check_tensor

__all__ = [
    "additive_scores",
    "bilinear_scores",
    "DotProductAttention",
    "ScaledDotProductAttention",
    "AdditiveAttention",
    "BilinearAttention",
]

_SHAPES = {"queries": "Q", "keys": "K", "values": "K"}
_NO_VALUES = object()  # scores(queries, keys) has no values (None is a bad value)


def _check_inputs(queries, keys, values=_NO_VALUES) -> None:
    """Raise ValueError unless queries, keys (and values) are floating 2-D to 4-D tensors
    of one dtype with matching K and broadcastable leading axes."""
    named = [("queries", queries), ("keys", keys)]
    if values is not _NO_VALUES:
        named.append(("values", values))
    for name, tensor in named:
        letter = _SHAPES[name]
        check_tensor(
            tensor,
            name,
            f"({letter}, D), (B, {letter}, D) or (B, H, {letter}, D)",
            ndim=(2, 3, 4),
            floating=True,
        )
        if tensor.dtype != queries.dtype:
            raise ValueError(
                f"{name} must have queries' dtype {queries.dtype}, got dtype {tensor.dtype}"
            )
    if values is not _NO_VALUES and keys.shape[-2] != values.shape[-2]:
        raise ValueError(
            f"keys and values must hold the same number of keys K, got keys of "
            f"shape {tuple(keys.shape)} and values of shape {tuple(values.shape)}"
        )
    try:
        torch.broadcast_shapes(*(tensor.shape[:-2] for _, tensor in named))
    except RuntimeError:
        shapes = ", ".join(f"{name} {tuple(tensor.shape)}" for name, tensor in named)
        raise ValueError(f"the leading (batch, head) axes must broadcast, got {shapes}") from None


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
    return (queries @ weight) @ keys.transpose(-2, -1)  # (…, Q, Dk) @ (…, Dk, K)


class _ScoringAttention(nn.Module):
    """Shared ``scores`` / ``forward`` of the attention modules; subclasses give ``_scores``."""

    def __init__(self, dropout: float = 0.0):
        super().__init__()
        self.dropout = check_probability(dropout)

    def _check_features(self, queries: torch.Tensor, keys: torch.Tensor) -> None:
        raise NotImplementedError

    def _scores(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def scores(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Raw scores (…, Q, K) of queries (…, Q, Dq) against keys (…, K, Dk), no softmax."""
        _check_inputs(queries, keys)
        self._check_features(queries, keys)
        return self._scores(queries, keys)

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _check_inputs(queries, keys, values)
        self._check_features(queries, keys)
        scores = self._scores(queries, keys)  # (…, Q, K)
        return attend(scores, values, mask, dropout=self.dropout, training=self.training)


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

    def _check_features(self, queries: torch.Tensor, keys: torch.Tensor) -> None:
        if queries.shape[-1] != keys.shape[-1]:
            raise ValueError(
                f"queries and keys must have the same feature size D for "
                f"{type(self).__name__}, got queries of shape "
                f"{tuple(queries.shape)} and keys of shape {tuple(keys.shape)}; "
                f"for different sizes use AdditiveAttention or BilinearAttention"
            )

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
        _check_inputs(queries, keys, values)
        self._check_features(queries, keys)
        return scaled_dot_product_attention(
            queries,
            keys,
            values,
            mask,
            scale=self._scale(queries),
            dropout=self.dropout,
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
        return 1.0 / math.sqrt(queries.shape[-1])


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
            f"hidden_dim={self.hidden_dim}, dropout={self.dropout}"
        )

    def _check_features(self, queries: torch.Tensor, keys: torch.Tensor) -> None:
        _check_sizes(self, queries, keys, self.w_q.weight.dtype)

    def _scores(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return additive_scores(queries, keys, self.w_q.weight, self.w_k.weight, self.w_v.weight)


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
        return f"query_dim={self.query_dim}, key_dim={self.key_dim}, dropout={self.dropout}"

    def _check_features(self, queries: torch.Tensor, keys: torch.Tensor) -> None:
        _check_sizes(self, queries, keys, self.weight.dtype)

    def _scores(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return bilinear_scores(queries, keys, self.weight)


def _check_sizes(module, queries: torch.Tensor, keys: torch.Tensor, dtype: torch.dtype) -> None:
    """Raise ValueError unless queries end in query_dim, keys in key_dim, both of ``dtype``."""
    for name, tensor, size_name in (("queries", queries, "query_dim"), ("keys", keys, "key_dim")):
        size = getattr(module, size_name)
        if tensor.shape[-1] != size:
            raise ValueError(
                f"{name} must have {size_name}={size} features in the last axis "
                f"for this {type(module).__name__}, got shape {tuple(tensor.shape)}"
            )
        if tensor.dtype != dtype:
            raise ValueError(
                f"{name} must have the parameters' dtype {dtype}, got dtype "
                f"{tensor.dtype}; convert the module (e.g. .double()) or the input"
            )
