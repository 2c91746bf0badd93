"""Self-attention and the structured masks of its applications: windows, grids, graphs.

Self-attention takes its queries, keys and values from one set of T vectors. Where that set
is long (speech) or has a structure of its own (an image, a graph), a boolean mask (True =
may attend, as everywhere in the book) restricts which keys each query sees:
:func:`band_mask` for truncated attention, :func:`grid_mask` for a convolution-like
neighbourhood on an image grid, :func:`adjacency_mask` for a graph. :func:`windowed_attention`
computes banded attention without ever forming the (T, T) score matrix. The rest are small
tools of the chapter: :func:`image_to_patches`, :func:`reachable` (what a stack of masked
layers can see), and :func:`time_call` / :func:`loglog_slope` for timing (their numbers vary
from run to run and are never printed in compared outputs).
"""

from __future__ import annotations

import math
import numbers
import time
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn

from .attention import masked_softmax, scaled_dot_product_attention

__all__ = ["SelfAttention", "band_mask", "windowed_attention", "grid_mask", "adjacency_mask",
           "image_to_patches", "patches_to_image", "reachable", "time_call", "loglog_slope"]


def _check_int(value, name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


class SelfAttention(nn.Module):
    """Single-head scaled dot-product self-attention: ``softmax(QKᵀ/√Dk) V`` with
    ``Q = X W_q``, ``K = X W_k``, ``V = X W_v`` taken from the same input ``X``.

    The projections are ``nn.Linear`` attributes ``w_q``, ``w_k``, ``w_v`` without bias (so
    ``Q = x @ w_q.weight.T``). ``forward(x, mask=None)`` takes x of shape (B, T, D) or
    (T, D) and an optional bool mask broadcastable to (B, T, T), True = may attend, and
    returns ``(out, weights)``: out (B, T, Dv) and weights (B, T, T). The number of
    parameters, D·(2·Dk + Dv), does not depend on T.
    """

    def __init__(self, d_model: int, d_k: int | None = None, d_v: int | None = None):
        super().__init__()
        d_model = _check_int(d_model, "d_model", 1)
        d_k = d_model if d_k is None else _check_int(d_k, "d_k", 1)
        d_v = d_model if d_v is None else _check_int(d_v, "d_v", 1)
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        d_model = self.w_q.in_features
        if not isinstance(x, torch.Tensor) or x.dim() not in (2, 3) or x.shape[-1] != d_model:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must have shape (B, T, {d_model}) or (T, {d_model}), got {got}")
        return scaled_dot_product_attention(self.w_q(x), self.w_k(x), self.w_v(x), mask)


def band_mask(num_queries: int, window: int, num_keys: int | None = None, *,
              device: torch.device | str | None = None) -> torch.Tensor:
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
    num_queries = _check_int(num_queries, "num_queries")
    window = _check_int(window, "window")
    num_keys = num_queries if num_keys is None else _check_int(num_keys, "num_keys")
    rows = torch.arange(num_queries, device=device)[:, None]  # (Q, 1)
    cols = torch.arange(num_keys, device=device)[None, :]  # (1, K)
    return (rows - cols).abs() <= window


def windowed_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product self-attention under :func:`band_mask`, computing only the band.

    Equal to ``scaled_dot_product_attention(q, k, v, band_mask(T, window))`` but it scores
    each query against its 2w + 1 neighbouring keys only, so time and memory grow as
    T·(2w + 1) instead of T². The weights come back in band layout: column ``c`` of row
    ``i`` is the weight of key ``i - w + c`` (0 where that key lies outside the sequence).

    Args:
        q: queries, shape (…, T, D).
        k: keys, shape (…, T, D) (the same T: this is self-attention).
        v: values, shape (…, T, Dv).
        window: w >= 0.

    Returns:
        ``(out, band_weights)``: out (…, T, Dv), band_weights (…, T, 2w' + 1) where
        w' = min(w, T - 1).
    """
    window = _check_int(window, "window")
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor) or tensor.dim() < 2:
            raise ValueError(f"{name} must be a tensor of shape (…, T, D), got "
                             f"{tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else tensor!r}")
    if not (q.shape[-2] == k.shape[-2] == v.shape[-2]) or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q, k and v must hold the same T positions and q, k the same D, got "
                         f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    num_positions = q.shape[-2]
    window = min(window, max(num_positions - 1, 0))
    width = 2 * window + 1
    pad = (0, 0, window, window)  # pad the T axis by w on both sides
    k_band = nn.functional.pad(k, pad).unfold(-2, width, 1)  # (…, T, D, 2w+1)
    v_band = nn.functional.pad(v, pad).unfold(-2, width, 1)  # (…, T, Dv, 2w+1)
    scores = torch.einsum("...td,...tdc->...tc", q, k_band) / math.sqrt(q.shape[-1])
    key_index = torch.arange(num_positions)[:, None] - window + torch.arange(width)  # (T, 2w+1)
    inside = (key_index >= 0) & (key_index < num_positions)
    weights = masked_softmax(scores, inside.to(q.device))  # (…, T, 2w+1)
    return torch.einsum("...tc,...tdc->...td", weights, v_band), weights


def grid_mask(height: int, width: int, radius: int = 1) -> torch.Tensor:
    """Neighbourhood mask on a height × width grid of positions (pixels or patches),
    numbered row by row: position ``i`` may attend ``j`` iff both their row and column
    differ by at most ``radius``.

    With ``radius=1`` each row of the mask is the 3 × 3 receptive field of a convolution
    (fewer at the border); ``radius=r`` gives a (2r + 1) × (2r + 1) field.

    Returns:
        A bool tensor of shape (N, N) with N = height · width; True = may attend.
    """
    height, width = _check_int(height, "height", 1), _check_int(width, "width", 1)
    radius = _check_int(radius, "radius")
    rows = torch.arange(height).repeat_interleave(width)  # (N,)
    cols = torch.arange(width).repeat(height)  # (N,)
    near_row = (rows[:, None] - rows[None, :]).abs() <= radius
    near_col = (cols[:, None] - cols[None, :]).abs() <= radius
    return near_row & near_col


def adjacency_mask(edges: Sequence[tuple[int, int]] | torch.Tensor, num_nodes: int, *,
                   self_loops: bool = True, directed: bool = False) -> torch.Tensor:
    """The attention mask of a graph: node ``i`` may attend node ``j`` iff there is an edge
    between them (or ``i == j`` when ``self_loops``), as in a graph attention network.

    Args:
        edges: pairs (i, j) of node indices in [0, num_nodes), a list or an (E, 2) tensor.
        num_nodes: N.
        self_loops: also let every node attend to itself (the diagonal).
        directed: if False (default), an edge (i, j) opens both (i, j) and (j, i); if True,
            only row i, column j (i receives from j).

    Returns:
        A bool tensor of shape (N, N); True = may attend.
    """
    num_nodes = _check_int(num_nodes, "num_nodes")
    pairs = torch.as_tensor(edges, dtype=torch.long) if len(edges) else \
        torch.zeros(0, 2, dtype=torch.long)
    if pairs.dim() != 2 or pairs.shape[1] != 2:  # never re-pair a (2, E) edge index
        raise ValueError(f"edges must be pairs (i, j), a list or an (E, 2) tensor, got shape "
                         f"{tuple(pairs.shape)}" + (" (for a (2, E) edge index pass edges.T)"
                                                    if pairs.dim() == 2 and pairs.shape[0] == 2
                                                    else ""))
    if pairs.numel() and (int(pairs.min()) < 0 or int(pairs.max()) >= num_nodes):
        raise ValueError(f"edges must hold node indices in [0, {num_nodes}), got indices from "
                         f"{int(pairs.min())} to {int(pairs.max())}")
    mask = torch.zeros(num_nodes, num_nodes, dtype=torch.bool)
    mask[pairs[:, 0], pairs[:, 1]] = True
    if not directed:
        mask[pairs[:, 1], pairs[:, 0]] = True
    if self_loops:
        mask.fill_diagonal_(True)
    return mask


def image_to_patches(image: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut an image into non-overlapping P × P patches and flatten each into a vector.

    Patches are numbered row by row, as a Vision Transformer reads them; each vector lists
    the patch's pixels row by row, the C channel values of a pixel together, i.e. a
    (P, P, C) block flattened.

    Args:
        image: (C, H, W) or (B, C, H, W), with H and W multiples of P.
        patch_size: P.

    Returns:
        (N, P·P·C) or (B, N, P·P·C) with N = (H / P) · (W / P).
    """
    patch_size = _check_int(patch_size, "patch_size", 1)
    if not isinstance(image, torch.Tensor) or image.dim() not in (3, 4):
        raise ValueError(f"image must have shape (C, H, W) or (B, C, H, W), got "
                         f"{tuple(image.shape) if isinstance(image, torch.Tensor) else image!r}")
    batched = image if image.dim() == 4 else image[None]
    num_batch, channels, height, width = batched.shape
    if height % patch_size or width % patch_size:
        raise ValueError(f"image height and width must be multiples of patch_size="
                         f"{patch_size}, got H={height}, W={width}")
    rows, cols = height // patch_size, width // patch_size
    blocks = batched.reshape(num_batch, channels, rows, patch_size, cols, patch_size)
    blocks = blocks.permute(0, 2, 4, 3, 5, 1)  # (B, rows, cols, P, P, C)
    patches = blocks.reshape(num_batch, rows * cols, patch_size * patch_size * channels)
    return patches if image.dim() == 4 else patches[0]


def patches_to_image(patches: torch.Tensor, patch_size: int, height: int,
                     width: int) -> torch.Tensor:
    """The inverse of :func:`image_to_patches`: (N, P·P·C) or (B, N, P·P·C) back to
    (C, H, W) or (B, C, H, W)."""
    patch_size = _check_int(patch_size, "patch_size", 1)
    height, width = _check_int(height, "height", 1), _check_int(width, "width", 1)
    if height % patch_size or width % patch_size:
        raise ValueError(f"height and width must be multiples of patch_size={patch_size}, "
                         f"got height={height}, width={width}")
    rows, cols = height // patch_size, width // patch_size
    if not isinstance(patches, torch.Tensor) or patches.dim() not in (2, 3) or \
            patches.shape[-2] != rows * cols or patches.shape[-1] % (patch_size ** 2):
        raise ValueError(f"patches must have shape (N, P·P·C) or (B, N, P·P·C) with "
                         f"N={rows * cols} and P={patch_size}, got "
                         f"{tuple(patches.shape) if isinstance(patches, torch.Tensor) else patches!r}")
    batched = patches if patches.dim() == 3 else patches[None]
    channels = batched.shape[-1] // patch_size ** 2
    blocks = batched.reshape(-1, rows, cols, patch_size, patch_size, channels)
    image = blocks.permute(0, 5, 1, 3, 2, 4).reshape(-1, channels, rows * patch_size,
                                                     cols * patch_size)
    return image if patches.dim() == 3 else image[0]


def reachable(masks: Sequence[torch.Tensor]) -> torch.Tensor:
    """Which inputs can influence which outputs through a stack of masked layers.

    Layer ``l`` lets its output ``i`` read its input ``j`` iff ``masks[l][i, j]``; the
    result is the boolean product ``masks[-1] ∘ … ∘ masks[0]``: entry (i, j) is True iff
    some path leads from input j through the layers to output i.

    Args:
        masks: one bool (T, T) mask per layer, first layer first (at least one).

    Returns:
        A bool tensor of shape (T, T).
    """
    if len(masks) == 0:
        raise ValueError("masks must hold at least one (T, T) layer mask, got none")
    reach = None
    for index, mask in enumerate(masks):
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.dim() != 2:
            raise ValueError(f"masks[{index}] must be a 2-D bool tensor, got "
                             f"{getattr(mask, 'dtype', type(mask).__name__)}")
        step = mask.to(torch.float64)
        if reach is not None and step.shape[1] != reach.shape[0]:
            raise ValueError(f"masks[{index}] has shape {tuple(mask.shape)} but the layer "
                             f"below has {reach.shape[0]} outputs")
        reach = step if reach is None else ((step @ reach) > 0).to(torch.float64)
    return reach > 0


def time_call(fn: Callable[[], object], *, repeats: int = 5, warmup: int = 1) -> float:
    """The fastest of ``repeats`` wall-clock timings of ``fn()``, in seconds.

    The minimum is the least noisy estimate on a shared machine (other processes only ever
    add time). Runs under ``torch.no_grad()``. The number varies between runs and machines:
    plot it, never print it in an output that is compared.
    """
    repeats, warmup = _check_int(repeats, "repeats", 1), _check_int(warmup, "warmup")
    best = math.inf
    with torch.no_grad():
        for _ in range(warmup):
            fn()
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
    return best


def loglog_slope(sizes: Sequence[float], times: Sequence[float]) -> float:
    """The slope of the least-squares line through (log size, log time): the exponent p
    of a power law ``time ∝ size^p`` (about 2 for quadratic growth, 1 for linear)."""
    sizes, times = np.asarray(sizes, dtype=float), np.asarray(times, dtype=float)
    if sizes.shape != times.shape or sizes.ndim != 1 or len(sizes) < 2:
        raise ValueError(f"sizes and times must be 1-D of the same length >= 2, got "
                         f"shapes {sizes.shape} and {times.shape}")
    if (sizes <= 0).any() or (times <= 0).any():
        raise ValueError("sizes and times must be positive to take logarithms")
    return float(np.polyfit(np.log(sizes), np.log(times), 1)[0])
