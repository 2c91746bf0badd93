"""Unit, parity and property tests for helpers.selfattention.

The structured masks (band, grid, graph, reachable) are tested in test_masks.py, the
patches in test_images.py and the timing helpers with helpers.measure.
"""

import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from helpers.attention import scaled_dot_product_attention
from helpers.masks import band_mask, causal_mask
from helpers.selfattention import SelfAttention, windowed_attention


# ---------------------------------------------------------------- SelfAttention
def test_self_attention_matches_the_formula_and_torch():
    torch.manual_seed(0)
    layer = SelfAttention(8, d_k=4, d_v=6)
    x = torch.randn(2, 5, 8)
    out, weights = layer(x)
    q, k, v = x @ layer.w_q.weight.T, x @ layer.w_k.weight.T, x @ layer.w_v.weight.T
    expected_weights = torch.softmax(q @ k.transpose(1, 2) / 2.0, dim=-1)
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(out, expected_weights @ v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))
    assert out.shape == (2, 5, 6) and weights.shape == (2, 5, 5)


def test_self_attention_parameter_count_is_independent_of_length():
    layer = SelfAttention(16, d_k=8)
    assert sum(p.numel() for p in layer.parameters()) == 16 * (8 + 8 + 16)
    for length in (1, 7, 50):
        out, _ = layer(torch.randn(length, 16))
        assert out.shape == (length, 16)


def test_self_attention_with_a_mask_and_no_positions():
    torch.manual_seed(2)
    layer = SelfAttention(4)
    x = torch.randn(2, 5, 4)
    _, weights = layer(x, causal_mask(5))
    assert torch.all(weights[:, causal_mask(5).logical_not()] == 0)
    out, weights = layer(torch.randn(0, 4))  # T = 0: empty, as PyTorch gives
    assert out.shape == (0, 4) and weights.shape == (0, 0)


@given(st.integers(1, 7), st.integers(0, 1000))
def test_self_attention_is_permutation_equivariant(length, seed):
    torch.manual_seed(seed)
    layer = SelfAttention(4)
    x = torch.randn(length, 4)
    perm = torch.randperm(length)
    out, weights = layer(x)
    out_perm, weights_perm = layer(x[perm])
    torch.testing.assert_close(out_perm, out[perm])
    torch.testing.assert_close(weights_perm, weights[perm][:, perm])


def test_self_attention_in_float64():
    layer = SelfAttention(4).double()
    out, weights = layer(torch.randn(3, 4, dtype=torch.float64))
    assert out.dtype == weights.dtype == torch.float64


# ---------------------------------------------------------------- windowed_attention
@given(st.integers(1, 10), st.integers(0, 12), st.integers(0, 1000))
def test_windowed_attention_equals_masked_full_attention(length, window, seed):
    torch.manual_seed(seed)
    q, k, v = torch.randn(2, length, 3), torch.randn(2, length, 3), torch.randn(2, length, 5)
    out, band = windowed_attention(q, k, v, window)
    expected, weights = scaled_dot_product_attention(q, k, v, band_mask(length, window))
    torch.testing.assert_close(out, expected)
    w = min(window, length - 1)
    assert band.shape == (2, length, 2 * w + 1)
    dense = torch.zeros(2, length, length)
    for i in range(length):
        for c in range(2 * w + 1):
            j = i - w + c
            if 0 <= j < length:
                dense[:, i, j] = band[:, i, c]
            else:
                assert (band[:, i, c] == 0).all()
    torch.testing.assert_close(dense, weights)


def test_windowed_attention_matches_torch_with_a_band_mask_and_heads():
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 3, 9, 4) for _ in range(3))
    out, _ = windowed_attention(q, k, v, 2)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=band_mask(9, 2))
    torch.testing.assert_close(out, expected)


def test_windowed_attention_broadcasts_leading_axes():
    torch.manual_seed(3)
    q = torch.randn(2, 1, 6, 4)  # (B, 1, T, D) against (B, H, T, D) keys and values
    k, v = torch.randn(2, 3, 6, 4), torch.randn(2, 3, 6, 5)
    out, _ = windowed_attention(q, k, v, 1)
    expected, _ = scaled_dot_product_attention(q, k, v, band_mask(6, 1))
    torch.testing.assert_close(out, expected)


def test_windowed_attention_of_no_positions_is_empty():
    """Regression: T = 0 failed inside unfold with a RuntimeError."""
    out, band = windowed_attention(
        torch.zeros(2, 0, 3), torch.zeros(2, 0, 3), torch.zeros(2, 0, 5), 4
    )
    assert out.shape == (2, 0, 5) and band.shape == (2, 0, 1)


def test_windowed_attention_with_no_features_is_uniform_over_the_band():
    """Regression: D = 0 divided 0 by 0 and gave NaN; the scores are all 0 instead (as in
    scaled_dot_product_attention)."""
    out, band = windowed_attention(
        torch.zeros(3, 0), torch.zeros(3, 0), torch.tensor([[1.0], [2.0], [3.0]]), 1
    )
    expected, _ = scaled_dot_product_attention(
        torch.zeros(3, 0), torch.zeros(3, 0), torch.tensor([[1.0], [2.0], [3.0]]), band_mask(3, 1)
    )
    assert torch.isfinite(band).all()
    torch.testing.assert_close(out, expected)
