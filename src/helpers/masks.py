"""Attention masks. One convention everywhere: a boolean mask, **True = may attend**.

That is the convention of ``F.scaled_dot_product_attention``. ``nn.MultiheadAttention``'s
``key_padding_mask`` uses the opposite one (True = ignore); convert at the boundary with
:func:`to_key_padding_mask` and :func:`from_key_padding_mask`, never by hand.
"""

from __future__ import annotations

import numbers

import torch

__all__ = [
    "valid_length_mask",
    "causal_mask",
    "to_key_padding_mask",
    "from_key_padding_mask",
    "to_additive_mask",
]


def _check_size(value, name: str) -> int:
    """Return ``value`` as an int if it is a non-negative integer, else raise ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def _check_bool_mask(mask, name: str, ndim: int | None = None) -> torch.Tensor:
    """Return ``mask`` if it is a boolean tensor (of rank ``ndim``), else raise ValueError."""
    if not isinstance(mask, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of dtype torch.bool, "
                         f"got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise ValueError(f"{name} must have dtype torch.bool (True = may attend), got dtype "
                         f"{mask.dtype}; build one with helpers.masks or compare, e.g. x > 0")
    if ndim is not None and mask.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-D (B, K), got shape {tuple(mask.shape)}")
    return mask


def valid_length_mask(valid_lens, num_keys: int,
                      num_queries: int | None = None) -> torch.Tensor:
    """Mask out the padding keys of each sequence: key ``j`` may be attended iff ``j < len``.

    ``valid_lens`` holds one length per sequence, shape (B,), giving a mask of shape (B, K);
    or one length per query, shape (B, Q), giving (B, Q, K). With 1-D ``valid_lens`` and
    ``num_queries=Q`` the (B, K) mask is repeated over queries to (B, Q, K); with 2-D
    ``valid_lens``, ``num_queries`` (if given) must equal Q. Lengths must be integers in
    [0, K]. The mask lives on ``valid_lens``' device.

    Args:
        valid_lens: an integer tensor (or list) of shape (B,) or (B, Q).
        num_keys: K, the number of keys (padded sequence length).
        num_queries: Q, optional, as described above.

    Returns:
        A bool tensor of shape (B, K) or (B, Q, K); True = may attend.
    """
    num_keys = _check_size(num_keys, "num_keys")
    if num_queries is not None:
        num_queries = _check_size(num_queries, "num_queries")
    if not isinstance(valid_lens, torch.Tensor):
        valid_lens = torch.as_tensor(valid_lens)
    if valid_lens.dtype == torch.bool or valid_lens.is_floating_point() or valid_lens.is_complex():
        raise ValueError(f"valid_lens must have an integer dtype, got dtype {valid_lens.dtype}")
    if valid_lens.dim() not in (1, 2):
        raise ValueError(f"valid_lens must be 1-D (B,) or 2-D (B, Q), "
                         f"got shape {tuple(valid_lens.shape)}")
    if valid_lens.numel() > 0:
        low, high = int(valid_lens.min()), int(valid_lens.max())
        if low < 0:
            raise ValueError(f"valid_lens must be >= 0, got a length of {low}")
        if high > num_keys:
            raise ValueError(f"valid_lens must be <= num_keys={num_keys}, "
                             f"got a length of {high}")
    if valid_lens.dim() == 2 and num_queries is not None and valid_lens.shape[1] != num_queries:
        raise ValueError(f"valid_lens of shape (B, Q) must have Q == num_queries="
                         f"{num_queries}, got shape {tuple(valid_lens.shape)}")
    positions = torch.arange(num_keys, device=valid_lens.device)  # (K,)
    mask = positions < valid_lens.unsqueeze(-1)  # (B, K) or (B, Q, K)
    if valid_lens.dim() == 1 and num_queries is not None:
        mask = mask.unsqueeze(1).expand(-1, num_queries, -1).contiguous()  # (B, Q, K)
    return mask


def causal_mask(num_queries: int, num_keys: int | None = None, *,
                device: torch.device | str | None = None) -> torch.Tensor:
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
    num_queries = _check_size(num_queries, "num_queries")
    num_keys = num_queries if num_keys is None else _check_size(num_keys, "num_keys")
    return torch.ones(num_queries, num_keys, dtype=torch.bool, device=device).tril(diagonal=0)


def to_key_padding_mask(mask: torch.Tensor) -> torch.Tensor:
    """Convert the book's (B, K) mask (True = may attend) to ``nn.MultiheadAttention``'s.

    ``nn.MultiheadAttention(..., key_padding_mask=...)`` reads True as *ignore this key*, so
    this is the logical negation, with the shape and dtype checked first.

    Args:
        mask: a bool tensor of shape (B, K), True = may attend.

    Returns:
        A bool tensor of shape (B, K), True = ignore (padding).
    """
    return ~_check_bool_mask(mask, "mask", ndim=2)


def from_key_padding_mask(key_padding_mask: torch.Tensor) -> torch.Tensor:
    """Convert an ``nn.MultiheadAttention`` key padding mask (True = ignore) to the book's.

    Args:
        key_padding_mask: a bool tensor of shape (B, K), True = ignore (padding).

    Returns:
        A bool tensor of shape (B, K), True = may attend.
    """
    return ~_check_bool_mask(key_padding_mask, "key_padding_mask", ndim=2)


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
    _check_bool_mask(mask, "mask")
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise ValueError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return additive.masked_fill(~mask, float("-inf"))
