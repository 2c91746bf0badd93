"""Attention masks. One convention everywhere: a boolean mask, **True = may attend**.

That is the convention of ``F.scaled_dot_product_attention``. ``nn.MultiheadAttention``'s
``key_padding_mask`` uses the opposite one (True = ignore); convert at the boundary with
:func:`to_key_padding_mask` and :func:`from_key_padding_mask`, never by hand.

Besides padding (:func:`valid_length_mask`) and look-ahead (:func:`causal_mask`) masks, the
structured masks of self-attention's applications live here: :func:`band_mask` for
truncated (windowed) attention, :func:`sliding_window_mask` for a window with global
tokens (Longformer, BigBird), :func:`grid_mask` for a convolution-like neighbourhood on an
image grid, :func:`adjacency_mask` for a graph, and :func:`reachable`, what a stack of
masked layers can see. Shape letters: B batch, Q queries, K keys, T positions.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from helpers.checks import (
    as_integer_tensor,
    check_bool,
    check_bool_mask,
    check_device,
    check_int,
    describe,
)

__all__ = [
    "valid_length_mask",
    "causal_mask",
    "band_mask",
    "sliding_window_mask",
    "grid_mask",
    "adjacency_mask",
    "reachable",
    "to_key_padding_mask",
    "from_key_padding_mask",
    "to_additive_mask",
]


def valid_length_mask(valid_lens, num_keys: int, num_queries: int | None = None) -> torch.Tensor:
    """Mask out the padding keys of each sequence: key ``j`` may be attended iff ``j < len``.

    ``valid_lens`` holds one length per sequence, shape (B,), giving a mask of shape (B, K);
    or one length per query, shape (B, Q), giving (B, Q, K). With 1-D ``valid_lens`` and
    ``num_queries=Q`` the (B, K) mask is repeated over queries to (B, Q, K); with 2-D
    ``valid_lens``, ``num_queries`` (if given) must equal Q. Lengths must be integers in
    [0, K]. The mask lives on ``valid_lens``' device. An empty batch (B = 0) gives an empty
    mask.

    Args:
        valid_lens: an integer tensor (or list) of shape (B,) or (B, Q).
        num_keys: K, the number of keys (padded sequence length).
        num_queries: Q, optional, as described above.

    Returns:
        A bool tensor of shape (B, K) or (B, Q, K); True = may attend.
    """
    num_keys = check_int(num_keys, "num_keys")
    if num_queries is not None:
        num_queries = check_int(num_queries, "num_queries")
    valid_lens = as_integer_tensor(valid_lens, "valid_lens", "(B,) or (B, Q)")
    if valid_lens.dim() not in (1, 2):
        raise ValueError(
            f"valid_lens must be 1-D (B,) or 2-D (B, Q), got shape {tuple(valid_lens.shape)}"
        )
    if valid_lens.numel() > 0:
        low, high = int(valid_lens.min()), int(valid_lens.max())
        if low < 0:
            raise ValueError(f"valid_lens must be >= 0, got a length of {low}")
        if high > num_keys:
            raise ValueError(f"valid_lens must be <= num_keys={num_keys}, got a length of {high}")
    if valid_lens.dim() == 2 and num_queries is not None and valid_lens.shape[1] != num_queries:
        raise ValueError(
            f"valid_lens of shape (B, Q) must have Q == num_queries="
            f"{num_queries}, got shape {tuple(valid_lens.shape)}"
        )
    positions = torch.arange(num_keys, device=valid_lens.device)  # (K,)
    mask = positions < valid_lens.unsqueeze(-1)  # (B, K) or (B, Q, K)
    if valid_lens.dim() == 1 and num_queries is not None:
        mask = mask.unsqueeze(1).expand(-1, num_queries, -1).contiguous()  # (B, Q, K)
    return mask


def causal_mask(
    num_queries: int, num_keys: int | None = None, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """The causal (look-ahead) mask: query ``i`` may attend key ``j`` iff ``j <= i``.

    Exactly the mask ``F.scaled_dot_product_attention(..., is_causal=True)`` applies, which
    is aligned to the top-left corner, ``torch.ones(Q, K).tril(0)``: when K > Q the last
    keys are hidden from every query, and when K < Q the first row still sees key 0.

    Args:
        num_queries: Q.
        num_keys: K; defaults to Q (self-attention).
        device: where to build the mask.

    Returns:
        A bool tensor of shape (Q, K); True = may attend.
    """
    num_queries = check_int(num_queries, "num_queries")
    num_keys = num_queries if num_keys is None else check_int(num_keys, "num_keys")
    device = check_device(device)
    return torch.ones(num_queries, num_keys, dtype=torch.bool, device=device).tril(diagonal=0)


def band_mask(
    num_queries: int,
    window: int,
    num_keys: int | None = None,
    *,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The mask of truncated (windowed) attention: query ``i`` may attend key ``j`` iff
    ``|i - j| <= window``.

    ``window=0`` lets each query see only its own position; ``window >= max(Q, K) - 1``
    allows every key (full attention). Each query sees at most ``2 * window + 1`` keys.

    Args:
        num_queries: Q.
        window: w, how far each query may look either side (a non-negative integer).
        num_keys: K; defaults to Q (self-attention).
        device: where to build the mask.

    Returns:
        A bool tensor of shape (Q, K); True = may attend.
    """
    num_queries = check_int(num_queries, "num_queries")
    window = check_int(window, "window")
    num_keys = num_queries if num_keys is None else check_int(num_keys, "num_keys")
    device = check_device(device)
    rows = torch.arange(num_queries, device=device)[:, None]  # (Q, 1)
    cols = torch.arange(num_keys, device=device)[None, :]  # (1, K)
    return (rows - cols).abs() <= window


def grid_mask(height: int, width: int, radius: int = 1) -> torch.Tensor:
    """Neighbourhood mask on a height × width grid of positions (pixels or patches),
    numbered row by row: position ``i`` may attend ``j`` iff both their row and column
    differ by at most ``radius``.

    With ``radius=1`` each row of the mask is the 3 × 3 receptive field of a convolution
    (fewer at the border); ``radius=r`` gives a (2r + 1) × (2r + 1) field.

    Args:
        height, width: the grid's size, positive integers.
        radius: r, a non-negative integer.

    Returns:
        A bool tensor of shape (N, N) with N = height · width; True = may attend.
    """
    height, width = check_int(height, "height", 1), check_int(width, "width", 1)
    radius = check_int(radius, "radius")
    rows = torch.arange(height).repeat_interleave(width)  # (N,)
    cols = torch.arange(width).repeat(height)  # (N,)
    near_row = (rows[:, None] - rows[None, :]).abs() <= radius
    near_col = (cols[:, None] - cols[None, :]).abs() <= radius
    return near_row & near_col


def adjacency_mask(
    edges: Sequence[tuple[int, int]] | torch.Tensor,
    num_nodes: int,
    *,
    self_loops: bool = True,
    directed: bool = False,
) -> torch.Tensor:
    """The attention mask of a graph: node ``i`` may attend node ``j`` iff there is an edge
    between them (or ``i == j`` when ``self_loops``), as in a graph attention network.

    Args:
        edges: pairs (i, j) of integer node indices in [0, num_nodes), a list or an (E, 2)
            integer tensor (or array); empty for a graph without edges.
        num_nodes: N.
        self_loops: also let every node attend to itself (the diagonal).
        directed: if False (default), an edge (i, j) opens both (i, j) and (j, i); if True,
            only row i, column j (i receives from j).

    Returns:
        A bool tensor of shape (N, N); True = may attend.
    """
    num_nodes = check_int(num_nodes, "num_nodes")
    self_loops = check_bool(self_loops, "self_loops")
    directed = check_bool(directed, "directed")
    pairs = as_integer_tensor(edges, "edges", "(E, 2)")
    if pairs.numel() == 0 and pairs.dim() == 1:
        pairs = pairs.reshape(0, 2)  # an empty list: no edges
    if pairs.dim() != 2 or pairs.shape[1] != 2:  # never re-pair a (2, E) edge index
        raise ValueError(
            f"edges must be pairs (i, j), a list or an (E, 2) tensor, got shape "
            f"{tuple(pairs.shape)}"
            + (
                " (for a (2, E) edge index pass edges.T)"
                if pairs.dim() == 2 and pairs.shape[0] == 2
                else ""
            )
        )
    pairs = pairs.to(device="cpu", dtype=torch.long)
    if pairs.numel() and (int(pairs.min()) < 0 or int(pairs.max()) >= num_nodes):
        raise ValueError(
            f"edges must hold node indices in [0, {num_nodes}), got indices from "
            f"{int(pairs.min())} to {int(pairs.max())}"
        )
    mask = torch.zeros(num_nodes, num_nodes, dtype=torch.bool)
    mask[pairs[:, 0], pairs[:, 1]] = True
    if not directed:
        mask[pairs[:, 1], pairs[:, 0]] = True
    if self_loops:
        mask.fill_diagonal_(True)
    return mask


def reachable(masks: Sequence[torch.Tensor]) -> torch.Tensor:
    """Which inputs can influence which outputs through a stack of masked layers.

    Layer ``l`` lets its output ``i`` read its input ``j`` iff ``masks[l][i, j]``; the
    result is the boolean product ``masks[-1] ∘ … ∘ masks[0]``: entry (i, j) is True iff
    some path leads from input j through the layers to output i.

    Args:
        masks: one bool (T, T) mask per layer, first layer first (at least one), e.g. a
            list; each layer's number of inputs must equal the outputs of the layer below.

    Returns:
        A bool tensor of shape (T, T).
    """
    if isinstance(masks, torch.Tensor) and masks.dim() != 3:
        raise ValueError(
            f"masks must be a sequence of (T, T) bool masks (or an (L, T, T) "
            f"tensor), got a tensor of shape {tuple(masks.shape)}"
        )
    try:
        layers = list(masks)
    except TypeError:
        raise ValueError(
            f"masks must be a sequence of (T, T) bool masks, one per layer, got {describe(masks)}"
        ) from None
    if len(layers) == 0:
        raise ValueError("masks must hold at least one (T, T) layer mask, got none")
    reach = None
    for index, mask in enumerate(layers):
        check_bool_mask(mask, f"masks[{index}]", shape="(T, T)", ndim=2)
        step = mask.to(torch.float64)
        if reach is not None and step.shape[1] != reach.shape[0]:
            raise ValueError(
                f"masks[{index}] has shape {tuple(mask.shape)} but the layer "
                f"below has {reach.shape[0]} outputs"
            )
        reach = step if reach is None else ((step @ reach.to(step.device)) > 0).to(torch.float64)
    return reach > 0


def to_key_padding_mask(mask: torch.Tensor) -> torch.Tensor:
    """Convert the book's (B, K) mask (True = may attend) to ``nn.MultiheadAttention``'s.

    ``nn.MultiheadAttention(..., key_padding_mask=...)`` reads True as *ignore this key*, so
    this is the logical negation, with the shape and dtype checked first.

    Args:
        mask: a bool tensor of shape (B, K), True = may attend.

    Returns:
        A bool tensor of shape (B, K), True = ignore (padding).
    """
    return ~check_bool_mask(mask, "mask", shape="(B, K)", ndim=2)


def from_key_padding_mask(key_padding_mask: torch.Tensor) -> torch.Tensor:
    """Convert an ``nn.MultiheadAttention`` key padding mask (True = ignore) to the book's.

    Args:
        key_padding_mask: a bool tensor of shape (B, K), True = ignore (padding).

    Returns:
        A bool tensor of shape (B, K), True = may attend.
    """
    return ~check_bool_mask(key_padding_mask, "key_padding_mask", shape="(B, K)", ndim=2)


def to_additive_mask(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Convert a boolean mask to the additive form: 0 where True, ``-inf`` where False.

    Adding the result to the scores before the softmax has the same effect as filling the
    masked scores with ``-inf``. Any shape works, e.g. (Q, K), (B, K), (B, Q, K) or
    (B, H, Q, K); the result has the same shape.

    Args:
        mask: a bool tensor, True = may attend.
        dtype: a floating dtype for the result (that of the scores it will be added to).

    Returns:
        A tensor of ``mask``'s shape and the given ``dtype``.
    """
    check_bool_mask(mask, "mask")
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise ValueError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return additive.masked_fill(~mask, float("-inf"))


def sliding_window_mask(
    num_queries: int,
    window: int,
    *,
    global_tokens: Sequence[int] | torch.Tensor = (),
    causal: bool = False,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The mask of sliding-window attention with global tokens (Longformer, BigBird):
    query ``i`` may attend key ``j`` iff ``|i - j| <= window`` (the band of
    :func:`band_mask`), or ``i`` or ``j`` is a global token: a global token attends to every
    position and every position attends to it. With ``causal=True`` every pair with
    ``j > i`` is then removed, so a query looks back at most ``window`` positions, plus the
    global tokens before it.

    Args:
        num_queries: T, the sequence length (self-attention: T queries, T keys).
        window: w, how far each query may look either side (a non-negative integer).
        global_tokens: the positions (G,) of the global tokens, integers in [0, T), a list
            or an integer tensor; empty (the default) for a plain sliding window.
        causal: also apply the causal mask.
        device: where to build the mask.

    Returns:
        A bool tensor of shape (T, T); True = may attend.
    """
    num_queries = check_int(num_queries, "num_queries")
    window = check_int(window, "window")
    causal = check_bool(causal, "causal")
    device = check_device(device)
    positions = as_integer_tensor(global_tokens, "global_tokens", "(G,)")
    if positions.dim() != 1:
        raise ValueError(
            f"global_tokens must be 1-D positions (G,), got shape {tuple(positions.shape)}"
        )
    if positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= num_queries):
        raise ValueError(
            f"global_tokens must hold positions in [0, {num_queries}), got positions from "
            f"{int(positions.min())} to {int(positions.max())}"
        )
    rows = torch.arange(num_queries, device=device)[:, None]  # (T, 1)
    cols = torch.arange(num_queries, device=device)[None, :]  # (1, T)
    is_global = torch.zeros(num_queries, dtype=torch.bool, device=device)
    is_global[positions.to(device=is_global.device, dtype=torch.long)] = True  # (T,)
    mask = ((rows - cols).abs() <= window) | is_global[:, None] | is_global[None, :]
    return mask & (cols <= rows) if causal else mask
