"""helpers.hopfield (Hebbian storage, energy descent, the modern (attention) update) and
helpers.tasks.hopfield (corrupted cues, capacity, the digit bitmaps)."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.nn import functional as F

from helpers.attention import scaled_dot_product_attention
from helpers.hopfield import (
    energy,
    hebbian_weights,
    hopfield_weights,
    modern_energy,
    modern_hopfield_update,
    projection_weights,
    recall,
    retrieve,
)
from helpers.tasks.hopfield import DIGITS, capacity_curve, corrupt, digit_patterns


def random_patterns(count, num_units, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, 2, (count, num_units), generator=gen, dtype=torch.float64) * 2 - 1


# ---------------------------------------------------------------- classical
def test_hebbian_weights():
    patterns = random_patterns(3, 8, seed=0)
    weights = hebbian_weights(patterns)
    assert weights.shape == (8, 8)
    assert torch.equal(weights, weights.T)
    assert torch.equal(weights.diagonal(), torch.zeros(8, dtype=torch.float64))
    expected = sum(torch.outer(p, p) for p in patterns) / 8
    torch.testing.assert_close(weights, expected - torch.diag(expected.diagonal()))
    assert hebbian_weights(patterns.long()).dtype == torch.get_default_dtype()
    with pytest.raises(ValueError, match="-1 and \\+1"):
        hebbian_weights(torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"patterns must have shape \(P, N\)"):
        hebbian_weights(torch.ones(4))


def test_projection_weights_against_the_pseudo_inverse():
    patterns = random_patterns(5, 12, seed=3)  # (P, N), linearly independent
    weights = projection_weights(patterns)
    assert weights.shape == (12, 12) and weights.dtype == torch.float64
    assert torch.equal(weights, weights.T)
    assert torch.equal(weights.diagonal(), torch.zeros(12, dtype=torch.float64))
    x = patterns.T  # (N, P)
    projector = x @ torch.linalg.inv(x.T @ x) @ x.T  # X (X^T X)^-1 X^T
    torch.testing.assert_close(weights, projector - torch.diag(projector.diagonal()))
    torch.testing.assert_close(projector, x @ torch.linalg.pinv(x))  # PyTorch's pseudo-inverse
    h = patterns @ weights  # (P, N): every pattern is a fixed point
    assert bool((torch.sign(h) == patterns).all())
    assert projection_weights(patterns.long()).dtype == torch.get_default_dtype()
    assert projection_weights(patterns.float()).dtype == torch.float32


def test_projection_rule_stores_the_ten_digits_and_equals_hebbian_when_orthogonal():
    digits = digit_patterns()
    for rule, expected in [(hebbian_weights, 0), (projection_weights, 10)]:
        final, _ = recall(rule(digits), digits, 5, generator=torch.Generator().manual_seed(0))
        assert int((final == digits).all(-1).sum()) == expected
    hadamard = torch.tensor([[1.0, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]])
    for count in range(1, 4):
        torch.testing.assert_close(
            projection_weights(hadamard[:count]), hebbian_weights(hadamard[:count])
        )
    assert bool((projection_weights(hadamard).abs() < 1e-6).all())  # P = N: the identity, zeroed


def test_energy_batch_and_single():
    patterns = random_patterns(2, 6, seed=1)
    weights = hebbian_weights(patterns)
    single = energy(weights, patterns[0])
    assert single.shape == ()
    torch.testing.assert_close(single, -0.5 * patterns[0] @ weights @ patterns[0])
    assert energy(weights, patterns).shape == (2,)


@given(
    num_units=st.integers(2, 24),
    count=st.integers(1, 6),
    seed=st.integers(0, 2**16),
    steps=st.integers(1, 4),
)
def test_async_recall_never_raises_energy(num_units, count, seed, steps):
    weights = hebbian_weights(random_patterns(count, num_units, seed))
    start = random_patterns(3, num_units, seed + 1)  # three states side by side
    final, energies = recall(
        weights, start, steps, mode="async", generator=torch.Generator().manual_seed(seed)
    )
    assert energies.shape == (steps + 1, 3)
    assert bool((energies[1:] <= energies[:-1] + 1e-12).all())
    torch.testing.assert_close(energies[-1], energy(weights, final))
    assert bool(((final == 1) | (final == -1)).all())


def test_recall_is_seeded_and_repairs_a_corrupted_pattern():
    patterns = random_patterns(3, 100, seed=2)
    weights = hebbian_weights(patterns)
    noisy = corrupt(patterns[1], 0.15, torch.Generator().manual_seed(3))
    assert int((noisy != patterns[1]).sum()) == 15
    runs = [recall(weights, noisy, 5, generator=torch.Generator().manual_seed(4)) for _ in range(2)]
    assert torch.equal(runs[0][0], runs[1][0])
    assert torch.equal(runs[0][0], patterns[1])
    final, energies = recall(weights, noisy, 5, mode="sync")
    assert torch.equal(final, patterns[1]) and energies.shape == (6,)


def test_corrupt_flips_exactly_a_fraction_per_row():
    patterns = random_patterns(4, 20, seed=5)
    noisy = corrupt(patterns, 0.25, torch.Generator().manual_seed(6))
    assert (noisy != patterns).sum(dim=-1).tolist() == [5, 5, 5, 5]
    assert torch.equal(corrupt(patterns, 0.0), patterns)
    with pytest.raises(ValueError, match="fraction"):
        corrupt(patterns, 1.5)


def test_capacity_below_and_above_the_limit():
    fractions = capacity_curve(60, [3, 18], trials=3, generator=torch.Generator().manual_seed(8))
    assert fractions.shape == (2,)
    assert fractions[0] >= 0.95  # P = 0.05 N: almost every pattern is a fixed point
    assert fractions[1] <= 0.5  # P = 0.3 N, beyond 0.138 N: most are lost


# ---------------------------------------------------------------- modern Hopfield
def test_modern_update_is_attention():
    gen = torch.Generator().manual_seed(9)
    stored = torch.randn(16, 5, generator=gen, dtype=torch.float64)  # X (N, P)
    xi = torch.randn(16, generator=gen, dtype=torch.float64)  # (N,)
    beta = 0.7
    updated = modern_hopfield_update(stored, xi, beta)
    assert updated.shape == (16,)
    torch.testing.assert_close(updated, stored @ torch.softmax(beta * stored.T @ xi, dim=0))
    keys = stored.T[None]  # K = V = Xᵀ, (1, P, N)
    by_sdpa = F.scaled_dot_product_attention(xi[None, None], keys, keys, scale=beta)
    torch.testing.assert_close(updated, by_sdpa[0, 0])
    # the book's attention scales by 1/√N, so the query carries β √N
    out, weights = scaled_dot_product_attention(xi[None, None] * beta * 16**0.5, keys, keys)
    torch.testing.assert_close(updated, out[0, 0])
    torch.testing.assert_close(hopfield_weights(stored, xi, beta), weights[0, 0])


def test_large_beta_retrieves_nearest_digit_small_beta_gives_mean():
    digits = digit_patterns()
    assert digits.shape == (10, 35)
    assert bool(((digits == 1) | (digits == -1)).all())
    assert len({tuple(d.tolist()) for d in digits}) == 10
    stored = digits.T  # X (N, P)
    noisy = corrupt(digits, 3 / 35, torch.Generator().manual_seed(10))  # (10, N), 3 bits off
    assert torch.equal((noisy @ stored).argmax(dim=-1), torch.arange(10))  # still nearest
    torch.testing.assert_close(
        retrieve(stored, noisy, beta=8.0, steps=1), digits, atol=1e-3, rtol=0
    )
    torch.testing.assert_close(
        retrieve(stored, noisy, beta=1e-4, steps=3),
        digits.mean(0).expand(10, -1),
        atol=1e-3,
        rtol=0,
    )


def test_modern_update_never_raises_energy():
    gen = torch.Generator().manual_seed(11)
    stored = torch.randn(12, 6, generator=gen, dtype=torch.float64)
    xi = torch.randn(4, 12, generator=gen, dtype=torch.float64)
    for beta in (0.1, 1.0, 5.0):
        state = xi
        for _ in range(4):
            new = modern_hopfield_update(stored, state, beta)
            assert bool(
                (
                    modern_energy(stored, new, beta) <= modern_energy(stored, state, beta) + 1e-12
                ).all()
            )
            state = new


# ---------------------------------------------------------------- bad input
def test_modern_update_with_no_stored_patterns_or_no_states():
    stored = torch.randn(6, 3)
    assert hopfield_weights(stored, torch.randn(0, 6), 1.0).shape == (0, 3)
    assert modern_hopfield_update(stored, torch.randn(0, 6), 1.0).shape == (0, 6)


@pytest.mark.parametrize("fraction", [-0.1, math.nan, "0.5", None])
def test_corrupt_rejects_bad_fractions(fraction):
    with pytest.raises(ValueError, match="fraction must be a finite number in"):
        corrupt(torch.ones(4), fraction)


def test_corrupt_rejects_bad_patterns_and_generators():
    with pytest.raises(ValueError, match="pattern must be a torch.Tensor"):
        corrupt([1.0, -1.0], 0.5)
    with pytest.raises(ValueError, match="pattern must be a non-empty tensor of -1 and \\+1"):
        corrupt(torch.zeros(4), 0.5)
    with pytest.raises(ValueError, match="generator must be a torch.Generator or None"):
        corrupt(torch.ones(4), 0.5, generator=3)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((0, [2]), {}, "num_units must be a positive integer"),
        ((10, [2, 0]), {}, "every entry of pattern_counts must be a positive integer"),
        ((10, 2), {}, "pattern_counts must be a sequence of positive integers"),
        ((10, [2]), {"trials": 0}, "trials must be a positive integer"),
        ((10, [2]), {"steps": -1}, "steps must be a non-negative integer"),
        ((10, [2]), {"tolerance": 1.5}, "tolerance must be a finite number in"),
        ((10, [2]), {"generator": 1}, "generator must be a torch.Generator or None"),
    ],
)
def test_capacity_curve_rejects_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        capacity_curve(*args, **kwargs)


def test_capacity_curve_of_no_counts_is_empty():
    assert capacity_curve(10, []).shape == (0,)


def test_digit_patterns_dtypes():
    assert set(DIGITS) == set(range(10))
    assert digit_patterns(torch.float64).dtype == torch.float64
    assert torch.equal(digit_patterns(torch.int8), digit_patterns().to(torch.int8))
    for dtype in (torch.bool, torch.uint8, "float32"):
        with pytest.raises(ValueError, match="dtype must be a floating or signed integer"):
            digit_patterns(dtype)


def test_a_tie_is_a_tie_on_every_cpu():
    """An input that is exactly 0 (Hebbian weights k/N often cancel) comes out of float
    arithmetic as ±1e-8 or so, with a sign set by the order of the additions, hence by the
    CPU: recall counts it as a tie and keeps the unit, as integer arithmetic does."""
    generator = torch.Generator().manual_seed(0)
    patterns = torch.randint(0, 2, (6, 35), generator=generator) * 2.0 - 1  # (P, N)
    weights = hebbian_weights(patterns)
    states = torch.randint(0, 2, (2000, 35), generator=generator) * 2.0 - 1
    exact = states.long() @ (weights * 35).round().long()  # (2000, N): 35 h, in integers
    assert (exact == 0).any(), "no tie to test"
    want = torch.where(exact > 0, 1.0, torch.where(exact < 0, -1.0, states))
    got, _ = recall(weights, states, 1, mode="sync")
    torch.testing.assert_close(got, want, rtol=0, atol=0)
