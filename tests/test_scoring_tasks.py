"""Tests for helpers.tasks.scoring: checked against PyTorch (autograd Jacobians, one_hot,
additive_scores) and against the theory they illustrate. (attention_entropy and time_call
are tested in test_measure.py.)"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from helpers.measure import attention_entropy
from helpers.scoring import additive_scores
from helpers.tasks.scoring import (
    SaturationRow,
    concat_mlp_scores,
    dot_product_variance,
    hardmax,
    matched_source_weight,
    scorer_multiply_adds,
    softmax_jacobian,
    softmax_jacobian_norm,
    softmax_saturation,
    softmax_with_temperature,
    time_scorers,
)

sizes = st.integers(min_value=1, max_value=6)


# --- concat_mlp_scores ------------------------------------------------------------------


@given(
    num_queries=sizes,
    num_keys=sizes,
    query_dim=sizes,
    key_dim=sizes,
    hidden=sizes,
    seed=st.integers(0, 2**16),
)
def test_concat_mlp_equals_additive_scores(num_queries, num_keys, query_dim, key_dim, hidden, seed):
    generator = torch.Generator().manual_seed(seed)
    queries = torch.randn(2, num_queries, query_dim, generator=generator, dtype=torch.float64)
    keys = torch.randn(2, num_keys, key_dim, generator=generator, dtype=torch.float64)
    w_q = torch.randn(hidden, query_dim, generator=generator, dtype=torch.float64)
    w_k = torch.randn(hidden, key_dim, generator=generator, dtype=torch.float64)
    w_v = torch.randn(1, hidden, generator=generator, dtype=torch.float64)
    concat = concat_mlp_scores(queries, keys, torch.cat([w_q, w_k], dim=1), w_v)
    assert concat.shape == (2, num_queries, num_keys)
    torch.testing.assert_close(concat, additive_scores(queries, keys, w_q, w_k, w_v))


def test_concat_mlp_matches_a_loop_over_pairs():
    torch.manual_seed(0)
    queries, keys = torch.randn(3, 4), torch.randn(5, 2)
    w_1, w_2 = torch.randn(7, 6), torch.randn(7)
    scores = concat_mlp_scores(queries, keys, w_1, w_2)
    for i in range(3):
        for j in range(5):
            expected = w_2 @ torch.tanh(w_1 @ torch.cat([queries[i], keys[j]]))
            torch.testing.assert_close(scores[i, j], expected)


def test_concat_mlp_broadcasts_leading_axes():
    torch.manual_seed(1)
    queries, keys = torch.randn(2, 1, 3, 4), torch.randn(1, 5, 6, 2)
    w_1, w_2 = torch.randn(7, 6), torch.randn(7)
    assert concat_mlp_scores(queries, keys, w_1, w_2).shape == (2, 5, 3, 6)


@pytest.mark.parametrize(
    "w_1, w_2, match",
    [
        (torch.randn(7, 5), torch.randn(7), "w_1 must have shape"),
        (torch.randn(7, 6), torch.randn(6), "w_2 must hold H = 7"),
        (torch.randn(6), torch.randn(7), "w_1 must have shape"),
        (torch.randn(7, 6), torch.randn(1, 1, 7), "w_2 must have shape"),
        (torch.randn(7, 6).double(), torch.randn(7), "w_1 must have the dtype of queries"),
        (torch.randn(7, 6), torch.ones(7, dtype=torch.long), "w_2 must be a floating-point"),
    ],
)
def test_concat_mlp_rejects_bad_weights(w_1, w_2, match):
    with pytest.raises(ValueError, match=match):
        concat_mlp_scores(torch.randn(3, 4), torch.randn(5, 2), w_1, w_2)


def test_concat_mlp_rejects_bad_inputs():
    with pytest.raises(ValueError, match="queries must have shape"):
        concat_mlp_scores(torch.randn(4), torch.randn(5, 2), torch.randn(7, 6), torch.randn(7))
    with pytest.raises(ValueError, match="keys must be a floating-point"):
        concat_mlp_scores(
            torch.randn(3, 4), torch.ones(5, 2, dtype=torch.long), torch.randn(7, 6), torch.randn(7)
        )


# --- entropy and the softmax Jacobian ------------------------------------------------------


@given(num_keys=st.integers(1, 10), seed=st.integers(0, 2**16))
def test_softmax_jacobian_matches_autograd(num_keys, seed):
    generator = torch.Generator().manual_seed(seed)
    scores = 4 * torch.randn(num_keys, generator=generator, dtype=torch.float64)
    expected = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, dim=-1), scores)
    jacobian = softmax_jacobian(torch.softmax(scores, dim=-1))
    torch.testing.assert_close(jacobian, expected)
    assert jacobian.abs().max() <= 0.25 + 1e-12  # never explodes
    torch.testing.assert_close(jacobian.sum(dim=-1), torch.zeros(num_keys, dtype=torch.float64))


def test_softmax_jacobian_is_batched():
    torch.manual_seed(0)
    scores = torch.randn(2, 3, 5, dtype=torch.float64)
    jacobian = softmax_jacobian(torch.softmax(scores, dim=-1))
    assert jacobian.shape == (2, 3, 5, 5)
    single = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), scores[1, 2])
    torch.testing.assert_close(jacobian[1, 2], single)


@pytest.mark.parametrize("num_keys", [1, 2, 5, 16])
def test_softmax_jacobian_norm_limits(num_keys):
    uniform = torch.full((num_keys,), 1 / num_keys, dtype=torch.float64)
    expected = math.sqrt(num_keys - 1) / num_keys
    assert softmax_jacobian_norm(uniform).item() == pytest.approx(expected)
    one_hot = F.one_hot(torch.tensor(0), num_keys).double()
    assert softmax_jacobian_norm(one_hot).item() == 0.0


def test_softmax_jacobian_norm_shrinks_as_scores_spread():
    scores = torch.tensor([1.0, 0.0, -0.5, 0.3])
    norms = [
        softmax_jacobian_norm(torch.softmax(scale * scores, -1)).item() for scale in [1, 4, 16, 64]
    ]
    assert all(a > b for a, b in zip(norms, norms[1:]))
    assert norms[-1] < 1e-10


# --- temperature and hardmax -----------------------------------------------------------------


def test_temperature_one_is_softmax_and_sqrt_d_is_scaled_dot_product():
    torch.manual_seed(0)
    queries, keys = torch.randn(3, 16), torch.randn(5, 16)
    scores = queries @ keys.T
    torch.testing.assert_close(softmax_with_temperature(scores, 1.0), torch.softmax(scores, -1))
    expected = torch.softmax(scores / math.sqrt(16), dim=-1)  # scaled dot product, D = 16
    torch.testing.assert_close(softmax_with_temperature(scores, 4.0), expected)


def test_temperature_limits():
    scores = torch.tensor([[2.0, -1.0, 0.5], [0.0, 3.0, 3.5]])
    torch.testing.assert_close(
        softmax_with_temperature(scores, math.inf), torch.full((2, 3), 1 / 3)
    )
    torch.testing.assert_close(softmax_with_temperature(scores, 0.0), hardmax(scores))
    torch.testing.assert_close(softmax_with_temperature(scores, 1e-3), hardmax(scores))
    torch.testing.assert_close(
        softmax_with_temperature(scores, 1e6), torch.full((2, 3), 1 / 3), atol=1e-5, rtol=0
    )
    assert softmax_with_temperature(scores, 0.5, dim=0).sum(dim=0).allclose(torch.ones(3))
    # scores / τ overflows float32 for a tiny τ: still the τ → 0 limit, never NaN
    torch.testing.assert_close(softmax_with_temperature(scores, 1e-40), hardmax(scores))


@given(seed=st.integers(0, 2**16))
def test_temperature_sharpens_monotonically(seed):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(8, generator=generator, dtype=torch.float64)
    temperatures = [0.1, 0.3, 1.0, 3.0, 10.0]
    peaks = [softmax_with_temperature(scores, t).max().item() for t in temperatures]
    entropies = [
        attention_entropy(softmax_with_temperature(scores, t)).item() for t in temperatures
    ]
    assert all(a >= b for a, b in zip(peaks, peaks[1:]))
    assert all(a <= b for a, b in zip(entropies, entropies[1:]))


@pytest.mark.parametrize("temperature", [-1.0, math.nan, "1", True, None])
def test_temperature_rejects_bad_values(temperature):
    with pytest.raises(ValueError, match="temperature must be a number >= 0"):
        softmax_with_temperature(torch.zeros(3), temperature)


@given(seed=st.integers(0, 2**16), num_keys=st.integers(1, 9))
def test_hardmax_is_one_hot_argmax(seed, num_keys):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(4, num_keys, generator=generator)
    expected = F.one_hot(scores.argmax(dim=-1), num_keys).to(scores.dtype)
    assert torch.equal(hardmax(scores), expected)
    assert torch.equal(hardmax(scores.T, dim=0), expected.T)


def test_hardmax_breaks_ties_to_the_first_and_has_no_gradient():
    scores = torch.tensor([1.0, 3.0, 3.0, 0.0], requires_grad=True)
    weights = hardmax(scores)
    assert weights.tolist() == [0.0, 1.0, 0.0, 0.0]
    assert not weights.requires_grad  # nothing flows back to the scores


def test_hardmax_rejects_integer_scores():
    with pytest.raises(ValueError, match="scores must be a floating-point tensor"):
        hardmax(torch.tensor([1, 2, 3]))


# --- the √D experiments ------------------------------------------------------------------


def test_dot_product_variance_grows_like_d():
    dims = [4, 64, 1024]
    variances = dot_product_variance(dims, num_pairs=4000, seed=1)
    for d, variance in zip(dims, variances):
        assert variance == pytest.approx(d, rel=0.12)
    scaled = dot_product_variance(dims, num_pairs=4000, seed=1, scaled=True)
    for d, variance, scaled_variance in zip(dims, variances, scaled):
        assert scaled_variance == pytest.approx(variance / d)
        assert scaled_variance == pytest.approx(1.0, rel=0.12)


def test_dot_product_variance_is_reproducible():
    assert dot_product_variance([8, 16], 100, seed=3) == dot_product_variance([8, 16], 100, seed=3)
    assert dot_product_variance([8], 100, seed=3) != dot_product_variance([8], 100, seed=4)


@pytest.mark.parametrize(
    "dims, num_pairs, match",
    [
        ([], 10, "dims must be a non-empty sequence"),
        ([4, 0], 10, "every entry of dims must be a positive integer"),
        (4, 10, "dims must be a non-empty sequence"),
        ([4], 1, "num_pairs must be at least 2"),
        ([4], 2.5, "num_pairs must be a positive integer"),
    ],
)
def test_dot_product_variance_rejects_bad_arguments(dims, num_pairs, match):
    with pytest.raises(ValueError, match=match):
        dot_product_variance(dims, num_pairs)


def test_softmax_saturation_without_and_with_scaling():
    dims = [4, 64, 1024]
    raw = softmax_saturation(dims, num_queries=300, num_keys=16, seed=0)
    scaled = softmax_saturation(dims, num_queries=300, num_keys=16, seed=0, scaled=True)
    assert [row.dim for row in raw] == dims and isinstance(raw[0], SaturationRow)
    for row in raw + scaled:
        assert 1 / 16 <= row.max_weight <= 1
        assert 0 <= row.entropy <= math.log(16) + 1e-6
        assert 0 <= row.median_jacobian_norm <= 0.5  # two keys sharing 1/2 each is the max
    # without scaling: the scores spread like √D and the softmax saturates
    assert [round(r.score_std / math.sqrt(r.dim), 1) for r in raw] == [1.0, 1.0, 1.0]
    assert raw[0].entropy > raw[1].entropy > raw[2].entropy
    assert raw[2].median_jacobian_norm < 1e-3 * scaled[2].median_jacobian_norm
    # with scaling: the same distribution of weights whatever D
    entropies = [row.entropy for row in scaled]
    assert max(entropies) - min(entropies) < 0.1
    assert all(abs(row.score_std - 1) < 0.1 for row in scaled)


def test_softmax_saturation_query_gradient_matches_autograd():
    """The median |dL/dq| equals autograd's, for L = ½|αᵀV − y|² with the documented draws."""
    for scaled in (False, True):
        (row,) = softmax_saturation([8], num_queries=50, num_keys=5, seed=3, scaled=scaled)
        generator = torch.Generator().manual_seed(3)
        queries = torch.randn(50, 1, 8, generator=generator)
        keys = torch.randn(50, 5, 8, generator=generator)
        loss_generator = torch.Generator().manual_seed(4)
        values = torch.randn(50, 5, 16, generator=loss_generator).double()
        targets = torch.randn(50, 16, generator=loss_generator).double()
        q = queries.double().requires_grad_()
        scores = (q * keys.double()).sum(dim=-1) / (math.sqrt(8) if scaled else 1.0)
        outputs = (torch.softmax(scores, dim=-1).unsqueeze(-1) * values).sum(dim=-2)
        (0.5 * ((outputs - targets) ** 2).sum()).backward()
        expected = q.grad.norm(dim=(-2, -1)).median().item()
        # the helper forms the scores in float32 and the rest in float64
        assert row.median_query_gradient_norm == pytest.approx(expected, rel=1e-6)


def test_query_gradient_of_unscaled_scores_is_larger_at_small_d_and_vanishes_at_large_d():
    dims = [16, 1024]
    raw = softmax_saturation(dims, num_queries=300, seed=0)
    scaled = softmax_saturation(dims, num_queries=300, seed=0, scaled=True)
    assert raw[0].median_query_gradient_norm > 2 * scaled[0].median_query_gradient_norm
    assert raw[1].median_query_gradient_norm < 1e-2 * scaled[1].median_query_gradient_norm


def test_matched_source_weight_saturates_with_sqrt_d_not_with_d():
    dims = [4, 64, 1024]
    by_sqrt_d = matched_source_weight(dims, exponent=0.5, num_queries=300, seed=1)
    by_d = matched_source_weight(dims, exponent=1.0, num_queries=300, seed=1)
    assert by_sqrt_d[0] < by_sqrt_d[1] < by_sqrt_d[2] and by_sqrt_d[2] > 0.999
    # q·k/d → 1 for the source and → 0 for the others: e / (e + 7) for 8 keys
    assert by_d[2] == pytest.approx(math.e / (math.e + 7), abs=0.02)
    # exponent 0 with a single key: all the weight, whatever the noise
    assert matched_source_weight([3], exponent=0.0, num_keys=1, noise=2.0) == [1.0]


def test_matched_source_weight_equals_a_direct_computation():
    generator = torch.Generator().manual_seed(5)
    keys = torch.randn(20, 6, 9, generator=generator, dtype=torch.float64)
    queries = keys[:, 0] + 0.3 * torch.randn(20, 9, generator=generator, dtype=torch.float64)
    scores = torch.einsum("qkd,qd->qk", keys, queries) / 9**0.5
    expected = torch.softmax(scores, dim=-1)[:, 0].mean().item()
    (measured,) = matched_source_weight([9], noise=0.3, num_queries=20, num_keys=6, seed=5)
    assert measured == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(dims=[]), "dims must be a non-empty sequence"),
        (dict(dims=[4], noise=-1.0), "noise must be a finite number >= 0.0"),
        (dict(dims=[4], exponent=float("nan")), "exponent must be a finite real number"),
        (dict(dims=[4], num_keys=0), "num_keys must be a positive integer"),
    ],
)
def test_matched_source_weight_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        matched_source_weight(**kwargs)


def test_scorer_multiply_adds_counts_the_formulas_and_a_real_product():
    counts = scorer_multiply_adds(1024, 1024, 32, 32, 32)
    assert counts["additive"]["multiply_adds"] == 35_651_584  # 35.7 M
    assert counts["dot product"]["multiply_adds"] == 33_554_432  # 33.6 M
    assert counts["bilinear"]["multiply_adds"] == 34_603_008  # 34.6 M
    assert counts["MLP on [q; k]"]["multiply_adds"] == 2_181_038_080  # 2.18 G
    assert counts["additive"]["tanh"] == counts["additive"]["intermediate"] == 1024**2 * 32
    assert counts["dot product"]["tanh"] == 0 and counts["dot product"]["intermediate"] == 1024**2
    # the dot-product count is what a loop of multiply-adds over (Q, K, D) performs
    small = scorer_multiply_adds(3, 4, 5, 5, 2)
    assert small["dot product"]["multiply_adds"] == torch.ones(3, 4, 5).sum().item()


@pytest.mark.parametrize(
    "args, match",
    [
        ((0, 4, 5, 5, 2), "num_queries must be a positive integer"),
        ((3, 4, 5, 5, 2.5), "hidden_dim must be a positive integer"),
    ],
)
def test_scorer_multiply_adds_rejects_bad_sizes(args, match):
    with pytest.raises(ValueError, match=match):
        scorer_multiply_adds(*args)


def test_softmax_saturation_rejects_bad_sizes():
    with pytest.raises(ValueError, match="num_keys must be a positive integer"):
        softmax_saturation([4], num_keys=0)


# --- timing ---------------------------------------------------------------------------------


def test_time_scorers_times_every_scorer_at_every_length():
    shapes = []

    def record(queries, keys):
        shapes.append((tuple(queries.shape), tuple(keys.shape), torch.is_grad_enabled()))
        return queries @ keys.T

    seconds = time_scorers(
        {"dot": record, "also dot": lambda q, k: q @ k.T}, [3, 5], dim=4, repeats=2
    )
    assert set(seconds) == {"dot", "also dot"}
    assert all(len(times) == 2 and all(t >= 0 for t in times) for times in seconds.values())
    # one warm-up call and two timed calls per length, all without autograd
    assert shapes == [((3, 4), (3, 4), False)] * 3 + [((5, 4), (5, 4), False)] * 3


@pytest.mark.parametrize(
    "scorers, lengths, dim, match",
    [
        ({}, [4], 2, "scorers must be a non-empty dict"),
        ({"x": 1}, [4], 2, "scorers must be a non-empty dict"),
        ({"x": lambda q, k: q}, [], 2, "lengths must be a non-empty sequence"),
        ({"x": lambda q, k: q}, [4], 0, "dim must be a positive integer"),
    ],
)
def test_time_scorers_rejects_bad_arguments(scorers, lengths, dim, match):
    with pytest.raises(ValueError, match=match):
        time_scorers(scorers, lengths, dim)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(repeats=0), "repeats must be a positive integer"),
        (dict(seed=-1), "seed must be a non-negative integer"),
        (dict(lengths=[4, 0]), "every entry of lengths must be a positive integer"),
    ],
)
def test_time_scorers_rejects_bad_counts(kwargs, match):
    arguments = dict(scorers={"dot": lambda q, k: q @ k.T}, lengths=[4], dim=2) | kwargs
    with pytest.raises(ValueError, match=match):
        time_scorers(**arguments)


# --- new rejections ------------------------------------------------------------------------


def test_concat_mlp_rejects_leading_axes_that_do_not_broadcast_and_mixed_dtypes():
    w_1, w_2 = torch.randn(7, 6), torch.randn(7)
    with pytest.raises(ValueError, match="must broadcast"):
        concat_mlp_scores(torch.randn(2, 3, 4), torch.randn(3, 5, 2), w_1, w_2)
    with pytest.raises(ValueError, match="keys must have the dtype of queries"):
        concat_mlp_scores(torch.randn(3, 4), torch.randn(5, 2).double(), w_1, w_2)


def test_concat_mlp_handles_zero_queries_and_keys():
    w_1, w_2 = torch.randn(7, 6), torch.randn(7)
    assert concat_mlp_scores(torch.randn(0, 4), torch.randn(5, 2), w_1, w_2).shape == (0, 5)
    assert concat_mlp_scores(torch.randn(3, 4), torch.randn(0, 2), w_1, w_2).shape == (3, 0)


@pytest.mark.parametrize(
    "weights, match",
    [
        ([0.5, 0.5], "weights must be a torch.Tensor"),
        (torch.tensor(1.0), "weights must have shape"),
        (torch.tensor([0, 1]), "weights must be a floating-point tensor"),
    ],
)
def test_softmax_jacobian_rejects_bad_weights(weights, match):
    with pytest.raises(ValueError, match=match):
        softmax_jacobian(weights)
    with pytest.raises(ValueError, match=match):
        softmax_jacobian_norm(weights)


@pytest.mark.parametrize(
    "scores, dim, match",
    [
        ([1.0, 2.0], -1, "scores must be a torch.Tensor"),
        (torch.tensor(1.0), -1, "scores must have shape"),
        (torch.tensor([1, 2]), -1, "scores must be a floating-point tensor"),
        (torch.zeros(2, 3), 2, "dim must be an axis of scores"),
        (torch.zeros(2, 3), -3, "dim must be an axis of scores"),
        (torch.zeros(2, 3), True, "dim must be an axis of scores"),
    ],
)
def test_temperature_and_hardmax_reject_bad_scores_and_axes(scores, dim, match):
    with pytest.raises(ValueError, match=match):
        softmax_with_temperature(scores, 1.0, dim=dim)
    with pytest.raises(ValueError, match=match):
        hardmax(scores, dim=dim)


@pytest.mark.parametrize("temperature", [0.0, 0.5, math.inf])
def test_temperature_and_hardmax_of_zero_keys_are_empty(temperature):
    scores = torch.zeros(3, 0)
    assert softmax_with_temperature(scores, temperature).shape == (3, 0)
    assert hardmax(scores).shape == (3, 0)
    assert softmax_with_temperature(torch.zeros(0, 4), temperature).shape == (0, 4)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(scaled="yes"), "scaled must be True or False"),
        (dict(seed=-1), "seed must be a non-negative integer"),
        (dict(seed=0.5), "seed must be a non-negative integer"),
    ],
)
def test_experiments_reject_bad_flags_and_seeds(kwargs, match):
    with pytest.raises(ValueError, match=match):
        dot_product_variance([4], 10, **kwargs)
    with pytest.raises(ValueError, match=match):
        softmax_saturation([4], num_queries=4, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(dims=[]), "dims must be a non-empty sequence"),
        (dict(dims=[4, -1]), "every entry of dims must be a positive integer"),
        (dict(dims=[4], num_queries=0), "num_queries must be a positive integer"),
    ],
)
def test_softmax_saturation_rejects_bad_dims_and_counts(kwargs, match):
    with pytest.raises(ValueError, match=match):
        softmax_saturation(**kwargs)
