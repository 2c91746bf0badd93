"""Unit, parity and property tests for helpers.masks (True = may attend, everywhere)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from helpers.attention import scaled_dot_product_attention
from helpers.masks import (
    adjacency_mask,
    band_mask,
    causal_mask,
    from_key_padding_mask,
    grid_mask,
    reachable,
    sliding_window_mask,
    to_additive_mask,
    to_key_padding_mask,
    valid_length_mask,
)


# ---------------------------------------------------------------- valid_length_mask
def test_valid_length_mask_1d_gives_batch_by_keys():
    mask = valid_length_mask(torch.tensor([2, 0, 4]), num_keys=4)
    expected = torch.tensor(
        [[True, True, False, False], [False, False, False, False], [True, True, True, True]]
    )
    assert mask.dtype == torch.bool
    assert torch.equal(mask, expected)


def test_valid_length_mask_2d_gives_per_query_masks():
    valid_lens = torch.tensor([[1, 3], [0, 2]])  # (B=2, Q=2)
    mask = valid_length_mask(valid_lens, num_keys=3)
    expected = torch.tensor(
        [[[True, False, False], [True, True, True]], [[False, False, False], [True, True, False]]]
    )
    assert mask.shape == (2, 2, 3)
    assert torch.equal(mask, expected)


def test_valid_length_mask_1d_with_num_queries_repeats_over_queries():
    mask = valid_length_mask(torch.tensor([1, 3]), num_keys=3, num_queries=4)
    assert mask.shape == (2, 4, 3)
    assert torch.equal(mask[0], torch.tensor([[True, False, False]] * 4))
    assert torch.equal(mask[1], torch.ones(4, 3, dtype=torch.bool))


def test_valid_length_mask_accepts_a_list_and_any_integer_dtype():
    for lens in (
        [1, 2],
        torch.tensor([1, 2], dtype=torch.int32),
        torch.tensor([1, 2], dtype=torch.uint8),
    ):
        assert torch.equal(valid_length_mask(lens, 2), torch.tensor([[True, False], [True, True]]))


def test_valid_length_mask_of_an_empty_batch_is_empty():
    """Regression: an empty list was read as float and refused; B = 0 is a batch too."""
    assert valid_length_mask([], num_keys=3).shape == (0, 3)
    assert valid_length_mask(torch.zeros(0, dtype=torch.long), 3, num_queries=2).shape == (0, 2, 3)
    assert valid_length_mask(torch.tensor([0, 0]), num_keys=0).shape == (2, 0)


def test_valid_length_mask_matches_multihead_attention_key_padding():
    """nn.MultiheadAttention, given the converted mask, puts zero weight on padding keys."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(3, 5, 8)
    mask = valid_length_mask(torch.tensor([5, 2, 1]), num_keys=5)  # (B, K)
    _, weights = mha(x, x, x, key_padding_mask=to_key_padding_mask(mask))  # (B, Q, K)
    assert torch.all(weights[~mask.unsqueeze(1).expand_as(weights)] == 0)
    assert torch.all(weights[mask.unsqueeze(1).expand_as(weights)] > 0)


@given(st.lists(st.integers(0, 6), min_size=1, max_size=5), st.integers(6, 9))
def test_valid_length_mask_property(lengths, num_keys):
    mask = valid_length_mask(torch.tensor(lengths), num_keys)
    assert mask.shape == (len(lengths), num_keys)
    assert mask.sum(dim=1).tolist() == lengths
    for row, length in zip(mask, lengths):  # True exactly on a prefix
        assert row[:length].all() and not row[length:].any()


# ---------------------------------------------------------------------- causal_mask
@pytest.mark.parametrize("num_queries, num_keys", [(1, 1), (4, 4), (3, 5), (5, 3), (0, 2)])
def test_causal_mask_is_top_left_tril_like_sdpa(num_queries, num_keys):
    mask = causal_mask(num_queries, num_keys)
    assert mask.dtype == torch.bool and mask.shape == (num_queries, num_keys)
    assert torch.equal(mask, torch.ones(num_queries, num_keys).tril(diagonal=0).bool())


def test_causal_mask_defaults_to_square():
    assert torch.equal(
        causal_mask(3),
        torch.tensor([[True, False, False], [True, True, False], [True, True, True]]),
    )


def test_causal_mask_hides_last_keys_when_more_keys_than_queries():
    mask = causal_mask(2, 4)  # top-left aligned, as SDPA's is_causal
    assert mask[0].tolist() == [True, False, False, False]
    assert mask[1].tolist() == [True, True, False, False]


@pytest.mark.parametrize("num_queries, num_keys", [(4, 4), (3, 6), (6, 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_causal_mask_parity_with_sdpa_is_causal(num_queries, num_keys, dtype):
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(2, 3, num_queries, 8, generator=gen, dtype=dtype)
    k = torch.randn(2, 3, num_keys, 8, generator=gen, dtype=dtype)
    v = torch.randn(2, 3, num_keys, 5, generator=gen, dtype=dtype)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    mask = causal_mask(num_queries, num_keys)
    torch.testing.assert_close(
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask), expected, atol=1e-5, rtol=1e-5
    )
    out, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_masks_accept_a_device_string_and_object():
    assert causal_mask(2, device="cpu").device.type == "cpu"
    assert band_mask(2, 0, device=torch.device("cpu")).device.type == "cpu"


@given(st.integers(0, 8), st.integers(0, 8))
def test_causal_mask_property(num_queries, num_keys):
    mask = causal_mask(num_queries, num_keys)
    for i in range(num_queries):
        for j in range(num_keys):
            assert bool(mask[i, j]) == (j <= i)


# ---------------------------------------------------------------------- converters
def test_key_padding_round_trip_and_negation():
    mask = valid_length_mask(torch.tensor([1, 3]), num_keys=3)
    padding = to_key_padding_mask(mask)
    assert torch.equal(padding, torch.tensor([[False, True, True], [False, False, False]]))
    assert torch.equal(from_key_padding_mask(padding), mask)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_to_additive_mask_values(dtype):
    additive = to_additive_mask(torch.tensor([[True, False], [False, True]]), dtype)
    assert additive.dtype == dtype
    assert additive[0, 0] == 0 and additive[1, 1] == 0
    assert additive[0, 1] == float("-inf") and additive[1, 0] == float("-inf")


def test_to_additive_mask_parity_with_bool_mask_in_sdpa():
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 4, 6, generator=gen, dtype=torch.float64) for _ in range(3))
    mask = torch.rand(2, 4, 4, generator=gen) > 0.4
    mask[..., 0] = True  # no fully masked rows: the additive form would give NaN there
    with_bool = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    with_additive = F.scaled_dot_product_attention(
        q, k, v, attn_mask=to_additive_mask(mask, torch.float64)
    )
    torch.testing.assert_close(with_additive, with_bool, atol=1e-12, rtol=1e-12)


# ---------------------------------------------------------------- band_mask
def test_band_mask_small_example():
    expected = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]).bool()
    assert torch.equal(band_mask(4, 1), expected)
    assert torch.equal(band_mask(3, 0), torch.eye(3, dtype=torch.bool))
    assert band_mask(4, 3).all() and band_mask(4, 10).all()
    assert band_mask(2, 1, num_keys=4).shape == (2, 4)
    assert band_mask(0, 2).shape == (0, 0)


@given(st.integers(0, 12), st.integers(0, 12), st.integers(0, 12))
def test_band_mask_matches_a_loop(num_queries, num_keys, window):
    mask = band_mask(num_queries, window, num_keys)
    for i in range(num_queries):
        for j in range(num_keys):
            assert bool(mask[i, j]) == (abs(i - j) <= window)


# ---------------------------------------------------------------- sliding_window_mask
def test_sliding_window_mask_small_example():
    expected = torch.tensor(
        [
            [1, 1, 1, 1, 1, 1],  # global token 0 attends to every position
            [1, 1, 1, 0, 0, 0],
            [1, 1, 1, 1, 0, 0],
            [1, 0, 1, 1, 1, 0],  # and every position attends to it
            [1, 0, 0, 1, 1, 1],
            [1, 0, 0, 0, 1, 1],
        ]
    ).bool()
    assert torch.equal(sliding_window_mask(6, 1, global_tokens=[0]), expected)
    assert torch.equal(sliding_window_mask(6, 1, global_tokens=[0], causal=True), expected.tril())
    assert torch.equal(sliding_window_mask(5, 2), band_mask(5, 2))
    assert torch.equal(sliding_window_mask(5, 2, causal=True), band_mask(5, 2) & causal_mask(5))
    assert sliding_window_mask(0, 3).shape == (0, 0)


@given(
    st.integers(1, 12),
    st.integers(0, 12),
    st.lists(st.integers(0, 11), max_size=3),
    st.booleans(),
)
def test_sliding_window_mask_matches_a_loop(length, window, global_tokens, causal):
    global_tokens = [g for g in global_tokens if g < length]
    mask = sliding_window_mask(
        length, window, global_tokens=torch.tensor(global_tokens, dtype=torch.long), causal=causal
    )
    for i in range(length):
        for j in range(length):
            allowed = abs(i - j) <= window or i in global_tokens or j in global_tokens
            assert bool(mask[i, j]) == (allowed and (j <= i or not causal))


def test_sliding_window_mask_counts_and_reach():
    length, window, num_global = 64, 4, 2
    mask = sliding_window_mask(length, window, global_tokens=range(num_global))
    band = length * (2 * window + 1) - window * (window + 1)
    union = 2 * num_global * length - num_global**2  # the global rows and columns
    assert int(mask.sum()) == band + union - num_global * (2 * window + 1)
    far = 2 * window + 1  # two windows and one apart: out of reach of a window in two layers
    assert not reachable([band_mask(length, window)] * 2)[40, 40 - far]
    assert reachable([mask] * 2)[40, 40 - far] and not mask[40, 40 - far]
    assert reachable([mask] * 2).all()  # through a global token, everything in two layers
    causal = sliding_window_mask(length, window, global_tokens=[0], causal=True)
    assert not reachable([causal] * 2)[40, 40 - far]  # token 0 sees only itself when causal


def test_sliding_window_mask_is_used_by_attention_as_a_dense_mask():
    q, k, v = torch.randn(3, 2, 10, 4, dtype=torch.float64).unbind(0)
    mask = sliding_window_mask(10, 2, global_tokens=[0, 7], causal=True)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, mask)[0], expected)


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
    with pytest.raises(ValueError, match="height must be a positive integer, got 0"):
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


def test_adjacency_mask_takes_arrays_empty_tensors_and_no_nodes():
    edges = np.array([[0, 1]])
    assert torch.equal(adjacency_mask(edges, 2), torch.ones(2, 2, dtype=torch.bool))
    assert torch.equal(
        adjacency_mask(torch.zeros(0, 2, dtype=torch.long), 2, self_loops=False),
        torch.zeros(2, 2, dtype=torch.bool),
    )
    assert adjacency_mask([], 0).shape == (0, 0)


# ---------------------------------------------------------------- reachable
def test_reachable_is_a_boolean_matrix_power():
    step = band_mask(9, 1)
    for layers in range(1, 6):
        expected = torch.linalg.matrix_power(step.double(), layers) > 0
        assert torch.equal(reachable([step] * layers), expected)
        assert torch.equal(reachable([step] * layers), band_mask(9, layers))


def test_reachable_takes_a_stacked_tensor_and_a_tuple():
    step = band_mask(5, 1)
    assert torch.equal(reachable(torch.stack([step, step])), band_mask(5, 2))
    assert torch.equal(reachable((step,)), step)
