"""Experiments on attention scoring functions: score variance, softmax saturation, temperature.

Chapter 3 derives each idea in the open and then checks it against these functions. Shape
letters: Q queries, K keys, D features, T sequence length; ``…`` is any number of leading
axes. Random draws use their own ``torch.Generator`` seeded by the ``seed`` argument, so the
results do not depend on (or disturb) the global random state. The entropy of attention
weights and the timer are in :mod:`helpers.measure` (``attention_entropy``, ``time_call``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from helpers.checks import (
    check_axis,
    check_bool,
    check_int,
    check_real,
    check_tensor,
    describe,
    require,
)
from helpers.measure import attention_entropy, time_call

__all__ = [
    "concat_mlp_scores",
    "softmax_jacobian",
    "softmax_jacobian_norm",
    "softmax_with_temperature",
    "hardmax",
    "dot_product_variance",
    "SaturationRow",
    "softmax_saturation",
    "matched_source_weight",
    "scorer_multiply_adds",
    "time_scorers",
]


_AT_LEAST_1 = range(1, 65)  # (…, K): one axis or more
_AT_LEAST_2 = range(2, 65)  # (…, Q, D): two axes or more


def concat_mlp_scores(
    queries: torch.Tensor, keys: torch.Tensor, w_1: torch.Tensor, w_2: torch.Tensor
) -> torch.Tensor:
    """MLP scores on the concatenation, ``w_2ᵀ tanh(W_1 [q; k])``, for every query-key pair.

    The literal form of the "MLP" scoring function: every pair is concatenated into one
    vector of Dq + Dk features (a (…, Q, K, Dq + Dk) tensor) and passed through a hidden
    layer of H tanh units with no bias. Queries are (…, Q, Dq), keys (…, K, Dk), ``w_1`` is
    (H, Dq + Dk) and ``w_2`` is (H,) or (1, H), laid out as in ``nn.Linear``. Returns scores
    (…, Q, K). With ``w_1 = [W_q W_k]`` it equals additive attention's scores, which
    project each query and key once instead of once per pair.
    """
    check_tensor(queries, "queries", "(…, Q, Dq)", ndim=_AT_LEAST_2, floating=True)
    check_tensor(keys, "keys", "(…, K, Dk)", ndim=_AT_LEAST_2, floating=True)
    num_features = queries.shape[-1] + keys.shape[-1]
    check_tensor(w_1, "w_1", f"(H, Dq + Dk) = (H, {num_features})", ndim=2, floating=True)
    check_tensor(w_2, "w_2", "(H,) or (1, H)", ndim=(1, 2), floating=True)
    if w_1.shape[1] != num_features:
        raise ValueError(
            f"w_1 must have shape (H, Dq + Dk) = (H, {num_features}), got shape {tuple(w_1.shape)}"
        )
    if w_2.numel() != w_1.shape[0]:
        raise ValueError(
            f"w_2 must hold H = {w_1.shape[0]} weights, one per hidden unit, "
            f"got shape {tuple(w_2.shape)}"
        )
    for name, tensor in (("keys", keys), ("w_1", w_1), ("w_2", w_2)):
        require(
            tensor.dtype == queries.dtype,
            f"{name} must have the dtype of queries, {queries.dtype}, got {tensor.dtype}",
        )
    num_queries, num_keys = queries.shape[-2], keys.shape[-2]
    try:
        lead = torch.broadcast_shapes(queries.shape[:-2], keys.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading axes of queries {tuple(queries.shape)} and keys "
            f"{tuple(keys.shape)} must broadcast"
        ) from None
    pairs_q = queries.unsqueeze(-2).expand(*lead, num_queries, num_keys, queries.shape[-1])
    pairs_k = keys.unsqueeze(-3).expand(*lead, num_queries, num_keys, keys.shape[-1])
    pairs = torch.cat([pairs_q, pairs_k], dim=-1)  # (…, Q, K, Dq + Dk)
    hidden = torch.tanh(pairs @ w_1.T)  # (…, Q, K, H)
    return hidden @ w_2.reshape(-1)  # (…, Q, K)


def softmax_jacobian(weights: torch.Tensor) -> torch.Tensor:
    """The Jacobian ``∂α/∂s = diag(α) − α αᵀ`` of the softmax, from its output α.

    Takes softmax outputs α of shape (…, K) and returns (…, K, K): entry (i, j) is
    ``∂α_i / ∂s_j``. Every entry lies in [−1/4, 1/4], and the whole matrix tends to 0 as α
    tends to one-hot (a saturated softmax) — its gradient vanishes.
    """
    check_tensor(weights, "weights", "(…, K)", ndim=_AT_LEAST_1, floating=True)
    return torch.diag_embed(weights) - weights.unsqueeze(-1) * weights.unsqueeze(-2)


def softmax_jacobian_norm(weights: torch.Tensor) -> torch.Tensor:
    """Frobenius norm of the softmax Jacobian at output α: how much the weights move per
    unit change of the scores. Takes α (…, K) and returns (…). It equals √(K − 1) / K for
    uniform weights over K keys and 0 for one-hot weights.
    """
    return torch.linalg.matrix_norm(softmax_jacobian(weights))  # (…)


def softmax_with_temperature(
    scores: torch.Tensor, temperature: float, dim: int = -1
) -> torch.Tensor:
    """``softmax(scores / τ)`` along ``dim``, with the two limits handled exactly.

    τ = ∞ gives uniform weights (every score divided by ∞ is 0); τ = 0 gives
    :func:`hardmax` (all the weight on the largest score). Scaled dot-product attention is
    dot-product attention at τ = √D. Takes scores (…, K) and returns weights of the same shape
    (an empty result where K = 0).
    """
    check_tensor(scores, "scores", "(…, K)", ndim=_AT_LEAST_1, floating=True)
    require(
        not isinstance(dim, bool) and isinstance(dim, int) and -scores.dim() <= dim < scores.dim(),
        f"dim must be an axis of scores (shape {tuple(scores.shape)}), got {dim!r}",
    )
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, numbers.Real)
        or math.isnan(temperature)
        or temperature < 0
    ):
        raise ValueError(
            f"temperature must be a number >= 0 (inf allowed), got {describe(temperature)}"
        )
    if temperature == 0:
        return hardmax(scores, dim=dim)
    if scores.shape[dim] == 0:
        return torch.softmax(scores, dim=dim)  # no keys: an empty result, as torch gives
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
    back to the scores. Takes scores (…, K), returns weights of the same shape and dtype
    (an empty result where K = 0).
    A row holding a NaN gives a NaN row, as the softmax at any small τ does (``argmax``
    alone would put all the weight on the NaN).
    """
    check_tensor(scores, "scores", "(…, K)", ndim=_AT_LEAST_1, floating=True)
    check_axis(dim, scores, "scores")
    if scores.shape[dim] == 0:
        return torch.zeros_like(scores)  # no keys: nothing to select
    index = scores.argmax(dim=dim, keepdim=True)
    weights = torch.zeros_like(scores).scatter_(dim, index, 1.0)  # no graph: an index
    has_nan = scores.isnan().any(dim=dim, keepdim=True)  # (…, 1)
    return weights.masked_fill(has_nan, float("nan"))


def dot_product_variance(
    dims: Sequence[int], num_pairs: int = 5_000, *, scaled: bool = False, seed: int = 0
) -> list[float]:
    """Sample variance of ``q·k`` (or ``q·k / √D`` when ``scaled``) for each size D in ``dims``.

    For each D it draws ``num_pairs`` independent pairs of vectors q, k ∈ R^D with
    independent standard-normal entries (zero mean, unit variance) and returns the variance
    of their dot products, one float per D. Theory: Var(q·k) = D, Var(q·k / √D) = 1.
    """
    require(
        isinstance(dims, Sequence) and not isinstance(dims, (str, bytes)) and len(dims) > 0,
        f"dims must be a non-empty sequence of positive integers, got {describe(dims)}",
    )
    dims = [check_int(size, "every entry of dims", 1) for size in dims]
    num_pairs = check_int(num_pairs, "num_pairs", 1)
    if num_pairs < 2:
        raise ValueError(f"num_pairs must be at least 2 to estimate a variance, got {num_pairs}")
    check_bool(scaled, "scaled")
    seed = check_int(seed, "seed")
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
    """Summaries over the queries of one feature size D: the scores' standard deviation, the
    mean entropy (nats), mean largest weight, mean and median softmax-Jacobian norm of the
    attention weights, and the median norm of the gradient ∂L/∂q that reaches the query."""

    dim: int
    score_std: float
    entropy: float
    max_weight: float
    jacobian_norm: float
    median_jacobian_norm: float
    median_query_gradient_norm: float


def softmax_saturation(
    dims: Sequence[int],
    *,
    num_queries: int = 1000,
    num_keys: int = 16,
    scaled: bool = False,
    seed: int = 0,
) -> list[SaturationRow]:
    """How peaked dot-product attention weights are, and how much gradient the softmax
    passes, as the feature size D grows.

    For each D in ``dims`` it draws ``num_queries`` queries, each with its own ``num_keys``
    keys (entries standard normal), scores them with ``q·k`` (divided by √D when
    ``scaled``), applies the softmax over the K keys and summarises over the Q queries the
    entropy, the largest weight and the Frobenius norm of the softmax Jacobian (mean and
    median). ‖J‖ is only the softmax's local gain; what reaches the query is
    ∂L/∂q = Kᵀ J ∂L/∂α (divided by √D when ``scaled``), measured for the loss
    L = ½‖αᵀV − y‖² with values V (K, 16) and a target y (16,) drawn, standard normal, from a
    second generator (seed + 1), so the other columns do not depend on them. The gradient is
    computed in float64. Returns one :class:`SaturationRow` per D.
    """
    require(
        isinstance(dims, Sequence) and not isinstance(dims, (str, bytes)) and len(dims) > 0,
        f"dims must be a non-empty sequence of positive integers, got {describe(dims)}",
    )
    dims = [check_int(size, "every entry of dims", 1) for size in dims]
    num_queries = check_int(num_queries, "num_queries", 1)
    num_keys = check_int(num_keys, "num_keys", 1)
    check_bool(scaled, "scaled")
    seed = check_int(seed, "seed")
    generator = torch.Generator().manual_seed(seed)
    loss_generator = torch.Generator().manual_seed(seed + 1)
    rows = []
    for d in dims:
        queries = torch.randn(num_queries, 1, d, generator=generator)  # (Q, 1, D)
        keys = torch.randn(num_queries, num_keys, d, generator=generator)  # (Q, K, D)
        scores = (queries * keys).sum(dim=-1)  # (Q, K)
        if scaled:
            scores = scores / math.sqrt(d)
        weights = torch.softmax(scores, dim=-1)  # (Q, K)
        jacobian_norms = softmax_jacobian_norm(weights)  # (Q,)
        values = torch.randn(num_queries, num_keys, 16, generator=loss_generator)  # (Q, K, Dv)
        targets = torch.randn(num_queries, 16, generator=loss_generator)  # (Q, Dv)
        weights64 = torch.softmax(scores.double(), dim=-1)  # (Q, K)
        outputs = (weights64.unsqueeze(-1) * values.double()).sum(dim=-2)  # (Q, Dv)
        grad_weights = values.double() @ (outputs - targets.double()).unsqueeze(-1)  # (Q, K, 1)
        grad_scores = softmax_jacobian(weights64) @ grad_weights  # (Q, K, 1): J is symmetric
        grad_queries = keys.double().transpose(-1, -2) @ grad_scores  # (Q, D, 1)
        if scaled:
            grad_queries = grad_queries / math.sqrt(d)
        rows.append(
            SaturationRow(
                dim=d,
                score_std=scores.std().item(),
                entropy=attention_entropy(weights).mean().item(),
                max_weight=weights.max(dim=-1).values.mean().item(),
                jacobian_norm=jacobian_norms.mean().item(),
                median_jacobian_norm=jacobian_norms.median().item(),
                median_query_gradient_norm=grad_queries.norm(dim=(-2, -1)).median().item(),
            )
        )
    return rows


def matched_source_weight(
    dims: Sequence[int],
    *,
    exponent: float = 0.5,
    noise: float = 0.5,
    num_queries: int = 1000,
    num_keys: int = 8,
    seed: int = 0,
) -> list[float]:
    """Mean attention weight on the source key when each query copies one key, for each D.

    The correlated case, unlike :func:`softmax_saturation`'s independent q and k: for each D
    in ``dims`` it draws ``num_queries`` episodes of ``num_keys`` standard-normal keys (K, D)
    and one query q = k_0 + ``noise`` · ε (ε standard normal), scores q·k / D^``exponent``
    (0.5: the scaled dot product; 1: the 1/D of μP) and returns, per D, the mean softmax
    weight on k_0. With exponent 0.5 the matched score grows like √D, so the weight tends
    to 1 as D grows.
    """
    require(
        isinstance(dims, Sequence) and not isinstance(dims, (str, bytes)) and len(dims) > 0,
        f"dims must be a non-empty sequence of positive integers, got {describe(dims)}",
    )
    dims = [check_int(size, "every entry of dims", 1) for size in dims]
    exponent = check_real(exponent, "exponent")
    noise = check_real(noise, "noise", minimum=0.0)
    num_queries = check_int(num_queries, "num_queries", 1)
    num_keys = check_int(num_keys, "num_keys", 1)
    seed = check_int(seed, "seed")
    generator = torch.Generator().manual_seed(seed)
    means = []
    for d in dims:
        keys = torch.randn(
            num_queries, num_keys, d, generator=generator, dtype=torch.float64
        )  # (Q, K, D): one episode per query
        queries = keys[:, 0] + noise * torch.randn(
            num_queries, d, generator=generator, dtype=torch.float64
        )  # (Q, D)
        scores = (keys @ queries.unsqueeze(-1)).squeeze(-1) / d**exponent  # (Q, K)
        means.append(torch.softmax(scores, dim=-1)[:, 0].mean().item())
    return means


def scorer_multiply_adds(
    num_queries: int, num_keys: int, query_dim: int, key_dim: int, hidden_dim: int
) -> dict[str, dict[str, int]]:
    """Counted arithmetic of scoring Q queries (Q, Dq) against K keys (K, Dk), H hidden units.

    Returns ``{name: {"multiply_adds": ..., "tanh": ..., "intermediate": ...}}`` for
    "additive", "MLP on [q; k]", "dot product" (needs Dq = Dk; counted with Dk),
    "scaled dot product" and "bilinear": multiply-adds, tanh evaluations and the number of
    floats in the largest intermediate tensor ((Q, K, H) for the additive forms, the
    (Q, K) scores otherwise). Counts, not times: what they leave out (transcendentals
    priced as one operation, memory traffic) is often what dominates.
    """
    q, k = check_int(num_queries, "num_queries", 1), check_int(num_keys, "num_keys", 1)
    dq, dk = check_int(query_dim, "query_dim", 1), check_int(key_dim, "key_dim", 1)
    h = check_int(hidden_dim, "hidden_dim", 1)
    return {
        "additive": {
            "multiply_adds": h * (q * dq + k * dk) + q * k * h,
            "tanh": q * k * h,
            "intermediate": q * k * h,
        },
        "MLP on [q; k]": {
            "multiply_adds": q * k * h * (dq + dk + 1),
            "tanh": q * k * h,
            "intermediate": q * k * h,
        },
        "dot product": {"multiply_adds": q * k * dk, "tanh": 0, "intermediate": q * k},
        "scaled dot product": {
            "multiply_adds": q * k * dk + q * k,
            "tanh": 0,
            "intermediate": q * k,
        },
        "bilinear": {"multiply_adds": q * dq * dk + q * k * dk, "tanh": 0, "intermediate": q * k},
    }


def time_scorers(
    scorers: dict[str, Callable],
    lengths: Sequence[int],
    dim: int,
    *,
    repeats: int = 3,
    seed: int = 0,
) -> dict[str, list[float]]:
    """Time each scoring function on a sequence scored against itself, for each length T.

    For each T in ``lengths`` it draws x of shape (T, D) (standard normal, from a generator
    seeded with ``seed``) and times ``score(x, x)``, which should return (T, T) scores, with
    :func:`helpers.measure.time_call` (under ``torch.no_grad()``). ``scorers`` maps a name to
    a function ``(queries (Q, D), keys (K, D)) -> scores (Q, K)``. Returns
    ``{name: [seconds per T]}``.
    Wall-clock times: never print them where a notebook's outputs are compared.
    """
    if not isinstance(scorers, dict) or not scorers or not all(map(callable, scorers.values())):
        raise ValueError(
            "scorers must be a non-empty dict of name -> callable(queries, keys), "
            f"got {describe(scorers)}"
        )
    require(
        isinstance(lengths, Sequence)
        and not isinstance(lengths, (str, bytes))
        and len(lengths) > 0,
        f"lengths must be a non-empty sequence of positive integers, got {describe(lengths)}",
    )
    lengths = [check_int(size, "every entry of lengths", 1) for size in lengths]
    dim = check_int(dim, "dim", 1)
    repeats = check_int(repeats, "repeats", 1)
    seed = check_int(seed, "seed")
    generator = torch.Generator().manual_seed(seed)
    seconds: dict[str, list[float]] = {name: [] for name in scorers}
    for length in lengths:
        x = torch.randn(length, dim, generator=generator)  # (T, D): queries = keys
        for name, score in scorers.items():
            seconds[name].append(time_call(lambda score=score, x=x: score(x, x), repeats=repeats))
    return seconds
