"""Nadaraya–Watson kernel regression: attention pooling with a Gaussian kernel.

A query ``q`` attends to keys ``k_i`` with weights ``softmax_i(-((q - k_i) w)^2 / 2)`` and
returns the weighted average of the values ``v_i``. ``w`` is the inverse bandwidth
(``w = 1/σ``): a large ``w`` is a narrow kernel. Shapes use Q for queries and K for keys;
queries and keys are scalars (1-D tensors), values are scalars (K,) or vectors (K, D).
Training ``w`` by gradient descent, ``train_nw``, and the chapter's data are in
:mod:`helpers.tasks.regression`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from helpers.attention import _masked_softmax
from helpers.checks import as_real_tensor, check_bool_mask, check_positive_scalar

__all__ = ["gaussian_kernel", "nadaraya_watson", "NWKernelRegression"]

_SQRT_2PI = math.sqrt(2 * math.pi)


def gaussian_kernel(u) -> torch.Tensor:
    """The standard normal density ``K(u) = exp(-u^2 / 2) / sqrt(2π)``, elementwise.

    Args:
        u: a real tensor (or number, or array) of any shape: the distances ``q - k``.
            An integer input is converted to the default floating dtype.

    Returns:
        A floating tensor of the same shape as ``u``.
    """
    u = as_real_tensor(u, "u")
    return torch.exp(-0.5 * u**2) / _SQRT_2PI


def _resolve_w(w, bandwidth):
    """Return the inverse bandwidth ``w``, from ``w`` or from ``bandwidth = 1/w``."""
    if bandwidth is None:
        return check_positive_scalar(w, "w")
    if not (isinstance(w, float) and w == 1.0):
        raise ValueError(
            f"give either w or bandwidth (w = 1/bandwidth), not both; "
            f"got w={w!r} and bandwidth={bandwidth!r}"
        )
    return 1.0 / check_positive_scalar(bandwidth, "bandwidth")


def nadaraya_watson(queries, keys, values, w=1.0, *, bandwidth=None, mask=None):
    """Nadaraya–Watson attention pooling with a Gaussian kernel.

    ``weights[i, j] = softmax_j(-((queries[i] - keys[j]) * w)^2 / 2)`` and
    ``pred = weights @ values``. The softmax subtracts each row's maximum score, so the
    weights stay finite even for queries far from every key, where the plain ratio of
    Gaussian kernels would be 0/0.

    Args:
        queries: (Q,) query positions.
        keys: (K,) key positions.
        values: (K,) or (K, D) values, one per key.
        w: the inverse bandwidth, a positive float or a 0-d tensor (learnable: gradients
            flow into it). Larger ``w`` means a narrower kernel.
        bandwidth: alternatively the kernel width σ, with ``w = 1/σ``; give one of the two.
        mask: optional bool (Q, K), True = query i may attend key j (False to leave a key
            out, e.g. a training point's own key). A row with no allowed key gets all-zero
            weights and a zero prediction.

    Returns:
        ``(pred, weights)``: ``pred`` of shape (Q,) or (Q, D) and ``weights`` (Q, K), each
        row non-negative and summing to 1.

    Raises:
        ValueError: wrong ranks, keys and values of different lengths, no keys, ±inf
            queries or keys, a non-finite or non-positive ``w``/``bandwidth``, or a badly
            shaped mask.
    """
    queries = as_real_tensor(queries, "queries")
    keys, values = as_real_tensor(keys, "keys"), as_real_tensor(values, "values")
    if queries.dim() != 1:
        raise ValueError(f"queries must be 1-D (Q,), got shape {tuple(queries.shape)}")
    if keys.dim() != 1:
        raise ValueError(f"keys must be 1-D (K,), got shape {tuple(keys.shape)}")
    if values.dim() not in (1, 2):
        raise ValueError(f"values must be 1-D (K,) or 2-D (K, D), got shape {tuple(values.shape)}")
    if keys.shape[0] != values.shape[0]:
        raise ValueError(
            f"keys and values must have the same length K, got keys of shape "
            f"{tuple(keys.shape)} and values of shape {tuple(values.shape)}"
        )
    if keys.shape[0] == 0:
        raise ValueError("keys must hold at least one key, got shape (0,)")
    for name, positions in (("queries", queries), ("keys", keys)):
        if bool(torch.isinf(positions).any()):  # an infinite distance: no weight is defined
            raise ValueError(f"{name} must be finite positions, got ±inf")
    if mask is not None:
        check_bool_mask(mask, "mask")
        want = (queries.shape[0], keys.shape[0])
        if tuple(mask.shape) != want:
            raise ValueError(f"mask must have shape (Q, K) = {want}, got shape {tuple(mask.shape)}")
    dtype = torch.promote_types(torch.promote_types(queries.dtype, keys.dtype), values.dtype)
    queries, keys, values = queries.to(dtype), keys.to(dtype), values.to(dtype)
    w = _resolve_w(w, bandwidth)
    distances = queries[:, None] - keys[None, :]  # (Q, K)
    scores = -0.5 * (distances * w) ** 2  # (Q, K)
    if mask is not None:
        mask = mask.to(scores.device)
    if not bool(torch.isfinite(scores).all()):  # (d·w)² overflowed: shift before squaring
        scores = _shifted_scores(distances, w, mask)
    weights = _masked_softmax(scores, mask)  # (Q, K); a fully masked row gives zeros
    return weights @ values, weights


def _shifted_scores(distances: torch.Tensor, w, mask) -> torch.Tensor:
    """The Gaussian scores minus each row's largest, ``-w²(|d|² − |d|²_min)/2``, factored
    as ``-((|d| − |d|_min)·w)((|d| + |d|_min)·w)/2`` so that nothing overflows for the
    nearest allowed key (score exactly 0) and farther keys go to ``-inf`` (weight 0) rather
    than NaN. The softmax is unchanged by the shift."""
    a = distances.abs()  # (Q, K)
    allowed = a if mask is None else a.masked_fill(~mask, float("inf"))
    nearest = allowed.amin(dim=-1, keepdim=True)  # (Q, 1)
    nearest = nearest.masked_fill(torch.isinf(nearest), 0.0)  # rows with no allowed key
    product = ((a - nearest) * w) * ((a + nearest) * w)
    return torch.where(a == nearest, torch.zeros_like(a), -0.5 * product)


class NWKernelRegression(nn.Module):
    """Parametric Nadaraya–Watson regression: one learnable inverse bandwidth ``w``.

    ``forward(queries (Q,), keys (K,), values (K,) or (K, D), mask=None)`` returns
    ``(pred (Q,) or (Q, D), weights (Q, K))`` exactly as :func:`nadaraya_watson` with
    ``w = self.w``; the weights are returned, never stored on the module.

    Args:
        w: the initial inverse bandwidth (finite, > 0).
    """

    def __init__(self, w: float = 1.0):
        super().__init__()
        check_positive_scalar(w, "w")
        self.w = nn.Parameter(torch.tensor(float(w)))

    @property
    def bandwidth(self) -> float:
        """The kernel width σ = 1/w, as a Python float."""
        return 1.0 / float(self.w.detach())

    def forward(self, queries, keys, values, mask=None):
        return nadaraya_watson(queries, keys, values, self.w, mask=mask)

    def extra_repr(self) -> str:
        return f"w={float(self.w.detach()):.4f}"
