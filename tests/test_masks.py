"""Unit, parity and property tests for helpers.masks (True = may attend, everywhere)."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from helpers.attention import scaled_dot_product_attention
from helpers.masks import (causal_mask, from_key_padding_mask, to_additive_mask,
                           to_key_padding_mask, valid_length_mask)


# ---------------------------------------------------------------- valid_length_mask
def test_valid_length_mask_1d_gives_batch_by_keys():
    mask = valid_length_mask(torch.tensor([2, 0, 4]), num_keys=4)
    expected = torch.tensor([[True, True, False, False],
                             [False, False, False, False],
                             [True, True, True, True]])
    assert mask.dtype == torch.bool
    assert torch.equal(mask, expected)


def test_valid_length_mask_2d_gives_per_query_masks():
    valid_lens = torch.tensor([[1, 3], [0, 2]])  # (B=2, Q=2)
    mask = valid_length_mask(valid_lens, num_keys=3)
    expected = torch.tensor([[[True, False, False], [True, True, True]],
                             [[False, False, False], [True, True, False]]])
    assert mask.shape == (2, 2, 3)
    assert torch.equal(mask, expected)


def test_valid_length_mask_1d_with_num_queries_repeats_over_queries():
    mask = valid_length_mask(torch.tensor([1, 3]), num_keys=3, num_queries=4)
    assert mask.shape == (2, 4, 3)
    assert torch.equal(mask[0], torch.tensor([[True, False, False]] * 4))
    assert torch.equal(mask[1], torch.ones(4, 3, dtype=torch.bool))


def test_valid_length_mask_accepts_a_list_and_any_integer_dtype():
    for lens in ([1, 2], torch.tensor([1, 2], dtype=torch.int32),
                 torch.tensor([1, 2], dtype=torch.uint8)):
        assert torch.equal(valid_length_mask(lens, 2),
                           torch.tensor([[True, False], [True, True]]))


def test_valid_length_mask_2d_num_queries_must_match():
    with pytest.raises(ValueError, match=r"valid_lens.*num_queries=3.*\(2, 2\)"):
        valid_length_mask(torch.tensor([[1, 1], [2, 2]]), num_keys=3, num_queries=3)


@pytest.mark.parametrize("valid_lens, pattern", [
    (torch.tensor([1, -1]), r"valid_lens must be >= 0, got a length of -1"),
    (torch.tensor([1, 5]), r"valid_lens must be <= num_keys=4, got a length of 5"),
    (torch.tensor([1.0, 2.0]), r"valid_lens must have an integer dtype, got dtype torch.float32"),
    (torch.tensor([True, False]), r"valid_lens must have an integer dtype, got dtype torch.bool"),
    (torch.tensor(2), r"valid_lens must be 1-D \(B,\) or 2-D \(B, Q\), got shape \(\)"),
    (torch.ones(2, 2, 2, dtype=torch.long), r"valid_lens .* got shape \(2, 2, 2\)"),
])
def test_valid_length_mask_rejects_bad_valid_lens(valid_lens, pattern):
    with pytest.raises(ValueError, match=pattern):
        valid_length_mask(valid_lens, num_keys=4)


@pytest.mark.parametrize("num_keys", [-1, 2.0, True, "3"])
def test_valid_length_mask_rejects_bad_num_keys(num_keys):
    with pytest.raises(ValueError, match=r"num_keys must be a non-negative integer, got"):
        valid_length_mask(torch.tensor([1]), num_keys=num_keys)


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
    assert torch.equal(causal_mask(3), torch.tensor([[True, False, False],
                                                     [True, True, False],
                                                     [True, True, True]]))


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
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                               expected, atol=1e-5, rtol=1e-5)
    out, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("args, pattern", [
    ((-1,), r"num_queries must be a non-negative integer, got -1"),
    ((2.5,), r"num_queries must be a non-negative integer, got 2.5"),
    ((2, -3), r"num_keys must be a non-negative integer, got -3"),
])
def test_causal_mask_rejects_bad_sizes(args, pattern):
    with pytest.raises(ValueError, match=pattern):
        causal_mask(*args)


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


@pytest.mark.parametrize("fn, name", [(to_key_padding_mask, "mask"),
                                      (from_key_padding_mask, "key_padding_mask")])
def test_key_padding_converters_reject_bad_input(fn, name):
    with pytest.raises(ValueError, match=rf"{name} must have dtype torch.bool.*torch.int64"):
        fn(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=rf"{name} must be 2-D \(B, K\), got shape \(2, 3, 3\)"):
        fn(torch.ones(2, 3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=rf"{name} must be a torch.Tensor.*got list"):
        fn([[True, False]])


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
        q, k, v, attn_mask=to_additive_mask(mask, torch.float64))
    torch.testing.assert_close(with_additive, with_bool, atol=1e-12, rtol=1e-12)


def test_to_additive_mask_rejects_bad_input():
    with pytest.raises(ValueError, match=r"dtype must be a floating torch.dtype, got torch.int64"):
        to_additive_mask(torch.ones(2, dtype=torch.bool), torch.int64)
    with pytest.raises(ValueError, match=r"mask must have dtype torch.bool.*torch.float32"):
        to_additive_mask(torch.ones(2), torch.float32)
