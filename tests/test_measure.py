"""Tests for helpers.measure: timing, power-law slopes, peak memory, decoding times, FLOP
counts and the entropy of attention weights, checked against torch (the FLOP counter, the
Categorical entropy) and against hand-made cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from helpers.measure import (
    attention_entropy,
    attention_flops,
    loglog_slope,
    memory_comparison,
    peak_memory_bytes,
    time_call,
    time_decoding,
)
from helpers.multihead import MultiHeadAttention


# ---------------------------------------------------------------- time_call
def test_time_call_counts_calls_and_returns_the_minimum():
    calls = []
    seconds = time_call(lambda: calls.append(1), repeats=4, warmup=2)
    assert len(calls) == 6
    assert 0 <= seconds < 1
    calls.clear()
    seconds = time_call(lambda: calls.append(1), repeats=3, warmup=2)
    assert len(calls) == 5 and 0 <= seconds < 1


def test_time_call_runs_every_call_without_autograd():
    grad_enabled = []
    time_call(lambda: grad_enabled.append(torch.is_grad_enabled()), repeats=2, warmup=1)
    assert grad_enabled == [False, False, False]
    assert torch.is_grad_enabled()  # restored afterwards


def test_time_call_returns_the_fastest_timing():
    delays = iter([0.0, 0.03, 0.0, 0.03])  # warm-up, then three timed calls

    def sleepy():
        import time

        time.sleep(next(delays))

    assert time_call(sleepy, repeats=3, warmup=1) < 0.02


# ---------------------------------------------------------------- loglog_slope
def test_loglog_slope_recovers_the_exponent():
    sizes = [10, 100, 1000]
    assert math.isclose(loglog_slope(sizes, [3e-6 * n**2 for n in sizes]), 2.0)
    assert math.isclose(loglog_slope(sizes, [5e-3 * n for n in sizes]), 1.0)
    assert math.isclose(loglog_slope(np.array(sizes), np.array(sizes, dtype=float) ** 0.5), 0.5)


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


def test_peak_memory_passes_arguments_and_rejects_what_is_not_callable():
    assert 4_000_000 <= peak_memory_bytes(torch.empty, 1000, 1000) < 4_100_000
    assert 800_000 <= peak_memory_bytes(torch.zeros, (100, 1000), dtype=torch.float64) < 900_000
    with pytest.raises(ValueError, match="fn must be a callable"):
        peak_memory_bytes(torch.zeros(3))


def test_naive_peak_memory_is_quadratic_tiled_is_not():
    (row,) = memory_comparison([4096], d_head=64, block_size=128)
    assert row["naive_bytes"] >= 2 * 4096**2 * 4  # the scores and the weights, float32
    assert row["tiled_bytes"] < 16 * 2**20  # O(L · block): a few MiB
    assert row["ratio"] > 8


def test_memory_comparison_of_no_lengths_is_empty():
    assert memory_comparison([]) == []


# ---------------------------------------------------------------- decoding
@pytest.fixture
def mha():
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4).eval()
    with torch.no_grad():
        for linear in (module.w_q, module.w_k, module.w_v, module.w_o):
            linear.bias.normal_(std=0.1)
    return module


def test_time_decoding_returns_numbers(mha):
    rows = time_decoding(mha, [4, 8], repeats=1)
    assert [row["length"] for row in rows] == [4, 8]
    for row in rows:
        assert row["cache_s"] > 0 and row["recompute_s"] > 0
        assert math.isclose(row["speedup"], row["recompute_s"] / row["cache_s"])


def test_time_decoding_in_float64(mha):
    (row,) = time_decoding(mha.double(), [3], batch=2, repeats=1)
    assert row["length"] == 3 and row["cache_s"] > 0


# ---------------------------------------------------------------- FLOPs
@given(
    batch=st.integers(1, 3),
    num_queries=st.integers(1, 6),
    num_keys=st.integers(1, 6),
    head_dim=st.integers(1, 4),
    num_heads=st.sampled_from([1, 2, 4]),
    self_attention=st.booleans(),
)
@settings(max_examples=20, deadline=None)
def test_flops_match_torch_flop_counter(
    batch, num_queries, num_keys, head_dim, num_heads, self_attention
):
    d_model = head_dim * num_heads
    module = MultiHeadAttention(d_model, num_heads)
    queries = torch.randn(batch, num_queries, d_model)
    keys = queries if self_attention else torch.randn(batch, num_keys, d_model)
    with FlopCounterMode(display=False) as counter:
        module(queries, keys, keys)
    expected = attention_flops(batch, num_queries, keys.shape[1], d_model, num_heads)
    assert counter.get_total_flops() == expected["total"]


def test_flops_do_not_depend_on_the_number_of_heads_but_score_entries_do():
    counts = [attention_flops(2, 16, 16, 64, h) for h in (1, 2, 4, 8, 64)]
    assert len({c["total"] for c in counts}) == 1
    assert [c["score entries"] for c in counts] == [2 * h * 256 for h in (1, 2, 4, 8, 64)]
    full = attention_flops(2, 16, 16, 64, 8, head_dim=64)  # 8 heads, no split
    assert full["total"] == 8 * counts[0]["total"]
    with pytest.raises(ValueError, match="divisible"):
        attention_flops(1, 2, 2, 10, 3)
    with pytest.raises(ValueError, match="num_heads"):
        attention_flops(1, 2, 2, 10, 0)


# ---------------------------------------------------------------- entropy
@given(num_keys=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_entropy_matches_categorical(num_keys, seed):
    generator = torch.Generator().manual_seed(seed)
    weights = torch.softmax(3 * torch.randn(4, num_keys, generator=generator), dim=-1)
    expected = torch.distributions.Categorical(probs=weights).entropy()
    torch.testing.assert_close(attention_entropy(weights), expected)


def test_entropy_limits():
    assert attention_entropy(torch.full((3, 8), 1 / 8)).allclose(torch.full((3,), math.log(8)))
    one_hot = F.one_hot(torch.tensor([0, 5]), 8).float()
    assert torch.equal(attention_entropy(one_hot), torch.zeros(2))  # 0 log 0 = 0, no NaN
    assert attention_entropy(one_hot.T, dim=0).shape == (2,)


def test_entropy_per_row_and_the_mean_of_each_head():
    one_hot = torch.eye(5).expand(2, 1, 5, 5)
    uniform = torch.full((2, 1, 5, 5), 0.2)
    weights = torch.cat([one_hot, uniform], dim=1)  # (B, H, Q, K)
    per_row = attention_entropy(weights)
    assert per_row.shape == (2, 2, 5)  # (B, H, Q): one entropy per query
    torch.testing.assert_close(per_row.mean(dim=(0, 2)), torch.tensor([0.0, math.log(5)]))


def test_entropy_of_zero_size_axes():
    assert attention_entropy(torch.zeros(0, 4)).shape == (0,)
    assert torch.equal(attention_entropy(torch.zeros(3, 0)), torch.zeros(3))  # no keys: 0
