"""Input checks: the one place where the helpers decide what a bad argument is.

Every public callable of the library checks its arguments with these functions before it
computes anything, so a bad input fails at the call with a message that names the argument,
says what it got and what it needed, and never deep inside torch or numpy, and never
silently with a wrong answer. All of them raise ``ValueError`` (a wrong type is a wrong value
of the argument too), so a chapter can catch one exception type.

Shape letters, as everywhere in the book: B batch, Q queries, K keys, D features, H heads,
T positions.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np
import torch

__all__ = [
    "require",
    "check_shape",
    "check_int",
    "check_real",
    "check_probability",
    "check_bool",
    "check_tensor",
    "check_bool_mask",
    "check_head_mask",
    "describe",
]


def require(condition: bool, message: str) -> None:
    """Raise ``ValueError(message)`` when ``condition`` is false (input checks, never ``assert``)."""
    if not condition:
        raise ValueError(message)


def describe(value) -> str:
    """A short description of ``value`` for an error message: a tensor's shape and dtype,
    an array's shape, otherwise its repr (or type name when the repr is long)."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    return text if len(text) <= 60 else type(value).__name__


def check_shape(t: torch.Tensor | np.ndarray, shape: Sequence[int | None]) -> None:
    """Raise ``ValueError`` unless ``t.shape`` equals ``shape``.

    ``None`` in ``shape`` matches any size on that axis, so ``check_shape(x, (None, 4))``
    accepts any (N, 4) tensor.

    Args:
        t: a tensor or array.
        shape: the expected shape, one entry per axis.
    """
    if not hasattr(t, "shape"):
        raise ValueError(f"expected a tensor or array, got {describe(t)}")
    got = tuple(t.shape)
    want = tuple(shape)
    if len(got) != len(want) or any(w is not None and g != w for g, w in zip(got, want)):
        shown = tuple("*" if w is None else w for w in want)
        raise ValueError(f"expected a tensor of shape {shown}, got shape {got}")


def check_int(value, name: str, minimum: int = 0) -> int:
    """``value`` as an ``int`` if it is an integer (not a bool) of at least ``minimum``.

    The message says "a positive integer" for ``minimum=1``, "a non-negative integer" for
    ``minimum=0`` and "an integer >= minimum" otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        wanted = {0: "a non-negative integer", 1: "a positive integer"}.get(
            minimum, f"an integer >= {minimum}"
        )
        raise ValueError(f"{name} must be {wanted}, got {describe(value)}")
    return int(value)


def check_real(
    value,
    name: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
) -> float:
    """``value`` as a ``float`` if it is a finite real number (not a bool) within the bounds.

    ``minimum``/``maximum`` are inclusive unless ``exclusive_minimum``/``exclusive_maximum``.
    NaN and ±inf are always rejected.
    """
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
    if ok and minimum is not None:
        ok = value > minimum if exclusive_minimum else value >= minimum
    if ok and maximum is not None:
        ok = value < maximum if exclusive_maximum else value <= maximum
    if not ok:
        low = "" if minimum is None else ("(" if exclusive_minimum else "[") + f"{minimum}, "
        high = "" if maximum is None else f"{maximum}" + (")" if exclusive_maximum else "]")
        if minimum is not None and maximum is not None:
            wanted = f"a finite number in {low}{high}"
        elif minimum is not None:
            wanted = f"a finite number {'>' if exclusive_minimum else '>='} {minimum}"
        elif maximum is not None:
            wanted = f"a finite number {'<' if exclusive_maximum else '<='} {maximum}"
        else:
            wanted = "a finite real number"
        raise ValueError(f"{name} must be {wanted}, got {describe(value)}")
    return float(value)


def check_bool(value, name: str) -> bool:
    """``value`` as a ``bool`` if it is one (Python's or NumPy's): never a truthy stand-in
    such as ``"False"``, ``0`` or ``None``, which would read as the wrong flag."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {describe(value)}")
    return bool(value)


def check_probability(value, name: str = "dropout") -> float:
    """``value`` as a float if it is a probability in [0, 1) (a dropout rate)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < 1:
        raise ValueError(f"{name} must be a probability in [0, 1), got {describe(value)}")
    return float(value)


def check_tensor(
    value,
    name: str,
    shape: str,
    *,
    ndim: int | Sequence[int] | None = None,
    floating: bool = False,
    dtype: torch.dtype | None = None,
    size: dict[int, int] | None = None,
) -> torch.Tensor:
    """``value`` if it is a ``torch.Tensor`` with the rank, dtype and sizes asked for.

    Args:
        value: the argument.
        name: its name in the messages.
        shape: how the shape reads in the book, e.g. ``"(B, Q, D)"`` or ``"(…, K, D)"``.
        ndim: the rank it must have: an int, or the allowed ranks; for a shape with ``…``
            give the smallest allowed rank as ``range(n, 65)``.
        floating: require a floating-point dtype.
        dtype: require exactly this dtype (e.g. a module's parameter dtype).
        size: axis -> required size, e.g. ``{-1: d_model}``.
    """
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape {shape}, got {describe(value)}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if value.dim() not in allowed:
            raise ValueError(f"{name} must have shape {shape}, got shape {tuple(value.shape)}")
    if floating and not value.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")
    if dtype is not None and value.dtype != dtype:
        raise ValueError(
            f"{name} must have the parameters' dtype {dtype}, got dtype "
            f"{value.dtype}; convert the module (e.g. .double()) or the input"
        )
    for axis, want in (size or {}).items():
        if value.shape[axis] != want:
            raise ValueError(
                f"{name} must have shape {shape} with {want} on axis {axis}, "
                f"got shape {tuple(value.shape)}"
            )
    return value


def check_bool_mask(
    mask, name: str = "mask", *, shape: str | None = None, ndim: int | None = None
) -> torch.Tensor:
    """``mask`` if it is a boolean tensor (True = may attend), of rank ``ndim`` if given."""
    if not isinstance(mask, torch.Tensor):
        raise ValueError(
            f"{name} must be a torch.Tensor of dtype torch.bool, got {type(mask).__name__}"
        )
    if mask.dtype != torch.bool:
        raise ValueError(
            f"{name} must have dtype torch.bool (True = may attend), got dtype "
            f"{mask.dtype}; build one with helpers.masks or compare, e.g. x > 0"
        )
    if ndim is not None and mask.dim() != ndim:
        raise ValueError(
            f"{name} must be {ndim}-D {shape or ''}".rstrip() + f", got shape {tuple(mask.shape)}"
        )
    return mask


def check_head_mask(mask, name: str, shape: Sequence[int]) -> torch.Tensor:
    """``mask`` as a bool mask of the rank of multi-head weights ``shape`` = (B, H, Q, K).

    The rule of :class:`helpers.multihead.MultiHeadAttention`, here so that a block can
    check its masks under their own names: a 2-D mask is read as (Q, K), a 3-D one as
    (B, Q|1, K) per example, shared by the heads (never as (H, Q, K), even when B == H), a
    4-D one as (B|1, H|1, Q|1, K|1); it must broadcast to ``shape``. Returns the mask with
    a head axis inserted if it was 3-D (a view, nothing expanded).
    """
    check_bool_mask(mask, name)
    heads = mask[:, None] if mask.dim() == 3 else mask  # (B, 1, Q|1, K): the heads share it
    shape = torch.Size(shape)
    try:
        fits = heads.dim() <= 4 and torch.broadcast_shapes(heads.shape, shape) == shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} must broadcast to the weights' "
            f"shape (B, H, Q, K) = {tuple(shape)}; e.g. (Q, K), (B, 1, K) or "
            f"(B, 1, 1, K) (a (B, K) padding mask as mask[:, None, None, :]), "
            f"(B, Q, K) or (B, 1, Q, K)"
        )
    return heads
