"""Small utilities shared by every chapter: seeding and shape checks."""

from __future__ import annotations

import random
from typing import Sequence

import numpy as np
import torch

__all__ = ["set_seed", "check_shape", "require"]


def set_seed(seed: int) -> None:
    """Seed Python's ``random``, NumPy and PyTorch (CPU) so a cell prints the same every run.

    Args:
        seed: a non-negative integer.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    random.seed(int(seed))
    np.random.seed(int(seed))
    torch.manual_seed(int(seed))


def check_shape(t: torch.Tensor | np.ndarray, shape: Sequence[int | None]) -> None:
    """Raise ``ValueError`` unless ``t.shape`` equals ``shape``.

    ``None`` in ``shape`` matches any size on that axis, so ``check_shape(x, (None, 4))``
    accepts any (N, 4) tensor.

    Args:
        t: a tensor or array.
        shape: the expected shape, one entry per axis.
    """
    got = tuple(t.shape)
    want = tuple(shape)
    if len(got) != len(want) or any(w is not None and g != w for g, w in zip(got, want)):
        shown = tuple("*" if w is None else w for w in want)
        raise ValueError(f"expected a tensor of shape {shown}, got shape {got}")


def require(condition: bool, message: str) -> None:
    """Raise ``ValueError(message)`` when ``condition`` is false (input checks, never ``assert``)."""
    if not condition:
        raise ValueError(message)
