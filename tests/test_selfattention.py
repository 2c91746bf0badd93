"""Unit, parity and property tests for helpers.selfattention."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from helpers.attention import scaled_dot_product_attention
from helpers.selfattention import (SelfAttention, adjacency_mask, band_mask, grid_mask,
                                   image_to_patches, loglog_slope, patches_to_image,
                                   reachable, time_call, windowed_attention)


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


def test_self_attention_rejects_bad_input():
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, 4\).*got \(3, 5\)"):
        SelfAttention(4)(torch.randn(3, 5))
    with pytest.raises(ValueError, match="d_model must be an integer >= 1, got 0"):
        SelfAttention(0)


# ---------------------------------------------------------------- band_mask
def test_band_mask_small_example():
    expected = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]).bool()
    assert torch.equal(band_mask(4, 1), expected)
    assert torch.equal(band_mask(3, 0), torch.eye(3, dtype=torch.bool))
    assert band_mask(4, 3).all() and band_mask(4, 10).all()
    assert band_mask(2, 1, num_keys=4).shape == (2, 4)


@given(st.integers(0, 12), st.integers(0, 12), st.integers(0, 12))
def test_band_mask_matches_a_loop(num_queries, num_keys, window):
    mask = band_mask(num_queries, window, num_keys)
    for i in range(num_queries):
        for j in range(num_keys):
            assert bool(mask[i, j]) == (abs(i - j) <= window)


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(num_queries=3, window=-1), "window must be an integer >= 0, got -1"),
    (dict(num_queries=3, window=1.5), "window must be an integer >= 0, got 1.5"),
    (dict(num_queries=-2, window=1), "num_queries must be an integer >= 0, got -2"),
    (dict(num_queries=2, window=1, num_keys=True), "num_keys must be an integer"),
])
def test_band_mask_rejects_bad_sizes(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        band_mask(**kwargs)


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


def test_windowed_attention_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="same T positions"):
        windowed_attention(torch.randn(4, 2), torch.randn(5, 2), torch.randn(5, 2), 1)
    with pytest.raises(ValueError, match="window must be an integer >= 0"):
        windowed_attention(torch.randn(4, 2), torch.randn(4, 2), torch.randn(4, 2), -1)


# ---------------------------------------------------------------- grid_mask
@pytest.mark.parametrize("height, width, radius", [(4, 4, 1), (3, 5, 1), (5, 4, 2), (2, 2, 0)])
def test_grid_mask_is_the_receptive_field_of_a_convolution(height, width, radius):
    # Put a 1 at pixel j, convolve with an all-ones (2r+1)^2 kernel: the pixels that light up
    # are exactly those whose receptive field contains j.
    size = 2 * radius + 1
    n = height * width
    one_hot = torch.eye(n).reshape(n, 1, height, width)
    spread = F.conv2d(one_hot, torch.ones(1, 1, size, size), padding=radius)  # (N, 1, H, W)
    expected = (spread.reshape(n, n) > 0).T  # row i: the inputs output i reads
    assert torch.equal(grid_mask(height, width, radius), expected)


def test_grid_mask_counts():
    mask = grid_mask(4, 4)
    assert mask.sum(dim=1).tolist() == [4, 6, 6, 4, 6, 9, 9, 6, 6, 9, 9, 6, 4, 6, 6, 4]
    assert torch.equal(mask, mask.T)
    with pytest.raises(ValueError, match="height must be an integer >= 1, got 0"):
        grid_mask(0, 3)


# ---------------------------------------------------------------- adjacency_mask
def test_adjacency_mask_undirected_with_self_loops():
    mask = adjacency_mask([(0, 1), (1, 2)], 4)
    expected = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 1]]).bool()
    assert torch.equal(mask, expected)


def test_adjacency_mask_directed_and_without_self_loops():
    mask = adjacency_mask(torch.tensor([[0, 1], [2, 1]]), 3, self_loops=False, directed=True)
    expected = torch.tensor([[0, 1, 0], [0, 0, 0], [0, 1, 0]]).bool()
    assert torch.equal(mask, expected)
    assert torch.equal(adjacency_mask([], 2), torch.eye(2, dtype=torch.bool))


def test_adjacency_mask_rejects_unknown_nodes():
    with pytest.raises(ValueError, match=r"node indices in \[0, 3\), got indices from 0 to 3"):
        adjacency_mask([(0, 3)], 3)


@pytest.mark.parametrize("edges", [torch.tensor([[0, 1, 2], [1, 2, 3]]),  # (2, E): edges.T
                                   torch.tensor([0, 1, 1, 2]), [(0, 1, 2)]])
def test_adjacency_mask_refuses_what_is_not_a_list_of_pairs(edges):
    with pytest.raises(ValueError, match=r"edges must be pairs \(i, j\)"):
        adjacency_mask(edges, 4)


# ---------------------------------------------------------------- patches
def test_image_to_patches_order_and_roundtrip():
    image = torch.arange(2 * 4 * 6, dtype=torch.float32).reshape(2, 4, 6)  # (C, H, W)
    patches = image_to_patches(image, 2)
    assert patches.shape == (6, 8)
    # patch 4 is row 1, column 1: pixels (2..3, 2..3), channel values of a pixel together
    expected = torch.stack([image[:, r, c] for r in (2, 3) for c in (2, 3)]).reshape(-1)
    torch.testing.assert_close(patches[4], expected)
    torch.testing.assert_close(patches_to_image(patches, 2, 4, 6), image)


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3))
def test_image_to_patches_matches_unfold(channels, patch, rows, cols):
    torch.manual_seed(0)
    images = torch.randn(2, channels, rows * patch, cols * patch)
    patches = image_to_patches(images, patch)  # (B, N, P*P*C)
    unfolded = F.unfold(images, patch, stride=patch).transpose(1, 2)  # (B, N, C*P*P)
    reordered = unfolded.reshape(2, rows * cols, channels, patch * patch).transpose(2, 3)
    torch.testing.assert_close(patches, reordered.reshape(2, rows * cols, -1))
    torch.testing.assert_close(patches_to_image(patches, patch, rows * patch, cols * patch),
                               images)


def test_patches_reject_bad_sizes():
    with pytest.raises(ValueError, match="multiples of patch_size=4, got H=6, W=8"):
        image_to_patches(torch.randn(3, 6, 8), 4)
    with pytest.raises(ValueError, match=r"image must have shape \(C, H, W\)"):
        image_to_patches(torch.randn(6, 8), 2)
    with pytest.raises(ValueError, match="N=4"):
        patches_to_image(torch.randn(5, 12), 2, 4, 4)


# ---------------------------------------------------------------- reachable
def test_reachable_is_a_boolean_matrix_power():
    step = band_mask(9, 1)
    for layers in range(1, 6):
        expected = torch.linalg.matrix_power(step.double(), layers) > 0
        assert torch.equal(reachable([step] * layers), expected)
        assert torch.equal(reachable([step] * layers), band_mask(9, layers))


def test_reachable_rejects_bad_masks():
    with pytest.raises(ValueError, match="at least one"):
        reachable([])
    with pytest.raises(ValueError, match=r"masks\[1\] must be a 2-D bool tensor"):
        reachable([band_mask(3, 1), torch.ones(3, 3)])


# ---------------------------------------------------------------- timing
def test_time_call_and_loglog_slope():
    calls = []
    seconds = time_call(lambda: calls.append(1), repeats=3, warmup=2)
    assert len(calls) == 5 and 0 <= seconds < 1
    sizes = [10, 100, 1000]
    assert math.isclose(loglog_slope(sizes, [3e-6 * n ** 2 for n in sizes]), 2.0)
    assert math.isclose(loglog_slope(sizes, [5e-3 * n for n in sizes]), 1.0)
    with pytest.raises(ValueError, match="positive"):
        loglog_slope([1, 2], [0.0, 1.0])
    with pytest.raises(ValueError, match="same length"):
        loglog_slope([1, 2, 3], [1.0, 2.0])
