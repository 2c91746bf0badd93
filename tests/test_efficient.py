"""helpers.efficient: online softmax, tiled attention vs SDPA, peak memory, KV cache and
linear attention."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.nn import functional as F

from helpers.attention import MultiHeadAttention
from helpers.efficient import (KVCache, OnlineSoftmaxState, decode_step, decode_with_cache,
                               decode_without_cache, elu_feature_map, linear_attention,
                               memory_comparison, naive_attention, online_softmax,
                               online_softmax_update, peak_memory_bytes, tiled_attention,
                               time_decoding)
from helpers.masks import causal_mask

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


def close(actual, expected, dtype=torch.float32):
    torch.testing.assert_close(actual, expected, atol=TOL[dtype], rtol=TOL[dtype])


# ---------------------------------------------------------------- online softmax
@given(rows=st.integers(1, 4), cols=st.integers(1, 40), block=st.integers(1, 50),
       spread=st.sampled_from([1.0, 30.0, 1e4]), seed=st.integers(0, 2**16))
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
    scores = torch.tensor([[0.5, -inf, 2.0, -inf],
                           [-inf, -inf, -inf, -inf],
                           [-inf, -inf, -inf, 3.0]])
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
    out = tiled_attention(q, k, v, is_causal=is_causal, block_size=7,
                          query_block_size=query_block_size)
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


@given(num_queries=st.integers(1, 20), num_keys=st.integers(1, 20), dim=st.integers(1, 6),
       block=st.integers(1, 25), causal=st.booleans(), seed=st.integers(0, 2**16))
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
    grads = torch.autograd.grad(tiled_attention(q, k, v, mask=mask, block_size=3).sum(),
                                (q, k, v))
    expected = torch.autograd.grad(
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum(), (q, k, v))
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


# ---------------------------------------------------------------- peak memory
def test_peak_memory_counts_torch_allocations():
    def two_buffers():
        a = torch.empty(1000, 1000)  # 4,000,000 bytes
        b = torch.empty(500, 1000)  # 2,000,000 bytes
        del a, b
        c = torch.empty(250, 1000)  # 1,000,000 bytes, after both are freed
        return c

    peak = peak_memory_bytes(two_buffers)
    assert 6_000_000 <= peak < 6_100_000


def test_naive_peak_memory_is_quadratic_tiled_is_not():
    (row,) = memory_comparison([4096], d_head=64, block_size=128)
    assert row["naive_bytes"] >= 2 * 4096**2 * 4  # the scores and the weights, float32
    assert row["tiled_bytes"] < 16 * 2**20  # O(L · block): a few MiB
    assert row["ratio"] > 8


# ---------------------------------------------------------------- KV cache
@pytest.fixture
def mha():
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4).eval()
    with torch.no_grad():
        for linear in (module.w_q, module.w_k, module.w_v, module.w_o):
            linear.bias.normal_(std=0.1)
    return module


def test_decode_step_matches_full_causal_attention(mha):
    x = torch.randn(2, 9, 16, generator=torch.Generator().manual_seed(1))  # (B, T, D)
    with torch.no_grad():
        full, _ = mha(x, x, x, causal_mask(9))  # (B, T, D)
        cache = KVCache()
        for t in range(9):
            out, cache = decode_step(mha, x[:, t:t + 1], cache)
            assert out.shape == (2, 1, 16) and len(cache) == t + 1
            assert cache.keys.shape == cache.values.shape == (2, 4, t + 1, 4)  # (B, H, T, D/H)
            close(out, full[:, t:t + 1])
        close(decode_with_cache(mha, x), full)
        close(decode_without_cache(mha, x), full)


def test_decode_float64_and_bad_input(mha):
    mha = mha.double()
    x = torch.randn(1, 6, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full, _ = mha(x, x, x, causal_mask(6))
        close(decode_with_cache(mha, x), full, torch.float64)
    with pytest.raises(ValueError, match="x_t"):
        decode_step(mha, x)


def test_time_decoding_returns_numbers(mha):
    rows = time_decoding(mha, [4, 8], repeats=1)
    assert [row["length"] for row in rows] == [4, 8]
    for row in rows:
        assert row["cache_s"] > 0 and row["recompute_s"] > 0
        assert math.isclose(row["speedup"], row["recompute_s"] / row["cache_s"])


# ---------------------------------------------------------------- linear attention
def explicit_kernel_attention(q, k, v, causal):
    similarity = elu_feature_map(q) @ elu_feature_map(k).transpose(-2, -1)  # (…, Q, K)
    if causal:
        similarity = similarity * causal_mask(q.shape[-2], k.shape[-2])
    return similarity @ v / similarity.sum(dim=-1, keepdim=True)


@pytest.mark.parametrize("causal", [False, True])
def test_linear_attention_equals_explicit_form(causal):
    q, k, v = qkv((2, 3, 11, 6), (2, 3, 11, 6), 5, torch.float64)
    close(linear_attention(q, k, v, causal=causal), explicit_kernel_attention(q, k, v, causal),
          torch.float64)


def test_linear_attention_cross_and_errors():
    q, k, v = qkv((2, 4, 6), (2, 9, 6), 3)
    close(linear_attention(q, k, v), explicit_kernel_attention(q, k, v, False))
    with pytest.raises(ValueError, match="Q == K"):
        linear_attention(q, k, v, causal=True)


# ---------------------------------------------------------------- KV cache storage
def kv_steps(steps, batch=2, heads=3, dim=4, seed=6):
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, heads, 1, dim, generator=gen),
             torch.randn(batch, heads, 1, dim, generator=gen)) for _ in range(steps)]


@pytest.mark.parametrize("capacity", [None, 1, 3, 20])
def test_kv_cache_append_equals_concatenation(capacity):
    cache, steps = KVCache(capacity=capacity), kv_steps(11)
    assert len(cache) == 0 and cache.keys is None and cache.values is None
    for t, (k, v) in enumerate(steps, start=1):
        keys, values = cache.append(k, v)
        assert len(cache) == t and cache.capacity >= t
        assert torch.equal(keys, torch.cat([s[0] for s in steps[:t]], dim=-2))
        assert torch.equal(values, torch.cat([s[1] for s in steps[:t]], dim=-2))
        assert torch.equal(cache.keys, keys) and torch.equal(cache.values, values)
    two = kv_steps(1, seed=7)[0]
    keys, _ = cache.append(torch.cat([two[0], two[0]], -2), torch.cat([two[1], two[1]], -2))
    assert keys.shape == (2, 3, 13, 4)
    assert torch.equal(keys[..., -2:, :], torch.cat([two[0], two[0]], -2))


def test_kv_cache_preallocates_and_writes_in_place():
    cache = KVCache(capacity=8)
    pointers = set()
    for k, v in kv_steps(8):
        keys, values = cache.append(k, v)
        pointers.add((keys.data_ptr(), values.data_ptr()))
    assert len(pointers) == 1 and cache.capacity == 8  # one buffer, never reallocated
    grown = KVCache()  # no hint: the capacity doubles, O(log T) reallocations
    capacities = set()
    for k, v in kv_steps(9):
        grown.append(k, v)
        capacities.add(grown.capacity)
    assert capacities == {1, 2, 4, 8, 16}


def test_kv_cache_does_not_alias_the_caller_tensors():
    cache, steps = KVCache(), kv_steps(3)
    first_k, first_v = steps[0][0].clone(), steps[0][1].clone()
    keys, values = cache.append(*steps[0])
    assert keys.data_ptr() != steps[0][0].data_ptr() and values.data_ptr() != steps[0][1].data_ptr()
    steps[0][0].zero_(), steps[0][1].zero_()  # the caller reuses its tensors
    assert torch.equal(cache.keys, first_k) and torch.equal(cache.values, first_v)
    before = cache.keys.clone()
    view, _ = cache.append(*steps[1])
    cache.append(*steps[2])  # later appends (and a reallocation) leave earlier views alone
    assert torch.equal(view[..., :1, :], before) and view.shape[-2] == 2


def test_kv_cache_bad_input_raises():
    cache = KVCache()
    k, v = kv_steps(1)[0]
    with pytest.raises(ValueError, match="keys"):
        cache.append(k[0], v)
    with pytest.raises(ValueError, match="same"):
        cache.append(k, torch.cat([v, v], dim=-2))
    cache.append(k, v)
    with pytest.raises(ValueError, match="do not fit"):
        cache.append(k[..., :2], v)
    with pytest.raises(ValueError, match="capacity"):
        KVCache(capacity=0)
