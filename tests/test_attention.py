"""Unit, parity and property tests for helpers.attention's masked softmax and SDPA."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from helpers.attention import masked_softmax, scaled_dot_product_attention
from helpers.masks import causal_mask, valid_length_mask

DTYPES = [torch.float32, torch.float64]


def sdpa_weights(q, k, mask=None, is_causal=False):
    """PyTorch's attention weights: F.scaled_dot_product_attention with v = identity."""
    num_keys = k.shape[-2]
    eye = torch.eye(num_keys, dtype=q.dtype).expand(*k.shape[:-1], num_keys)
    return F.scaled_dot_product_attention(q, k, eye, attn_mask=mask, is_causal=is_causal)


def random_qkv(dtype, batch=2, heads=3, num_queries=4, num_keys=5, dim=8, value_dim=6, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, num_queries, dim, generator=gen, dtype=dtype)
    k = torch.randn(batch, heads, num_keys, dim, generator=gen, dtype=dtype)
    v = torch.randn(batch, heads, num_keys, value_dim, generator=gen, dtype=dtype)
    return q, k, v


# ------------------------------------------------------------------ masked_softmax
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_masked_softmax_without_mask_is_torch_softmax(dtype, dim):
    scores = torch.randn(3, 4, 5, dtype=dtype, generator=torch.Generator().manual_seed(0)) * 5
    torch.testing.assert_close(
        masked_softmax(scores, dim=dim), torch.softmax(scores, dim=dim), atol=1e-6, rtol=1e-6
    )


def test_masked_softmax_known_values():
    scores = torch.tensor([[0.0, 0.0, 100.0], [1.0, 2.0, 3.0]])
    mask = torch.tensor([[True, True, False], [True, False, True]])
    weights = masked_softmax(scores, mask)
    expected_second = torch.softmax(torch.tensor([1.0, 3.0]), dim=0)
    torch.testing.assert_close(weights[0], torch.tensor([0.5, 0.5, 0.0]))
    torch.testing.assert_close(
        weights[1], torch.tensor([expected_second[0], 0.0, expected_second[1]])
    )


def test_fully_masked_row_is_all_zero_not_uniform_not_nan():
    scores = torch.randn(2, 3, 4)
    mask = valid_length_mask(torch.tensor([0, 2]), num_keys=4).unsqueeze(1)  # (B, 1, K)
    weights = masked_softmax(scores, mask)
    assert torch.equal(weights[0], torch.zeros(3, 4))
    torch.testing.assert_close(weights[1].sum(-1), torch.ones(3))
    assert torch.equal(weights[1, :, 2:], torch.zeros(3, 2))


def test_masked_entries_are_exactly_zero_even_with_huge_scores():
    scores = torch.tensor([[1e4, -1e4, 3.0, 1e4]])
    mask = torch.tensor([[False, True, True, False]])
    weights = masked_softmax(scores, mask)
    assert weights[0, 0].item() == 0.0 and weights[0, 3].item() == 0.0
    torch.testing.assert_close(weights, torch.tensor([[0.0, 0.0, 1.0, 0.0]]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_softmax_is_stable_at_plus_minus_1e4(dtype):
    scores = torch.tensor([[1e4, 1e4 - 1.0, -1e4], [-1e4, -1e4 - 1.0, -1e4 + 1.0]], dtype=dtype)
    weights = masked_softmax(scores, torch.ones(2, 3, dtype=torch.bool))
    assert torch.isfinite(weights).all()
    e = torch.exp(torch.tensor(-1.0, dtype=dtype))
    torch.testing.assert_close(
        weights[0], torch.stack([1 / (1 + e), e / (1 + e), torch.zeros((), dtype=dtype)])
    )
    torch.testing.assert_close(
        weights[1], torch.softmax(torch.tensor([0.0, -1.0, 1.0], dtype=dtype), 0)
    )


def test_gradients_are_finite_and_zero_for_fully_masked_rows():
    scores = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    mask = valid_length_mask(torch.tensor([[0, 2, 4], [1, 0, 3]]), num_keys=4)  # (B, Q, K)
    weights = masked_softmax(scores, mask)
    (weights * torch.randn_like(weights)).sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert torch.equal(scores.grad[0, 0], torch.zeros(4, dtype=torch.float64))
    assert torch.equal(scores.grad[~mask], torch.zeros(int((~mask).sum()), dtype=torch.float64))
    assert scores.grad[0, 2].abs().sum() > 0  # the unmasked rows do get a gradient


@pytest.mark.parametrize("with_mask", [False, True])
def test_a_row_whose_allowed_scores_are_all_minus_inf_is_empty_not_nan(with_mask):
    scores = torch.tensor(
        [
            [0.5, float("-inf"), float("-inf")],
            [float("-inf"), float("-inf"), float("-inf")],
            [1.0, float("-inf"), 2.0],
        ],
        requires_grad=True,
    )
    mask = torch.tensor([[True, True, False], [True, True, True], [True, False, True]])
    weights = masked_softmax(scores, mask if with_mask else None)
    expected = torch.tensor(
        [
            [1.0, 0.0, 0.0],
            [0.0, 0.0, 0.0],
            [
                torch.tensor([1.0, 2.0]).softmax(0)[0].item(),
                0.0,
                torch.tensor([1.0, 2.0]).softmax(0)[1].item(),
            ],
        ]
    )
    torch.testing.assert_close(weights, expected)
    (grad,) = torch.autograd.grad((weights * torch.arange(3.0)).sum(), scores)
    assert torch.isfinite(grad).all()
    assert torch.equal(grad[1], torch.zeros(3))


def test_masked_softmax_needs_no_more_memory_than_a_plain_softmax():
    # Treating -inf as masked and zeroing empty rows must not keep an extra (…, Q, K) tensor
    # alive: at most a few (Q, 1) vectors (a (256, 256) bool matrix would be 64 KiB).
    from helpers.measure import peak_memory_bytes

    scores = torch.randn(256, 256, generator=torch.Generator().manual_seed(0))
    mask = torch.rand(1, 256, generator=torch.Generator().manual_seed(1)) > 0.2
    slack = 4 * 1024
    assert (
        peak_memory_bytes(masked_softmax, scores)
        <= peak_memory_bytes(torch.softmax, scores, -1) + slack
    )
    assert (
        peak_memory_bytes(masked_softmax, scores, mask)
        <= peak_memory_bytes(lambda: torch.softmax(scores.masked_fill(~mask, float("-inf")), -1))
        + slack
    )


def test_masked_softmax_equals_torch_softmax_in_value_and_gradient():
    """Where every row has a key, the same numbers as torch.softmax, gradients included."""
    scores = torch.randn(4, 6, 8, requires_grad=True)
    upstream = torch.randn(4, 6, 8)
    (masked_softmax(scores) * upstream).sum().backward()
    ours, scores.grad = scores.grad, None
    (torch.softmax(scores, -1) * upstream).sum().backward()
    assert torch.equal(masked_softmax(scores), torch.softmax(scores, -1))
    assert torch.equal(ours, scores.grad)


def test_masked_softmax_gradient_matches_gradcheck():
    scores = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, False, True, True]])
    assert torch.autograd.gradcheck(lambda s: masked_softmax(s, mask), (scores,))


@pytest.mark.parametrize("mask_shape", [(4,), (3, 4), (2, 1, 4), (2, 3, 1), (1, 1, 1)])
def test_mask_broadcasts(mask_shape):
    scores = torch.randn(2, 3, 4)
    mask = torch.rand(mask_shape, generator=torch.Generator().manual_seed(3)) > 0.3
    weights = masked_softmax(scores, mask)
    full = mask.expand(2, 3, 4)
    reference = torch.softmax(scores.masked_fill(~full, float("-inf")), dim=-1).nan_to_num(0.0)
    torch.testing.assert_close(weights, reference)


# ---------------------------------------------------------- parity with PyTorch SDPA
@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_parity_without_mask(dtype):
    q, k, v = random_qkv(dtype)
    out, weights = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, sdpa_weights(q, k), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_parity_with_bool_mask(dtype):
    q, k, v = random_qkv(dtype, seed=1)
    mask = torch.rand(2, 1, 4, 5, generator=torch.Generator().manual_seed(4)) > 0.5
    mask[..., 1] = True  # every query sees at least one key
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(weights, sdpa_weights(q, k, mask), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_queries, num_keys", [(5, 5), (3, 6), (6, 4)])
def test_sdpa_parity_with_is_causal(dtype, num_queries, num_keys):
    q, k, v = random_qkv(dtype, num_queries=num_queries, num_keys=num_keys, seed=2)
    out, weights = scaled_dot_product_attention(q, k, v, causal_mask(num_queries, num_keys))
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(weights, sdpa_weights(q, k, is_causal=True), atol=1e-5, rtol=1e-5)


def test_sdpa_parity_with_valid_lengths_and_fully_masked_query():
    q, k, v = random_qkv(torch.float64, heads=1, seed=5)
    q, k, v = q[:, 0], k[:, 0], v[:, 0]  # (B, Q, D), (B, K, D), (B, K, Dv)
    mask = valid_length_mask(torch.tensor([[5, 0, 2, 1], [3, 3, 4, 5]]), num_keys=5)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.equal(out[0, 1], torch.zeros(6, dtype=torch.float64))
    assert torch.equal(weights[0, 1], torch.zeros(5, dtype=torch.float64))
    seen = mask.any(-1)  # compare the queries that see some key
    torch.testing.assert_close(
        out[seen],
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask)[seen],
        atol=1e-10,
        rtol=1e-10,
    )


def test_sdpa_gradients_match_torch():
    q, k, v = (t.requires_grad_() for t in random_qkv(torch.float64, seed=6))
    mask = causal_mask(4, 5)
    upstream = torch.randn(2, 3, 4, 6, dtype=torch.float64)
    ours = torch.autograd.grad(
        (scaled_dot_product_attention(q, k, v, mask)[0] * upstream).sum(), (q, k, v)
    )
    theirs = torch.autograd.grad(
        (F.scaled_dot_product_attention(q, k, v, attn_mask=mask) * upstream).sum(), (q, k, v)
    )
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)


def test_sdpa_shapes_and_out_is_weights_times_values():
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 3)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 4, 3) and weights.shape == (2, 4, 7)
    torch.testing.assert_close(out, weights @ v)


def test_sdpa_broadcasts_leading_axes():
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(1, 3, 5, 8), torch.randn(5, 2)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 3, 4, 2) and weights.shape == (2, 3, 4, 5)


def test_sdpa_feature_mismatch_suggests_other_scoring():
    with pytest.raises(
        ValueError,
        match=r"q and k must have the same feature size D.*"
        r"\(2, 4, 8\).*\(2, 5, 6\).*additive or bilinear",
    ):
        scaled_dot_product_attention(
            torch.randn(2, 4, 8), torch.randn(2, 5, 6), torch.randn(2, 5, 3)
        )


# ---------------------------------------------------------------- property tests
@st.composite
def scores_and_mask(draw, low=-1e4, high=1e4):
    """Scores (B, Q, K) with finite values in [low, high], a bool mask, and a dtype."""
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 6)))
    dtype = draw(st.sampled_from(DTYPES))
    values = draw(arrays(np.float64, shape, elements=st.floats(low, high, allow_nan=False)))
    mask = draw(arrays(np.bool_, shape))
    return torch.from_numpy(values).to(dtype), torch.from_numpy(mask)


@given(scores_and_mask())
def test_property_weights_are_a_distribution_or_zero(data):
    scores, mask = data
    weights = masked_softmax(scores, mask)
    assert not torch.isnan(weights).any() and torch.isfinite(weights).all()
    assert (weights >= 0).all()
    assert torch.equal(weights[~mask], torch.zeros_like(weights[~mask]))  # exactly zero
    sums = weights.sum(-1)
    seen = mask.any(-1)
    torch.testing.assert_close(sums[seen], torch.ones_like(sums[seen]), atol=1e-5, rtol=0)
    assert torch.equal(sums[~seen], torch.zeros_like(sums[~seen]))  # exactly zero


@given(scores_and_mask())
def test_property_matches_reference_softmax_on_rows_with_keys(data):
    scores, mask = data
    weights = masked_softmax(scores, mask)
    reference = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    seen = mask.any(-1)
    torch.testing.assert_close(weights[seen], reference[seen], atol=1e-6, rtol=1e-5)


@given(scores_and_mask(), st.floats(-1e4, 1e4))
def test_property_invariant_to_adding_a_constant_to_a_row(data, constant):
    scores, mask = data
    scores = scores.to(torch.float64)  # float32 cannot hold 1e4 + c exactly
    shifted = scores.clone()
    shifted[0, 0] += constant  # one row (query) of the first example
    torch.testing.assert_close(
        masked_softmax(shifted, mask), masked_softmax(scores, mask), atol=1e-9, rtol=1e-7
    )


@given(scores_and_mask(low=-10.0, high=10.0), st.floats(-100.0, 100.0))
def test_property_shift_invariance_in_float32(data, constant):
    scores, mask = data
    scores = scores.to(torch.float32)
    torch.testing.assert_close(
        masked_softmax(scores + constant, mask), masked_softmax(scores, mask), atol=1e-4, rtol=1e-4
    )


@given(st.sampled_from([-1e4, 1e4]), scores_and_mask(low=-5.0, high=5.0))
def test_property_finite_around_plus_minus_1e4(base, data):
    scores, mask = data
    scores = (scores + base).requires_grad_()
    weights = masked_softmax(scores, mask)
    assert torch.isfinite(weights).all()
    torch.testing.assert_close(
        weights.detach(),
        masked_softmax(scores.detach() - base, mask),
        atol=1e-3 if scores.dtype == torch.float32 else 1e-9,
        rtol=0,
    )
    (weights * weights).sum().backward()
    assert torch.isfinite(scores.grad).all()


@given(scores_and_mask(low=-50.0, high=50.0))
def test_property_all_true_mask_is_plain_softmax(data):
    scores, _ = data
    all_true = torch.ones(scores.shape, dtype=torch.bool)
    torch.testing.assert_close(masked_softmax(scores, all_true), torch.softmax(scores, -1))


@given(scores_and_mask(low=-1e3, high=1e3))
def test_property_gradients_never_nan(data):
    scores, mask = data
    scores = scores.clone().requires_grad_()
    weights = masked_softmax(scores, mask)
    (weights * torch.arange(weights.numel(), dtype=weights.dtype).view_as(weights)).sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert torch.equal(scores.grad[~mask], torch.zeros_like(scores.grad[~mask]))
