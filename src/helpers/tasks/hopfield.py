"""The Hopfield chapter's experiments: corrupted cues, the capacity curve, digit bitmaps.

The networks themselves (Hebbian storage, energy, recall, the modern update) are in
:mod:`helpers.hopfield`. Shapes: N units (pattern length), P patterns; a leading (…) holds
several patterns at once.
"""

from __future__ import annotations

import torch

from helpers.checks import (
    check_generator,
    check_int,
    check_pm1,
    check_real,
    describe,
    require,
)
from helpers.hopfield import hebbian_weights, recall

__all__ = ["corrupt", "capacity_curve", "digit_patterns", "DIGITS"]


def corrupt(
    pattern: torch.Tensor, fraction: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """A copy of ``pattern`` (…, N) of ±1 with round(fraction · N) units flipped, chosen at
    random (separately for each pattern of a batch) from ``generator``, on ``pattern``'s
    device. The units are drawn on the generator's device (the CPU for None or a CPU
    generator, so a seed flips the same units whatever the device of ``pattern``).

    Args:
        pattern: a non-empty tensor (…, N) of −1 and +1 entries.
        fraction: the fraction of the N units to flip, in [0, 1].
        generator: the random source (torch's global CPU one if None), on any device.
    """
    fraction = check_real(fraction, "fraction", minimum=0.0, maximum=1.0)
    check_pm1(pattern, "pattern", "(…, N)")
    check_generator(generator)
    num_flips = round(fraction * pattern.shape[-1])
    draw_device = None if generator is None else generator.device
    noise = torch.rand(pattern.shape, generator=generator, device=draw_device)  # (…, N)
    order = noise.argsort(dim=-1)  # a random permutation
    flip = (order < num_flips).to(pattern.device)  # exactly num_flips True per row
    return torch.where(flip, -pattern, pattern)


def capacity_curve(
    num_units: int,
    pattern_counts,
    trials: int = 5,
    generator: torch.Generator | None = None,
    steps: int = 5,
    tolerance: float = 0.02,
) -> torch.Tensor:
    """For each count P in ``pattern_counts``: store P random patterns of N = ``num_units``
    units, start recall (async, ``steps`` sweeps) at each stored pattern and count it as
    kept if at most ``tolerance`` · N units end up wrong (a near-fixed point). Returns the
    fraction kept, averaged over ``trials`` sets of patterns: a tensor of shape
    (len(pattern_counts),). It falls from about 1 to about 0 near P ≈ 0.138 N.

    Args:
        num_units: N, a positive integer.
        pattern_counts: the counts P, positive integers (an empty sequence gives an empty
            tensor).
        trials: sets of patterns per count, a positive integer.
        generator: the random source of the patterns and of the unit order, a CPU
            ``torch.Generator`` (the patterns are drawn and recalled on the CPU).
        steps: recall sweeps, a non-negative integer.
        tolerance: the fraction of wrong units still counted as kept, in [0, 1].
    """
    num_units = check_int(num_units, "num_units", 1)
    require(
        not isinstance(pattern_counts, (str, bytes, dict, torch.Tensor))
        and hasattr(pattern_counts, "__iter__")
        and getattr(pattern_counts, "ndim", 1) == 1,
        f"pattern_counts must be a sequence of positive integers, got {describe(pattern_counts)}",
    )
    pattern_counts = [
        check_int(count, "every entry of pattern_counts", 1) for count in pattern_counts
    ]
    trials = check_int(trials, "trials", 1)
    check_generator(generator)
    steps = check_int(steps, "steps")
    tolerance = check_real(tolerance, "tolerance", minimum=0.0, maximum=1.0)
    fractions = []
    for count in pattern_counts:
        kept = 0
        for _ in range(trials):
            patterns = torch.randint(0, 2, (count, num_units), generator=generator) * 2.0 - 1.0
            final, _ = recall(hebbian_weights(patterns), patterns, steps, generator=generator)
            wrong = (final != patterns).float().mean(dim=-1)  # (P,)
            kept += int((wrong <= tolerance).sum())
        fractions.append(kept / (count * trials))
    return torch.tensor(fractions)


# ---------------------------------------------------------------- digit bitmaps
DIGITS = {  # 7 rows × 5 columns, '#' = on (+1), '.' = off (−1)
    0: ".###. #...# #..## #.#.# ##..# #...# .###.",
    1: "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.",
    2: ".###. #...# ....# ...#. ..#.. .#... #####",
    3: "####. ....# ....# .###. ....# ....# ####.",
    4: "...#. ..##. .#.#. #..#. ##### ...#. ...#.",
    5: "##### #.... ####. ....# ....# #...# .###.",
    6: "..##. .#... #.... ####. #...# #...# .###.",
    7: "##### ....# ...#. ..#.. .#... .#... .#...",
    8: ".###. #...# #...# .###. #...# #...# .###.",
    9: ".###. #...# #...# .#### ....# ...#. .##..",
}


def digit_patterns(dtype: torch.dtype | None = None) -> torch.Tensor:
    """The digits 0–9 as 7 × 5 bitmaps (drawn in :data:`DIGITS`), flattened row by row to
    N = 35 units of ±1. Returns (10, 35); view one as an image with ``.reshape(7, 5)``.

    Args:
        dtype: a floating or signed integer dtype (one that holds −1); the default float
            dtype if None.
    """
    require(
        dtype is None
        or (
            isinstance(dtype, torch.dtype)
            and not dtype.is_complex
            and (dtype.is_floating_point or dtype.is_signed)
        ),
        f"dtype must be a floating or signed integer torch.dtype (one that holds -1), "
        f"got {describe(dtype)}",
    )
    rows = [[1.0 if c == "#" else -1.0 for c in DIGITS[d].replace(" ", "")] for d in range(10)]
    return torch.tensor(rows, dtype=dtype or torch.get_default_dtype())
