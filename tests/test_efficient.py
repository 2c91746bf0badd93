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


def test_bad_inputs_raise():
    q, k, v = qkv((2, 4, 8), (2, 5, 8), 3)
    with pytest.raises(ValueError, match="q .*k"):
        tiled_attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match="mask"):
        tiled_attention(q, k, v, mask=torch.ones(4, 5))
    with pytest.raises(ValueError, match="mask of shape"):
        naive_attention(q, k, v, mask=torch.ones(3, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="block_size"):
        tiled_attention(q, k, v, block_size=0)


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
        linear_attention(q, k, v, causal=causal),
        explicit_kernel_attention(q, k, v, causal),
        torch.float64,
    )


def test_linear_attention_cross_and_errors():
    q, k, v = qkv((2, 4, 6), (2, 9, 6), 3)
    close(linear_attention(q, k, v), explicit_kernel_attention(q, k, v, False))
    with pytest.raises(ValueError, match="Q == K"):
        linear_attention(q, k, v, causal=True)


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
@pytest.mark.parametrize("fn", [naive_attention, tiled_attention, linear_attention])
def test_attention_rejects_bad_tensors(fn):
    q, k, v = qkv((2, 4, 8), (2, 5, 8), 3)
    with pytest.raises(ValueError, match="q must be a torch.Tensor"):
        fn(q.tolist(), k, v)
    with pytest.raises(ValueError, match="k must be a floating-point tensor"):
        fn(q, k.long(), v)
    with pytest.raises(ValueError, match="v must have shape"):
        fn(q, k, v[0, 0])
    with pytest.raises(ValueError, match="q, k and v must share one dtype"):
        fn(q, k, v.double())
    with pytest.raises(ValueError, match="leading .* must broadcast"):
        fn(q, k[:1].expand(3, 5, 8), v[:1].expand(3, 5, 3))


@pytest.mark.parametrize("fn", [naive_attention, tiled_attention])
def test_attention_rejects_bad_masks_and_flags(fn):
    q, k, v = qkv((2, 4, 8), (2, 5, 8), 3)
    with pytest.raises(
        ValueError,
        match=r"mask of shape \(2, 2, 4, 5\) must broadcast to the "
        r"scores' shape \(2, 4, 5\)",
    ):
        fn(q, k, v, mask=torch.ones(2, 2, 4, 5, dtype=torch.bool))  # would add an axis
    with pytest.raises(ValueError, match="mask of shape"):
        fn(q, k, v, mask=torch.ones(4, 4, dtype=torch.bool), is_causal=True)
    with pytest.raises(ValueError, match="mask must have dtype torch.bool"):
        fn(q, k, v, mask=torch.ones(4, 5))
    with pytest.raises(ValueError, match="is_causal must be True or False"):
        fn(q, k, v, is_causal="yes")
    for scale in (float("nan"), float("inf"), "0.5"):
        with pytest.raises(ValueError, match="scale must be a finite real number"):
            fn(q, k, v, scale=scale)


def test_tiled_rejects_bad_block_sizes():
    q, k, v = qkv((2, 4, 8), (2, 5, 8), 3)
    for name in ("block_size", "query_block_size"):
        for bad in (0, -2, 2.0, True):
            with pytest.raises(ValueError, match=f"{name} must be a positive integer"):
                tiled_attention(q, k, v, **{name: bad})


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
    assert linear_attention(q, k, v, causal=True).shape == (2, 0, 3)


def test_linear_attention_rejects_bad_feature_maps_and_flags():
    q, k, v = qkv((2, 4, 6), (2, 4, 6), 3)
    with pytest.raises(ValueError, match="feature_map must return non-negative features"):
        linear_attention(q, k, v, feature_map=lambda x: x)  # negative similarities
    with pytest.raises(ValueError, match="feature_map must map q"):
        linear_attention(q, k, v, feature_map=lambda x: elu_feature_map(x)[..., :1, :])
    with pytest.raises(ValueError, match="feature_map must be a callable"):
        linear_attention(q, k, v, feature_map="elu")
    with pytest.raises(ValueError, match="causal must be True or False"):
        linear_attention(q, k, v, causal=1)
    out = linear_attention(q, k, v, feature_map=torch.exp)  # any φ >= 0 works
    similarity = torch.exp(q) @ torch.exp(k).transpose(-2, -1)  # (B, Q, K)
    close(out, similarity @ v / similarity.sum(-1, keepdim=True))


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
        linear_attention(q, k, v, feature_map=taylor_feature_map, causal=True),
        masked @ v / masked.sum(-1, keepdim=True),
        torch.float64,
    )
    with pytest.raises(ValueError, match="x must be a floating-point tensor"):
        taylor_feature_map(torch.arange(3))


def test_elu_feature_map_rejects_integers():
    assert torch.equal(elu_feature_map(torch.tensor([0.0, -1e4])), torch.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="x must be a floating-point tensor"):
        elu_feature_map(torch.arange(3))


def test_online_softmax_rejects_bad_input():
    with pytest.raises(ValueError, match="scores must be a floating-point tensor"):
        online_softmax(torch.arange(4))
    with pytest.raises(ValueError, match="scores must be a torch.Tensor"):
        online_softmax([1.0, 2.0])
    with pytest.raises(ValueError, match="dim must be an axis of scores"):
        online_softmax(torch.zeros(2, 3), dim=2)
    with pytest.raises(ValueError, match="block_size must be a positive integer"):
        online_softmax(torch.zeros(2, 3), block_size=0)


def test_online_softmax_empty_axes():
    assert online_softmax(torch.zeros(3, 0)).shape == (3, 0)
    assert online_softmax(torch.zeros(0, 4)).shape == (0, 4)
    state = OnlineSoftmaxState.empty((2, 1))
    same = online_softmax_update(state, torch.zeros(2, 0))  # an empty block changes nothing
    assert torch.equal(same.max, state.max) and torch.equal(same.sum, state.sum)


def test_online_softmax_state_rejects_bad_input():
    state = OnlineSoftmaxState.empty((2, 1))
    with pytest.raises(ValueError, match="state must be an OnlineSoftmaxState"):
        online_softmax_update((state.max, state.sum), torch.zeros(2, 3))
    with pytest.raises(
        ValueError,
        match=r"state of shape \(2, 1\) does not fit block of shape "
        r"\(3, 4\)",
    ):
        online_softmax_update(state, torch.zeros(3, 4))  # would broadcast to (3, 1)
    with pytest.raises(ValueError, match="block must be a floating-point tensor"):
        online_softmax_update(state, torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="shape must be a tuple of sizes"):
        OnlineSoftmaxState.empty((2, 3))
    with pytest.raises(ValueError, match="shape must be a tuple of sizes"):
        OnlineSoftmaxState.empty(2)
    with pytest.raises(ValueError, match="dtype must be a floating torch.dtype"):
        OnlineSoftmaxState.empty((2, 1), dtype=torch.int64)
    with pytest.raises(ValueError, match="sum must have max's shape"):
        OnlineSoftmaxState(torch.zeros(2, 1), torch.zeros(3, 1))
    with pytest.raises(ValueError, match="max must have shape"):
        OnlineSoftmaxState(torch.zeros(2, 2), torch.zeros(2, 2))
