"""The KV cache (helpers.multihead.KVCache, a parameter of MultiHeadAttention.forward) and
helpers.kvcache: decoding with and without it."""

import pytest
import torch

from helpers.kvcache import decode_step, decode_with_cache, decode_without_cache
from helpers.masks import causal_mask
from helpers.multihead import KVCache, MultiHeadAttention

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


def close(actual, expected, dtype=torch.float32):
    torch.testing.assert_close(actual, expected, atol=TOL[dtype], rtol=TOL[dtype])


# ---------------------------------------------------------------- decoding
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
            out, cache = decode_step(mha, x[:, t : t + 1], cache)
            assert out.shape == (2, 1, 16) and len(cache) == t + 1
            assert cache.keys.shape == cache.values.shape == (2, 4, t + 1, 4)  # (B, H, T, D/H)
            close(out, full[:, t : t + 1])
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


def test_the_cache_is_a_parameter_of_forward(mha):
    """Prefill three tokens, then decode one at a time: equal to one causal pass."""
    x = torch.randn(2, 7, 16, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full, _ = mha(x, x, x, causal_mask(7)[None])
        cache = KVCache()
        first, _ = mha(x[:, :3], x[:, :3], x[:, :3], causal_mask(3)[None], cache=cache)
        outs = [first] + [
            mha(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache)[0]
            for t in range(3, 7)
        ]
    close(torch.cat(outs, dim=1), full)
    assert len(cache) == 7


def test_the_cache_is_for_inference_and_says_so(mha):
    x = torch.randn(1, 3, 16)
    with pytest.raises(ValueError, match="KV cache is for inference.*torch.no_grad"):
        mha(x, x, x, cache=KVCache())
    assert not decode_with_cache(mha, x).requires_grad  # decodes under no_grad itself


def test_both_decoders_run_in_eval_mode_and_restore_the_mode():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2, dropout=0.5)  # training mode, as constructed
    x = torch.randn(1, 6, 8)
    with torch.no_grad():
        cached, recomputed = decode_with_cache(mha, x), decode_without_cache(mha, x)
    close(cached, recomputed)
    assert mha.training


# ---------------------------------------------------------------- KV cache storage
def kv_steps(steps, batch=2, heads=3, dim=4, seed=6):
    gen = torch.Generator().manual_seed(seed)
    return [
        (
            torch.randn(batch, heads, 1, dim, generator=gen),
            torch.randn(batch, heads, 1, dim, generator=gen),
        )
        for _ in range(steps)
    ]


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


def test_kv_cache_appends_zero_steps():
    cache, (k, v) = KVCache(), kv_steps(1)[0]
    keys, values = cache.append(k[..., :0, :], v[..., :0, :])  # t = 0 first: no crash
    assert len(cache) == 0 and keys.shape == values.shape == (2, 3, 0, 4)
    keys, _ = cache.append(k, v)
    assert len(cache) == 1 and torch.equal(keys, k)


def test_decoding_zero_tokens_gives_an_empty_output(mha):
    x = torch.randn(2, 0, 16)
    with torch.no_grad():
        assert decode_with_cache(mha, x).shape == (2, 0, 16)
        assert decode_without_cache(mha, x).shape == (2, 0, 16)


@pytest.mark.parametrize("num_kv_heads", [2, 1])
def test_grouped_query_cache_holds_only_the_key_value_heads(num_kv_heads):
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4, num_kv_heads=num_kv_heads).eval()
    x = torch.randn(2, 7, 16, generator=torch.Generator().manual_seed(1))  # (B, T, D)
    cache, outs = KVCache(), []
    with torch.no_grad():
        for t in range(7):
            outs.append(module(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache)[0])
        parallel, _ = module(x, x, x, causal_mask(7))
    close(torch.cat(outs, dim=1), parallel)
    assert cache.keys.shape == cache.values.shape == (2, num_kv_heads, 7, 4)
    close(decode_with_cache(module, x), parallel)
    close(decode_without_cache(module, x), parallel)
