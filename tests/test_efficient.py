"""helpers.efficient: online softmax, naive and tiled attention vs SDPA and the core,
and linear attention."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.nn import functional as F

from helpers.attention import scaled_dot_product_attention
from helpers.efficient import (
    OnlineSoftmaxState,
    elu_feature_map,
    linear_attention,
    naive_attention,
    online_softmax,
    online_softmax_update,
    taylor_feature_map,
    tiled_attention,
)
from helpers.masks import causal_mask

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


def close(actual, expected, dtype=torch.float32):
    torch.testing.assert_close(actual, expected, atol=TOL[dtype], rtol=TOL[dtype])


# ---------------------------------------------------------------- online softmax
@given(
    rows=st.integers(1, 4),
    cols=st.integers(1, 40),
    block=st.integers(1, 50),
    spread=st.sampled_from([1.0, 30.0, 1e4]),
    seed=st.integers(0, 2**16),
)
def test_online_softmax_equals_softmax(rows, cols, block, spread, seed):
    gen = torch.Generator().manual_seed(seed)
    scores = (torch.rand(rows, cols, generator=gen, dtype=torch.float64) * 2 - 1) * spread
    close(online_softmax(scores, block_size=block), torch.softmax(scores, -1), torch.float64)


def test_online_softmax_large_scores_float32_and_dim():
    scores = torch.tensor([[1e4, 1e4 - 1, -1e4, 0.0], [-1e4, -1e4 + 2, -1e4 + 1, -1e4]])
    close(online_softmax(scores, block_size=1), torch.softmax(scores, -1))
    x = torch.randn(3, 5, 7, generator=torch.Generator().manual_seed(0))
    close(online_softmax(x, dim=1, block_size=2), torch.softmax(x, dim=1))


def test_online_softmax_neg_inf_entries_and_rows():
    inf = float("inf")
    scores = torch.tensor(
        [[0.5, -inf, 2.0, -inf], [-inf, -inf, -inf, -inf], [-inf, -inf, -inf, 3.0]]
    )
    weights = online_softmax(scores, block_size=2)
    assert not weights.isnan().any()
    close(weights[0], torch.softmax(scores[0], -1))
    assert torch.equal(weights[1], torch.zeros(4))  # all -inf: zeros, not NaN
    assert torch.equal(weights[2], torch.tensor([0.0, 0.0, 0.0, 1.0]))


def test_online_softmax_state_streaming():
    scores = torch.randn(2, 3, 10, generator=torch.Generator().manual_seed(1))
    state = OnlineSoftmaxState.empty((2, 3, 1))
    for block in scores.split(3, dim=-1):
        state = online_softmax_update(state, block)
    close(state.max, scores.amax(-1, keepdim=True))
    close(state.sum, torch.exp(scores - state.max).sum(-1, keepdim=True))


# ---------------------------------------------------------------- tiled attention vs SDPA
def qkv(shape_q, shape_k, dv, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(*shape_q, generator=gen, dtype=dtype)
    k = torch.randn(*shape_k, generator=gen, dtype=dtype)
    v = torch.randn(*shape_k[:-1], dv, generator=gen, dtype=dtype)
    return q, k, v


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("num_queries,num_keys", [(37, 37), (20, 45), (45, 20), (1, 9)])
@pytest.mark.parametrize("query_block_size", [None, 8])
def test_tiled_and_naive_equal_sdpa(dtype, is_causal, num_queries, num_keys, query_block_size):
    q, k, v = qkv((2, 3, num_queries, 8), (2, 3, num_keys, 8), 5, dtype)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    out = tiled_attention(
        q, k, v, is_causal=is_causal, block_size=7, query_block_size=query_block_size
    )
    assert out.shape == (2, 3, num_queries, 5)
    close(out, expected, dtype)
    close(naive_attention(q, k, v, is_causal=is_causal), expected, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tiled_with_bool_mask_and_fully_masked_rows(dtype):
    q, k, v = qkv((2, 4, 30, 16), (2, 4, 50, 16), 16, dtype, seed=3)
    mask = torch.rand(2, 1, 30, 50, generator=torch.Generator().manual_seed(4)) > 0.6
    mask[0, 0, 5] = False  # query 5 of batch 0 sees no key, in every head
    mask[1, 0, :, 40:] = False
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.equal(expected[0, :, 5], torch.zeros(4, 16, dtype=dtype))  # SDPA: zeros too
    for query_block_size in (None, 7):
        out = tiled_attention(q, k, v, mask=mask, block_size=16, query_block_size=query_block_size)
        close(out, expected, dtype)
        assert torch.equal(out[0, :, 5], torch.zeros(4, 16, dtype=dtype))
    close(naive_attention(q, k, v, mask=mask), expected, dtype)


def test_tiled_mask_and_causal_combined_and_broadcast_leading_axes():
    q, k, v = qkv((3, 12, 8), (1, 12, 8), 4)  # k, v broadcast over the batch
    mask = torch.rand(12, 12, generator=torch.Generator().manual_seed(5)) > 0.3
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask & causal_mask(12))
    close(tiled_attention(q, k, v, mask=mask, is_causal=True, block_size=5), expected)
    close(naive_attention(q, k, v, mask=mask, is_causal=True), expected)


@given(
    num_queries=st.integers(1, 20),
    num_keys=st.integers(1, 20),
    dim=st.integers(1, 6),
    block=st.integers(1, 25),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_tiled_property(num_queries, num_keys, dim, block, causal, seed):
    q, k, v = qkv((2, num_queries, dim), (2, num_keys, dim), 3, torch.float64, seed)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    close(tiled_attention(q, k, v, is_causal=causal, block_size=block), expected, torch.float64)


def test_tiled_gradients_match_sdpa():
    q, k, v = (t.requires_grad_() for t in qkv((2, 10, 4), (2, 13, 4), 3, torch.float64))
    grads = torch.autograd.grad(tiled_attention(q, k, v, block_size=4).sum(), (q, k, v))
    expected = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v).sum(), (q, k, v))
    for g, e in zip(grads, expected):
        close(g, e, torch.float64)


def test_tiled_gradients_stay_finite_and_match_sdpa_with_a_fully_masked_query():
    # A query that sees no key must not poison the gradients (0/0 in the discarded branch).
    q, k, v = (t.requires_grad_() for t in qkv((2, 6, 4), (2, 7, 4), 3, torch.float64, seed=8))
    mask = torch.ones(6, 7, dtype=torch.bool)
    mask[2] = False
    grads = torch.autograd.grad(tiled_attention(q, k, v, mask=mask, block_size=3).sum(), (q, k, v))
    expected = torch.autograd.grad(
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum(), (q, k, v)
    )
    for g, e in zip(grads, expected):
        assert torch.isfinite(g).all()
        close(g, e, torch.float64)


# ---------------------------------------------------------------- linear attention
def explicit_kernel_attention(q, k, v, causal):
    similarity = elu_feature_map(q) @ elu_feature_map(k).transpose(-2, -1)  # (…, Q, K)
    if causal:
        similarity = similarity * causal_mask(q.shape[-2], k.shape[-2])
    return similarity @ v / similarity.sum(dim=-1, keepdim=True)


@pytest.mark.parametrize("causal", [False, True])
def test_linear_attention_equals_explicit_form(causal):
    q, k, v = qkv((2, 3, 11, 6), (2, 3, 11, 6), 5, torch.float64)
    close(
        linear_attention(q, k, v, is_causal=causal),
        explicit_kernel_attention(q, k, v, causal),
        torch.float64,
    )


def test_linear_attention_cross_and_errors():
    q, k, v = qkv((2, 4, 6), (2, 9, 6), 3)
    close(linear_attention(q, k, v), explicit_kernel_attention(q, k, v, False))
    with pytest.raises(ValueError, match="Q == K"):
        linear_attention(q, k, v, is_causal=True)


# ---------------------------------------------------------------- the one core
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_naive_attention_is_the_core_and_tiled_equals_it(dtype):
    q, k, v = qkv((2, 3, 9, 8), (2, 3, 11, 8), 5, dtype, seed=11)
    mask = torch.rand(2, 1, 9, 11, generator=torch.Generator().manual_seed(12)) > 0.4
    mask[1, 0, 3] = False  # a query with no key
    for kwargs in (dict(), dict(mask=mask), dict(scale=0.3), dict(mask=mask, scale=1.0)):
        expected, _ = scaled_dot_product_attention(
            q, k, v, kwargs.get("mask"), scale=kwargs.get("scale")
        )
        assert torch.equal(naive_attention(q, k, v, **kwargs), expected)
        close(tiled_attention(q, k, v, block_size=4, **kwargs), expected, dtype)
    expected, _ = scaled_dot_product_attention(q, k, v, causal_mask(9, 11))
    assert torch.equal(naive_attention(q, k, v, is_causal=True), expected)
    close(tiled_attention(q, k, v, is_causal=True, block_size=4), expected, dtype)


# ---------------------------------------------------------------- bad inputs and empty axes
@pytest.mark.parametrize(
    "num_queries, num_keys, dim, dv", [(0, 5, 4, 3), (4, 0, 4, 3), (4, 5, 0, 3), (4, 5, 4, 0)]
)
def test_empty_axes_match_the_core(num_queries, num_keys, dim, dv):
    q, k, v = qkv((2, num_queries, dim), (2, num_keys, dim), dv, torch.float64)
    for is_causal in (False, True):
        mask = causal_mask(num_queries, num_keys) if is_causal else None
        expected, _ = scaled_dot_product_attention(q, k, v, mask)  # no key: zeros
        assert expected.shape == (2, num_queries, dv)
        for out in (
            naive_attention(q, k, v, is_causal=is_causal),
            tiled_attention(q, k, v, is_causal=is_causal, block_size=2),
        ):
            assert out.shape == expected.shape and not out.isnan().any()
            close(out, expected, torch.float64)
    out = linear_attention(q, k, v)
    assert out.shape == (2, num_queries, dv) and not out.isnan().any()


def test_linear_attention_without_keys_is_zero_not_nan():
    q, k, v = qkv((2, 4, 6), (2, 0, 6), 3)
    assert torch.equal(linear_attention(q, k, v), torch.zeros(2, 4, 3))
    q, k, v = qkv((2, 0, 6), (2, 0, 6), 3)
    assert linear_attention(q, k, v, is_causal=True).shape == (2, 0, 3)


def test_taylor_feature_map_is_the_second_order_taylor_kernel():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 7, 5, generator=gen, dtype=torch.float64) for _ in range(3))
    phi_q, phi_k = taylor_feature_map(q), taylor_feature_map(k)
    assert phi_q.shape == (2, 7, 1 + 5 + 25)
    s = q @ k.transpose(-2, -1) / math.sqrt(5)  # (B, Q, K)
    close(phi_q @ phi_k.transpose(-2, -1), 1 + s + s**2 / 2, torch.float64)
    assert bool(phi_q.min() < 0)  # negative features, yet linear_attention accepts the map
    similarity = 1 + s + s**2 / 2
    close(
        linear_attention(q, k, v, feature_map=taylor_feature_map),
        similarity @ v / similarity.sum(-1, keepdim=True),
        torch.float64,
    )
    masked = similarity * causal_mask(7)
    close(
        linear_attention(q, k, v, feature_map=taylor_feature_map, is_causal=True),
        masked @ v / masked.sum(-1, keepdim=True),
        torch.float64,
    )
    with pytest.raises(ValueError, match="x must be a floating-point tensor"):
        taylor_feature_map(torch.arange(3))


def test_online_softmax_empty_axes():
    assert online_softmax(torch.zeros(3, 0)).shape == (3, 0)
    assert online_softmax(torch.zeros(0, 4)).shape == (0, 4)
    state = OnlineSoftmaxState.empty((2, 1))
    same = online_softmax_update(state, torch.zeros(2, 0))  # an empty block changes nothing
    assert torch.equal(same.max, state.max) and torch.equal(same.sum, state.sum)
