"""Experiments on attention scoring functions: score variance, softmax saturation, temperature.

Chapter 3 derives each idea in the open and then checks it against these functions. Shape
letters: Q queries, K keys, D features, T sequence length; ``…`` is any number of leading
axes. Random draws use their own ``torch.Generator`` seeded by the ``seed`` argument, so the
results do not depend on (or disturb) the global random state.
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

__all__ = [
    "concat_mlp_scores",
    "attention_entropy",
    "softmax_jacobian",
    "softmax_jacobian_norm",
    "softmax_with_temperature",
    "hardmax",
    "dot_product_variance",
    "SaturationRow",
    "softmax_saturation",
    "time_call",
    "time_scorers",
]


def _check_tensor(value, name: str, min_dim: int = 1, floating: bool = True) -> None:
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dim() < min_dim:
        raise ValueError(f"{name} must have at least {min_dim} axes, "
                         f"got shape {tuple(value.shape)}")
    if floating and not value.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")


def _check_positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _check_dims(dims, name: str = "dims") -> list[int]:
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence) or len(dims) == 0:
        raise ValueError(f"{name} must be a non-empty sequence of positive integers, "
                         f"got {dims!r}")
    return [_check_positive_int(d, f"every entry of {name}") for d in dims]


def concat_mlp_scores(queries: torch.Tensor, keys: torch.Tensor, w_1: torch.Tensor,
                      w_2: torch.Tensor) -> torch.Tensor:
    """MLP scores on the concatenation, ``w_2ᵀ tanh(W_1 [q; k])``, for every query-key pair.

    The literal form of the "MLP" scoring function: every pair is concatenated into one
    vector of Dq + Dk features (a (…, Q, K, Dq + Dk) tensor) and passed through a hidden
    layer of H tanh units with no bias. Queries are (…, Q, Dq), keys (…, K, Dk), ``w_1`` is
    (H, Dq + Dk) and ``w_2`` is (H,) or (1, H), laid out as in ``nn.Linear``. Returns scores
    (…, Q, K). With ``w_1 = [W_q W_k]`` it equals additive attention's scores, which
    project each query and key once instead of once per pair.
    """
    _check_tensor(queries, "queries", 2)
    _check_tensor(keys, "keys", 2)
    _check_tensor(w_1, "w_1", 2)
    _check_tensor(w_2, "w_2", 1)
    num_features = queries.shape[-1] + keys.shape[-1]
    if w_1.dim() != 2 or w_1.shape[1] != num_features:
        raise ValueError(f"w_1 must have shape (H, Dq + Dk) = (H, {num_features}), "
                         f"got shape {tuple(w_1.shape)}")
    if w_2.numel() != w_1.shape[0]:
        raise ValueError(f"w_2 must hold H = {w_1.shape[0]} weights, one per hidden unit, "
                         f"got shape {tuple(w_2.shape)}")
    num_queries, num_keys = queries.shape[-2], keys.shape[-2]
    lead = torch.broadcast_shapes(queries.shape[:-2], keys.shape[:-2])
    pairs_q = queries.unsqueeze(-2).expand(*lead, num_queries, num_keys, queries.shape[-1])
    pairs_k = keys.unsqueeze(-3).expand(*lead, num_queries, num_keys, keys.shape[-1])
    pairs = torch.cat([pairs_q, pairs_k], dim=-1)  # (…, Q, K, Dq + Dk)
    hidden = torch.tanh(pairs @ w_1.T)  # (…, Q, K, H)
    return hidden @ w_2.reshape(-1)  # (…, Q, K)


def attention_entropy(weights: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Entropy ``-Σ α log α`` (in nats, with 0 log 0 = 0) of each row of attention weights.

    A row with all its weight on one key has entropy 0; a uniform row over K keys has the
    largest possible entropy, log K. Takes weights (…, K) (usually (…, Q, K), rows summing
    to 1) and returns the entropies, shape (…) (one per query).
    """
    _check_tensor(weights, "weights")
    return -torch.special.xlogy(weights, weights).sum(dim=dim)


def softmax_jacobian(weights: torch.Tensor) -> torch.Tensor:
    """The Jacobian ``∂α/∂s = diag(α) − α αᵀ`` of the softmax, from its output α.

    Takes softmax outputs α of shape (…, K) and returns (…, K, K): entry (i, j) is
    ``∂α_i / ∂s_j``. Every entry lies in [−1/4, 1/4], and the whole matrix tends to 0 as α
    tends to one-hot (a saturated softmax) — its gradient vanishes.
    """
    _check_tensor(weights, "weights")
    return torch.diag_embed(weights) - weights.unsqueeze(-1) * weights.unsqueeze(-2)


def softmax_jacobian_norm(weights: torch.Tensor) -> torch.Tensor:
    """Frobenius norm of the softmax Jacobian at output α: how much the weights move per
    unit change of the scores. Takes α (…, K) and returns (…). It equals √(K − 1) / K for
    uniform weights over K keys and 0 for one-hot weights.
    """
    return torch.linalg.matrix_norm(softmax_jacobian(weights))  # (…)


def softmax_with_temperature(scores: torch.Tensor, temperature: float,
                             dim: int = -1) -> torch.Tensor:
    """``softmax(scores / τ)`` along ``dim``, with the two limits handled exactly.

    τ = ∞ gives uniform weights (every score divided by ∞ is 0); τ = 0 gives
    :func:`hardmax` (all the weight on the largest score). Scaled dot-product attention is
    dot-product attention at τ = √D. Takes scores (…, K) and returns weights of the same shape.
    """
    _check_tensor(scores, "scores")
    if (isinstance(temperature, bool) or not isinstance(temperature, numbers.Real)
            or math.isnan(temperature) or temperature < 0):
        raise ValueError(f"temperature must be a number >= 0 (inf allowed), got {temperature!r}")
    if temperature == 0:
        return hardmax(scores, dim=dim)
    if math.isinf(temperature):
        return torch.full_like(scores, 1.0 / scores.shape[dim])
    # Subtract each row's maximum before dividing: for a tiny τ, scores / τ would overflow to
    # ±inf (and softmax to NaN); shifted, the largest score is 0 and the rest go to -inf.
    shifted = scores - scores.amax(dim=dim, keepdim=True)
    return torch.softmax(shifted / temperature, dim=dim)


def hardmax(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """One-hot weights on the largest score along ``dim`` (the first one, if tied).

    The τ → 0 limit of the softmax, and the selection rule of hard attention. It is a step
    function of the scores, so its gradient is zero wherever it is defined: nothing flows
    back to the scores. Takes scores (…, K), returns weights of the same shape and dtype.
    """
    _check_tensor(scores, "scores")
    index = scores.argmax(dim=dim, keepdim=True)
    return torch.zeros_like(scores).scatter_(dim, index, 1.0)  # no graph: argmax is an index


def dot_product_variance(dims: Sequence[int], num_pairs: int = 5_000, *,
                         scaled: bool = False, seed: int = 0) -> list[float]:
    """Sample variance of ``q·k`` (or ``q·k / √D`` when ``scaled``) for each size D in ``dims``.

    For each D it draws ``num_pairs`` independent pairs of vectors q, k ∈ R^D with
    independent standard-normal entries (zero mean, unit variance) and returns the variance
    of their dot products, one float per D. Theory: Var(q·k) = D, Var(q·k / √D) = 1.
    """
    dims = _check_dims(dims)
    num_pairs = _check_positive_int(num_pairs, "num_pairs")
    if num_pairs < 2:
        raise ValueError(f"num_pairs must be at least 2 to estimate a variance, got {num_pairs}")
    generator = torch.Generator().manual_seed(seed)
    variances = []
    for d in dims:
        q = torch.randn(num_pairs, d, generator=generator, dtype=torch.float64)  # (N, D)
        k = torch.randn(num_pairs, d, generator=generator, dtype=torch.float64)  # (N, D)
        dots = (q * k).sum(dim=-1)  # (N,)
        if scaled:
            dots = dots / math.sqrt(d)
        variances.append(dots.var().item())
    return variances


@dataclass(frozen=True)
class SaturationRow:
    """Summaries over the queries of one feature size D: the scores' standard deviation, and
    the mean entropy (nats), mean largest weight, and mean and median softmax-Jacobian norm
    of the attention weights."""

    dim: int
    score_std: float
    entropy: float
    max_weight: float
    jacobian_norm: float
    median_jacobian_norm: float


def softmax_saturation(dims: Sequence[int], *, num_queries: int = 1000, num_keys: int = 16,
                       scaled: bool = False, seed: int = 0) -> list[SaturationRow]:
    """How peaked dot-product attention weights are, and how much gradient the softmax
    passes, as the feature size D grows.

    For each D in ``dims`` it draws ``num_queries`` queries, each with its own ``num_keys``
    keys (entries standard normal), scores them with ``q·k`` (divided by √D when
    ``scaled``), applies the softmax over the K keys and summarises over the Q queries the
    entropy, the largest weight and the Frobenius norm of the softmax Jacobian (mean and
    median). Returns one :class:`SaturationRow` per D.
    """
    dims = _check_dims(dims)
    num_queries = _check_positive_int(num_queries, "num_queries")
    num_keys = _check_positive_int(num_keys, "num_keys")
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for d in dims:
        queries = torch.randn(num_queries, 1, d, generator=generator)  # (Q, 1, D)
        keys = torch.randn(num_queries, num_keys, d, generator=generator)  # (Q, K, D)
        scores = (queries * keys).sum(dim=-1)  # (Q, K)
        if scaled:
            scores = scores / math.sqrt(d)
        weights = torch.softmax(scores, dim=-1)  # (Q, K)
        jacobian_norms = softmax_jacobian_norm(weights)  # (Q,)
        rows.append(SaturationRow(
            dim=d,
            score_std=scores.std().item(),
            entropy=attention_entropy(weights).mean().item(),
            max_weight=weights.max(dim=-1).values.mean().item(),
            jacobian_norm=jacobian_norms.mean().item(),
            median_jacobian_norm=jacobian_norms.median().item()))
    return rows


def time_call(fn: Callable[[], object], *, repeats: int = 5, warmup: int = 1) -> float:
    """The fastest of ``repeats`` wall-clock timings of ``fn()``, in seconds, after
    ``warmup`` untimed calls. The minimum is the least noisy estimate of the cost; it still
    varies from run to run, so never print it where a notebook's outputs are compared.
    """
    repeats = _check_positive_int(repeats, "repeats")
    if isinstance(warmup, bool) or not isinstance(warmup, numbers.Integral) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative integer, got {warmup!r}")
    for _ in range(warmup):
        fn()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def time_scorers(scorers: dict[str, Callable], lengths: Sequence[int], dim: int, *,
                 repeats: int = 3, seed: int = 0) -> dict[str, list[float]]:
    """Time each scoring function on a sequence scored against itself, for each length T.

    For each T in ``lengths`` it draws x of shape (T, D) (standard normal, from a generator
    seeded with ``seed``) and times ``score(x, x)``, which should return (T, T) scores, with
    :func:`time_call` under ``torch.no_grad()``. ``scorers`` maps a name to a function
    ``(queries (Q, D), keys (K, D)) -> scores (Q, K)``. Returns ``{name: [seconds per T]}``.
    Wall-clock times: never print them where a notebook's outputs are compared.
    """
    if not isinstance(scorers, dict) or not scorers or not all(map(callable, scorers.values())):
        raise ValueError("scorers must be a non-empty dict of name -> callable(queries, keys), "
                         f"got {scorers!r}")
    lengths = _check_dims(lengths, "lengths")
    dim = _check_positive_int(dim, "dim")
    generator = torch.Generator().manual_seed(seed)
    seconds: dict[str, list[float]] = {name: [] for name in scorers}
    with torch.no_grad():
        for length in lengths:
            x = torch.randn(length, dim, generator=generator)  # (T, D): queries = keys
            for name, score in scorers.items():
                seconds[name].append(time_call(lambda: score(x, x), repeats=repeats))
    return seconds
