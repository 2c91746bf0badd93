"""Positional encodings: sinusoidal (fixed), learned (a table), and rotary (RoPE).

Attention by itself ignores order: permuting the inputs permutes the outputs. These
helpers give every position t a signal the model can read.

- Sinusoidal: ``PE[t, 2i] = sin(t·ω_i)``, ``PE[t, 2i+1] = cos(t·ω_i)`` with
  ``ω_i = 1 / 10000^(2i/D)``; added to the inputs. Moving k positions is a fixed linear
  map, ``PE(t+k) = M_k PE(t)``, with ``M_k`` block-diagonal (:func:`rotation_matrix`).
- Learned: a trainable (max_len, D) table, added to the inputs.
- Rotary (RoPE): rotate each feature pair (x_{2i}, x_{2i+1}) of queries and keys by the
  angle ``t·θ_i``, ``θ_i = base^(−2i/D)``; the dot product of a rotated query at m and a
  rotated key at n then depends on m and n only through m − n.

Shapes: T positions, D features (``d_model``), B batch.
"""

from __future__ import annotations

import torch
from torch import nn

from helpers.checks import (
    check_even,
    check_float_dtype,
    check_int,
    check_positions,
    check_probability,
    check_real,
)

__all__ = [
    "sinusoidal_encoding",
    "rotation_matrix",
    "rotary_embedding",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEncoding",
]


def _frequencies(d_model: int, base: float) -> torch.Tensor:
    """ω_i = base^(−2i/D) for i = 0 … D/2 − 1, float64, shape (D/2,).

    ``base`` must be a finite number above 1: at 1 every pair would turn at the same
    frequency, below it the frequencies would grow instead of fall, and 0, a negative or a
    NaN base gives infinities or NaNs."""
    base = check_real(base, "base", minimum=1, exclusive_minimum=True)
    exponents = torch.arange(0, d_model, 2, dtype=torch.float64) / d_model  # 2i / D
    return torch.pow(float(base), -exponents)  # (D/2,)


def sinusoidal_encoding(
    num_positions: int, d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The sinusoidal table of "Attention Is All You Need", shape (T, D).

    ``PE[t, 2i] = sin(t / base^(2i/D))`` and ``PE[t, 2i+1] = cos(t / base^(2i/D))`` for
    t = 0 … T − 1: column pair i is a sine and cosine of frequency ``ω_i = base^(−2i/D)``,
    from 1 (period 2π) down to about 1/base. Computed in float64, returned as ``dtype``.

    Args:
        num_positions: T, the number of positions (rows).
        d_model: D, the number of features (columns); must be even.
        base: the wavelength scale, 10000 in the paper.
        dtype: the dtype of the result, float32 by default.

    Returns:
        A tensor of shape (T, D).
    """
    num_positions = check_int(num_positions, "num_positions")
    d_model = check_even(d_model)
    check_float_dtype(dtype)
    positions = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (T, 1)
    angles = positions * _frequencies(d_model, base)  # (T, D/2)
    table = torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1)  # (T, D/2, 2)
    return table.reshape(num_positions, d_model).to(dtype)  # (T, D): sin, cos, sin, cos, …


def rotation_matrix(
    offset: float, d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """``M_k``, shape (D, D), with ``PE(t + k) = M_k PE(t)`` for every t (column vectors).

    Block-diagonal: the i-th 2×2 block, acting on the pair (sin tω_i, cos tω_i), is
    ``[[cos kω_i, sin kω_i], [−sin kω_i, cos kω_i]]`` (the angle-addition formulas), a
    rotation that does not depend on t. The same matrix gives RoPE:
    ``rotary_embedding(x at position t) == x @ rotation_matrix(t, D)`` for a row x.

    Args:
        offset: k, the shift in positions (any real number).
        d_model: D, even.
        base: as in :func:`sinusoidal_encoding`.
        dtype: the dtype of the result.

    Returns:
        A tensor of shape (D, D).
    """
    offset = check_real(offset, "offset")
    d_model = check_even(d_model)
    check_float_dtype(dtype)
    angles = offset * _frequencies(d_model, base)  # (D/2,)
    cos, sin = torch.cos(angles), torch.sin(angles)
    blocks = torch.stack([torch.stack([cos, sin], -1), torch.stack([-sin, cos], -1)], -2)
    return torch.block_diag(*blocks).to(dtype)  # (D, D) from D/2 blocks of (2, 2)


def rotary_embedding(
    x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0
) -> torch.Tensor:
    """Rotary position embedding (RoPE) of queries or keys x of shape (…, T, D).

    Each feature pair (x_{2i}, x_{2i+1}) of the token at position t is rotated by the angle
    ``t·θ_i``, ``θ_i = base^(−2i/D)``: ``(x_{2i} cos − x_{2i+1} sin, x_{2i} sin +
    x_{2i+1} cos)`` (the interleaved pairing of RoFormer). Norms are preserved, and
    ``rope(q, m) · rope(k, n)`` depends on m and n only through m − n. Angles are computed
    in float64, so large positions stay accurate.

    Args:
        x: a floating tensor of shape (…, T, D), D even; e.g. (B, T, D) or (B, H, T, D).
        positions: optional positions, shape (T,) or broadcastable to (…, T); defaults to
            0 … T − 1.
        base: the wavelength scale, 10000 as in RoFormer.

    Returns:
        A tensor of x's shape and dtype.
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 2 or not x.is_floating_point():
        got = (tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a floating tensor of shape (…, T, D), got {got}")
    *lead, num_positions, d_model = x.shape
    check_even(d_model, "d_model (x's last axis)")
    if positions is None:
        positions = torch.arange(num_positions, device=x.device)
    if not isinstance(positions, torch.Tensor):  # a list of numbers, say
        try:
            positions = torch.as_tensor(positions)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(
                f"positions must be a tensor (or list) of numbers of shape (T,) "
                f"or (…, T), got {type(positions).__name__}"
            ) from None
    if positions.dtype == torch.bool or positions.is_complex():
        raise ValueError(f"positions must hold real numbers, got dtype {positions.dtype}")
    positions = positions.to(device=x.device, dtype=torch.float64)
    try:
        fits = torch.broadcast_shapes(positions.shape, x.shape[:-1]) == x.shape[:-1]
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} must broadcast to "
            f"x's (…, T) = {tuple(x.shape[:-1])}"
        )
    if positions.numel() and not bool(torch.isfinite(positions).all()):
        raise ValueError("positions must be finite numbers, got NaN or inf")
    angles = positions[..., None] * _frequencies(d_model, base).to(x.device)  # (…, T, D/2)
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (…, T, D/2) each
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
    return rotated.flatten(-2)  # (…, T, D/2, 2) → (…, T, D)


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the sinusoidal table to its input: ``dropout(x + PE[:T])``.

    ``SinusoidalPositionalEncoding(d_model, max_len=1024, dropout=0.0)`` precomputes
    :func:`sinusoidal_encoding` (max_len, D) once, in float64, as the non-persistent buffer
    ``encoding`` (it moves with ``.to(...)`` but is not saved in ``state_dict``); forward
    casts it to the input's dtype, so float64 inputs get the exact table (after
    ``module.float()`` the buffer itself is float32).
    ``forward(x)`` takes x of shape (B, T, D) (or (T, D)) with T ≤ max_len and returns the
    same shape.
    """

    def __init__(self, d_model: int, max_len: int = 1024, dropout: float = 0.0):
        super().__init__()
        self.d_model = check_even(d_model)
        self.max_len = check_int(max_len, "max_len", minimum=1)
        self.dropout = nn.Dropout(check_probability(dropout))
        self.register_buffer(
            "encoding",
            sinusoidal_encoding(self.max_len, self.d_model, dtype=torch.float64),
            persistent=False,
        )  # (max_len, D)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        num_positions = check_positions(self, x)
        return self.dropout(x + self.encoding[:num_positions].to(x.dtype))  # (B, T, D)


class LearnedPositionalEncoding(nn.Module):
    """Adds a learned position table to its input: ``dropout(x + E[:T])``.

    ``LearnedPositionalEncoding(max_len, d_model, dropout=0.0)`` holds an ``nn.Embedding``
    ``embedding`` with one trainable D-vector per position 0 … max_len − 1 (initialised
    N(0, 1) from torch's generator: seed it). ``forward(x)`` takes x (B, T, D) (or (T, D))
    with T ≤ max_len and returns the same shape. Unlike the sinusoidal table it cannot say
    anything about positions beyond max_len.
    """

    def __init__(self, max_len: int, d_model: int, dropout: float = 0.0):
        super().__init__()
        self.max_len = check_int(max_len, "max_len", minimum=1)
        self.d_model = check_int(d_model, "d_model", minimum=1)
        self.embedding = nn.Embedding(self.max_len, self.d_model)  # (max_len, D)
        self.dropout = nn.Dropout(check_probability(dropout))

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        num_positions = check_positions(self, x)
        return self.dropout(x + self.embedding.weight[:num_positions])  # (B, T, D)
