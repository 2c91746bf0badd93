"""Relative positions as terms of the attention score: Shaw et al., T5's buckets, ALiBi.

Each scheme leaves the inputs alone and changes the score of query i and key j by a term
that depends on the positions only through the offset j − i (Shaw et al.'s term also depends
on the query's content, and they add to the values as well):

- Shaw et al. (2018), Section 3: a learned vector per clipped offset,
  ``clip(j − i, −k, k)``, added to the key inside the score (and to the value inside the
  weighted sum): :func:`relative_index`, :func:`shaw_scores`, :func:`shaw_attention`.
- T5 (Raffel et al. 2020, Section 2.1): a learned number per head and per *bucket* of
  offsets, exact for small distances and log-spaced up to ``max_distance``:
  :func:`relative_position_bucket` (the Mesh TensorFlow / Hugging Face
  ``_relative_position_bucket``).
- ALiBi (Press et al. 2022, Section 3): a fixed penalty ``−m_h (i − j)`` with geometric
  slopes ``m_h``: :func:`alibi_slopes`, :func:`alibi_bias`.

Shapes: Q queries, K keys, D features, H heads, B batch; "…" any leading axes.
"""

from __future__ import annotations

import math

import torch

from helpers.checks import (
    as_integer_tensor,
    check_bool,
    check_device,
    check_int,
    check_leading_axes,
    check_tensor,
    require,
)

__all__ = [
    "relative_index",
    "shaw_scores",
    "shaw_attention",
    "relative_position_bucket",
    "alibi_slopes",
    "alibi_bias",
]


def relative_index(
    num_queries: int, max_distance: int, num_keys: int | None = None, device=None
) -> torch.Tensor:
    """Shaw et al.'s clipped relative index, shape (Q, K), long, values 0 … 2k.

    Entry (i, j) is ``clip(j − i, −k, k) + k`` with k = ``max_distance``: the row of the
    (2k + 1)-row table of relative vectors that query i uses for key j. Offsets beyond ±k
    share the first or the last row.

    Args:
        num_queries: Q.
        max_distance: k, the clipping distance (at least 1).
        num_keys: K; defaults to Q.
        device: where to put the result.
    """
    num_queries = check_int(num_queries, "num_queries")
    max_distance = check_int(max_distance, "max_distance", minimum=1)
    num_keys = num_queries if num_keys is None else check_int(num_keys, "num_keys")
    device = check_device(device)
    offsets = (
        torch.arange(num_keys, device=device)[None, :]
        - torch.arange(num_queries, device=device)[:, None]
    )  # (Q, K): j − i
    return offsets.clamp(-max_distance, max_distance) + max_distance


def _shaw_scores(q, k, rel_keys, index):
    # e_ij = q_i · (k_j + a_ij) / sqrt(D), a_ij = rel_keys[index_ij].
    content = q @ k.transpose(-2, -1)  # (…, Q, K)
    relative = torch.einsum("...qd,qkd->...qk", q, rel_keys[index])  # (…, Q, K)
    return (content + relative) / math.sqrt(q.shape[-1])


def shaw_scores(q: torch.Tensor, k: torch.Tensor, rel_keys: torch.Tensor) -> torch.Tensor:
    """Shaw et al.'s scores, ``e_ij = q_i · (k_j + a^K_ij) / √D``, shape (…, Q, K).

    ``a^K_ij = rel_keys[clip(j − i, −k, k) + k]``, with k read from the table's 2k + 1 rows
    (Shaw et al. 2018, Sections 3.1 and 3.2; the learned vectors ``w^K_{−k} … w^K_k``).

    Args:
        q: queries (…, Q, D), floating.
        k: keys (…, K, D), same dtype; leading axes broadcast with q's.
        rel_keys: the table (2k + 1, D), same dtype.
    """
    q = check_tensor(q, "q", "(…, Q, D)", ndim=range(2, 65), floating=True)
    k = check_tensor(k, "k", "(…, K, D)", ndim=range(2, 65), floating=True)
    require(
        k.shape[-1] == q.shape[-1], f"q and k must share D, got {q.shape[-1]} and {k.shape[-1]}"
    )
    require(k.dtype == q.dtype, f"k must have q's dtype {q.dtype}, got {k.dtype}")
    check_leading_axes({"q": q, "k": k})
    rel_keys = check_tensor(rel_keys, "rel_keys", "(2k + 1, D)", ndim=2, floating=True)
    rows = rel_keys.shape[0]
    require(
        rows % 2 == 1 and rows >= 3 and rel_keys.shape[1] == q.shape[-1],
        f"rel_keys must have shape (2k + 1, D) = (2k + 1, {q.shape[-1]}) with k >= 1, "
        f"got shape {tuple(rel_keys.shape)}",
    )
    clip = rows // 2
    require(
        rel_keys.dtype == q.dtype, f"rel_keys must have q's dtype {q.dtype}, got {rel_keys.dtype}"
    )
    index = relative_index(q.shape[-2], clip, k.shape[-2], device=q.device)
    return _shaw_scores(q, k, rel_keys, index)


def shaw_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    rel_keys: torch.Tensor,
    rel_values: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Self-attention with Shaw et al.'s relative keys and values (2018, Sections 3.1, 3.2).

    ``α = softmax_j(e_ij)`` with e from :func:`shaw_scores`, and
    ``z_i = Σ_j α_ij (v_j + a^V_ij)``, ``a^V_ij = rel_values[clip(j − i, −k, k) + k]``.

    Args:
        q: queries (…, Q, D); k: keys (…, K, D); v: values (…, K, V); one floating dtype,
            leading axes that broadcast.
        rel_keys: (2k + 1, D); rel_values: (2k + 1, V), with the same k.

    Returns:
        The outputs (…, Q, V) and the weights (…, Q, K).
    """
    scores = shaw_scores(q, k, rel_keys)  # checks q, k, rel_keys
    v = check_tensor(v, "v", "(…, K, V)", ndim=range(2, 65), floating=True)
    require(v.dtype == q.dtype, f"v must have q's dtype {q.dtype}, got {v.dtype}")
    require(v.shape[-2] == k.shape[-2], f"v must have K = {k.shape[-2]} rows, got {v.shape[-2]}")
    check_leading_axes({"q": q, "k": k, "v": v})
    rel_values = check_tensor(rel_values, "rel_values", "(2k + 1, V)", ndim=2, floating=True)
    require(
        tuple(rel_values.shape) == (rel_keys.shape[0], v.shape[-1]),
        f"rel_values must have shape (2k + 1, V) = {(rel_keys.shape[0], v.shape[-1])}, as many "
        f"rows as rel_keys, got shape {tuple(rel_values.shape)}",
    )
    clip = rel_keys.shape[0] // 2
    require(
        rel_values.dtype == q.dtype,
        f"rel_values must have q's dtype {q.dtype}, got {rel_values.dtype}",
    )
    index = relative_index(q.shape[-2], clip, k.shape[-2], device=q.device)
    weights = torch.softmax(scores, dim=-1)  # (…, Q, K)
    out = weights @ v + torch.einsum("...qk,qkv->...qv", weights, rel_values[index])
    return out, weights


def relative_position_bucket(
    relative_position,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """T5's bucket of each offset ``relative_position = key position − query position``.

    With ``bidirectional``, half of the buckets are for keys after the query (offset > 0)
    and half for the others; causal (not bidirectional), positive offsets count as 0 and
    all buckets go to distances ``n = −offset ≥ 0``. With N buckets for one direction,
    distances ``n < N/2`` get a bucket each (exact), and larger ones share the rest,
    log-spaced: ``N/2 + ⌊log(n / (N/2)) / log(max_distance / (N/2)) · N/2⌋``, capped at
    N − 1, so every distance from ``max_distance`` on falls into the last bucket (which
    begins somewhat earlier: at 91 for 16 buckets a direction and ``max_distance`` 128).
    The same arithmetic (float32 logarithm, truncation) as Mesh TensorFlow's and Hugging
    Face's ``_relative_position_bucket``, so the buckets agree at the boundaries too.

    Args:
        relative_position: an integer tensor (or nested list) of any shape.
        bidirectional: whether keys after the query get buckets of their own.
        num_buckets: the total number of buckets, at least 2 (4 when bidirectional).
        max_distance: the distance from which all offsets share the last bucket; must
            exceed the exact range, N/2.

    Returns:
        A long tensor of ``relative_position``'s shape, values 0 … num_buckets − 1.
    """
    offsets = as_integer_tensor(relative_position, "relative_position", "(any shape)")
    bidirectional = check_bool(bidirectional, "bidirectional")
    num_buckets = check_int(num_buckets, "num_buckets", minimum=4 if bidirectional else 2)
    per_side = num_buckets // 2 if bidirectional else num_buckets
    exact = per_side // 2
    max_distance = check_int(max_distance, "max_distance", minimum=exact + 1)
    return _bucket(offsets.long(), bidirectional, per_side, exact, max_distance)


def _bucket(offsets, bidirectional, per_side, exact, max_distance):
    if bidirectional:
        side = (offsets > 0).long() * per_side  # keys after the query: the upper half
        distance = offsets.abs()
    else:
        side = torch.zeros_like(offsets)
        distance = (-offsets).clamp(min=0)  # keys after the query count as distance 0
    scale = math.log(max_distance / exact)
    logged = torch.log(distance.float() / exact) / scale * (per_side - exact)  # float32
    far = (exact + logged.to(torch.long)).clamp(max=per_side - 1)  # truncation, then the cap
    return side + torch.where(distance < exact, distance, far)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's head slopes m_1 … m_H, float64, shape (H,) (Press et al. 2022, Section 3).

    For H a power of two, the geometric sequence that starts at ``2^(−8/H)`` with that same
    ratio: ``m_h = 2^(−8h/H)`` (1/2 … 1/256 for 8 heads). Otherwise, as in the authors'
    code: the slopes of the largest power of two P below H, then every other slope of 2P
    (those that fall between), until H slopes.
    """
    num_heads = check_int(num_heads, "num_heads", minimum=1)
    power = 2 ** math.floor(math.log2(num_heads))
    slopes = 2.0 ** (-8.0 * torch.arange(1, power + 1, dtype=torch.float64) / power)
    if power < num_heads:
        between = 2.0 ** (
            -8.0 * torch.arange(1, 2 * power + 1, 2, dtype=torch.float64) / (2 * power)
        )
        slopes = torch.cat([slopes, between[: num_heads - power]])
    return slopes


def alibi_bias(
    num_heads: int, num_queries: int, num_keys: int | None = None, device=None
) -> torch.Tensor:
    """ALiBi's additive bias, shape (H, Q, K), float32: ``−m_h |i − j|``.

    Query i sits at position ``K − Q + i`` (the last Q of K positions, as when a decoder
    scores new queries against a cache; i = 0 … Q − 1 when Q = K), key j at position j.
    On the causal part (key at or before the query) this is the paper's ``−m_h (i − j)``;
    combine it with a causal mask for a decoder. Add it to the scores before the softmax.

    Args:
        num_heads: H (slopes from :func:`alibi_slopes`).
        num_queries: Q.
        num_keys: K ≥ Q; defaults to Q.
        device: where to put the result.
    """
    slopes = alibi_slopes(num_heads)
    num_queries = check_int(num_queries, "num_queries")
    num_keys = num_queries if num_keys is None else check_int(num_keys, "num_keys")
    require(
        num_keys >= num_queries, f"num_keys must be >= num_queries ({num_queries}), got {num_keys}"
    )
    device = check_device(device)
    query_positions = torch.arange(num_keys - num_queries, num_keys, device=device)  # (Q,)
    distance = (query_positions[:, None] - torch.arange(num_keys, device=device)[None]).abs()
    bias = -slopes[:, None, None] * distance.cpu()  # (H, Q, K), float64
    return bias.float().to(distance.device)
