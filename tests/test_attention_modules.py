"""Parity, equivalence, property and error tests for the attention scoring modules."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from torch import nn

from helpers.attention import scaled_dot_product_attention
from helpers.masks import causal_mask, valid_length_mask
from helpers.scoring import (
    AdditiveAttention,
    BilinearAttention,
    DotProductAttention,
    ScaledDotProductAttention,
    additive_scores,
    bilinear_scores,
)

DTYPES = [torch.float32, torch.float64]
DOT_MODULES = {"dot": (DotProductAttention, 1.0), "scaled": (ScaledDotProductAttention, None)}


def randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def random_qkv(
    lead=(2, 3),
    num_queries=4,
    num_keys=5,
    query_dim=8,
    key_dim=8,
    value_dim=6,
    dtype=torch.float32,
    seed=0,
):
    q = randn(*lead, num_queries, query_dim, dtype=dtype, seed=seed)
    k = randn(*lead, num_keys, key_dim, dtype=dtype, seed=seed + 1)
    v = randn(*lead, num_keys, value_dim, dtype=dtype, seed=seed + 2)
    return q, k, v


def make_module(kind, query_dim=8, key_dim=8, hidden_dim=7, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    module = {
        "dot": lambda: DotProductAttention(),
        "scaled": lambda: ScaledDotProductAttention(),
        "additive": lambda: AdditiveAttention(query_dim, key_dim, hidden_dim),
        "bilinear": lambda: BilinearAttention(query_dim, key_dim),
    }[kind]()
    return module.to(dtype)


def sdpa_weights(q, k, mask=None, is_causal=False, scale=None):
    """PyTorch's attention weights: F.scaled_dot_product_attention with v = identity."""
    num_keys = k.shape[-2]
    eye = torch.eye(num_keys, dtype=q.dtype).expand(*k.shape[:-1], num_keys)
    return F.scaled_dot_product_attention(
        q, k, eye, attn_mask=mask, is_causal=is_causal, scale=scale
    )


def parity_masks(lead, num_queries, num_keys):
    """Masks that leave every query at least one key, of several broadcast shapes."""
    random = torch.rand(*lead, num_queries, num_keys, generator=torch.Generator().manual_seed(9))
    random = random > 0.5
    random[..., 0] = True
    per_batch = valid_length_mask(torch.arange(lead[0]) + 2, num_keys)  # (B, K)
    per_batch = per_batch.view(lead[0], *([1] * len(lead)), num_keys)  # (B, 1, [1,] K)
    return {
        "none": None,
        "random": random,
        "per-batch": per_batch,
        "keys only": torch.tensor([[True] * (num_keys - 1) + [False]]),
    }  # (1, K)


# -------------------------------------------------------- parity with PyTorch SDPA
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lead", [(2,), (2, 3)], ids=["3-D", "4-D"])
@pytest.mark.parametrize("kind", DOT_MODULES)
@pytest.mark.parametrize("mask_name", ["none", "random", "per-batch", "keys only"])
def test_dot_modules_match_torch_sdpa(dtype, lead, kind, mask_name):
    module_class, scale = DOT_MODULES[kind]
    q, k, v = random_qkv(lead, dtype=dtype, seed=1)
    mask = parity_masks(lead, 4, 5)[mask_name]
    out, weights = module_class()(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, sdpa_weights(q, k, mask, scale=scale), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lead", [(2,), (2, 3)], ids=["3-D", "4-D"])
@pytest.mark.parametrize("kind", DOT_MODULES)
@pytest.mark.parametrize("num_queries, num_keys", [(5, 5), (3, 6), (6, 4)])
def test_dot_modules_with_causal_mask_match_is_causal(dtype, lead, kind, num_queries, num_keys):
    module_class, scale = DOT_MODULES[kind]
    q, k, v = random_qkv(lead, num_queries, num_keys, dtype=dtype, seed=2)
    out, weights = module_class()(q, k, v, causal_mask(num_queries, num_keys))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        weights, sdpa_weights(q, k, is_causal=True, scale=scale), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("kind", DOT_MODULES)
def test_dot_module_gradients_match_torch(kind):
    module_class, scale = DOT_MODULES[kind]
    q, k, v = (t.requires_grad_() for t in random_qkv(dtype=torch.float64, seed=3))
    mask = causal_mask(4, 5)
    upstream = randn(2, 3, 4, 6, dtype=torch.float64, seed=4)
    ours = torch.autograd.grad((module_class()(q, k, v, mask)[0] * upstream).sum(), (q, k, v))
    theirs = torch.autograd.grad(
        (F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale) * upstream).sum(),
        (q, k, v),
    )
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)


def test_scaled_module_equals_functional_and_dot_module_with_scaled_queries():
    q, k, v = random_qkv(dtype=torch.float64, seed=5)
    mask = causal_mask(4, 5)
    out, weights = ScaledDotProductAttention()(q, k, v, mask)
    ref_out, ref_weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(weights, ref_weights)
    dot_out, dot_weights = DotProductAttention()(q / math.sqrt(8), k, v, mask)
    torch.testing.assert_close(out, dot_out)
    torch.testing.assert_close(weights, dot_weights)


@pytest.mark.parametrize("kind", ["dot", "scaled", "additive", "bilinear"])
def test_two_d_inputs_equal_a_batch_of_one(kind):
    module = make_module(kind, query_dim=8, key_dim=8)
    q, k, v = random_qkv(lead=(), seed=6)  # (Q, D), (K, D), (K, Dv)
    mask = causal_mask(4, 5)
    out, weights = module(q, k, v, mask)
    batched_out, batched_weights = module(q[None], k[None], v[None], mask)
    assert out.shape == (4, 6) and weights.shape == (4, 5)
    torch.testing.assert_close(out, batched_out[0])
    torch.testing.assert_close(weights, batched_weights[0])


@pytest.mark.parametrize("kind", ["dot", "scaled", "additive", "bilinear"])
@pytest.mark.parametrize("lead", [(), (2,), (2, 3)])
def test_scores_method_gives_the_pre_softmax_scores(kind, lead):
    module = make_module(kind, query_dim=8, key_dim=8)
    q, k, v = random_qkv(lead, dtype=torch.float32, seed=7)
    mask = torch.tensor([True, True, False, True, True])
    scores = module.scores(q, k)
    assert scores.shape == (*lead, 4, 5)
    out, weights = module(q, k, v, mask)
    expected = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    torch.testing.assert_close(weights, expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(out, weights @ v, atol=1e-6, rtol=1e-5)
    if kind in DOT_MODULES:
        scale = 1.0 if kind == "dot" else 1 / math.sqrt(8)
        torch.testing.assert_close(scores, q @ k.transpose(-2, -1) * scale)


# -------------------------------------------------------------- additive attention
@pytest.mark.parametrize("lead", [(2,), (2, 3)], ids=["3-D", "4-D"])
def test_additive_equals_mlp_on_concatenation(lead):
    """w_vᵀ tanh(W_q q + W_k k) = w2ᵀ tanh(W1 [q; k]) with W1 = [W_q W_k], w2 = w_v."""
    torch.manual_seed(0)
    attention = AdditiveAttention(query_dim=6, key_dim=4, hidden_dim=5).double()
    mlp = nn.Sequential(
        nn.Linear(6 + 4, 5, bias=False), nn.Tanh(), nn.Linear(5, 1, bias=False)
    ).double()
    with torch.no_grad():
        mlp[0].weight.copy_(torch.cat([attention.w_q.weight, attention.w_k.weight], dim=1))
        mlp[2].weight.copy_(attention.w_v.weight)
    q, k, v = random_qkv(lead, 3, 7, query_dim=6, key_dim=4, dtype=torch.float64, seed=8)
    pairs = torch.cat(
        [q.unsqueeze(-2).expand(*lead, 3, 7, 6), k.unsqueeze(-3).expand(*lead, 3, 7, 4)], dim=-1
    )  # (…, Q, K, Dq + Dk)
    mlp_scores = mlp(pairs).squeeze(-1)  # (…, Q, K)
    torch.testing.assert_close(attention.scores(q, k), mlp_scores)
    mask = valid_length_mask(torch.tensor([3, 7]), 7).view(2, *([1] * len(lead)), 7)
    out, weights = attention(q, k, v, mask)
    mlp_weights = torch.softmax(mlp_scores.masked_fill(~mask, float("-inf")), dim=-1)
    torch.testing.assert_close(weights, mlp_weights)
    torch.testing.assert_close(out, mlp_weights @ v)


def test_additive_attributes_and_functional_form():
    torch.manual_seed(0)
    attention = AdditiveAttention(query_dim=6, key_dim=4, hidden_dim=5)
    for name, shape in [("w_q", (5, 6)), ("w_k", (5, 4)), ("w_v", (1, 5))]:
        layer = getattr(attention, name)
        assert isinstance(layer, nn.Linear) and layer.bias is None
        assert layer.weight.shape == shape
    q, k = randn(2, 3, 6, seed=1), randn(2, 7, 4, seed=2)
    expected = (
        torch.tanh((q @ attention.w_q.weight.T)[:, :, None] + (k @ attention.w_k.weight.T)[:, None])
        @ attention.w_v.weight[0]
    )
    torch.testing.assert_close(attention.scores(q, k), expected)
    torch.testing.assert_close(
        additive_scores(q, k, attention.w_q.weight, attention.w_k.weight, attention.w_v.weight[0]),
        expected,
    )


# -------------------------------------------------------------- bilinear attention
@pytest.mark.parametrize("lead", [(), (2,), (2, 3)])
def test_bilinear_with_identity_is_dot_product(lead):
    bilinear = BilinearAttention(8, 8).double()
    with torch.no_grad():
        bilinear.weight.copy_(torch.eye(8))
    q, k, v = random_qkv(lead, dtype=torch.float64, seed=10)
    mask = causal_mask(4, 5)
    out, weights = bilinear(q, k, v, mask)
    dot_out, dot_weights = DotProductAttention()(q, k, v, mask)
    torch.testing.assert_close(out, dot_out)
    torch.testing.assert_close(weights, dot_weights)


def test_bilinear_is_q_w_k_and_initialised_from_the_default_generator():
    torch.manual_seed(0)
    first = BilinearAttention(query_dim=6, key_dim=4)
    torch.manual_seed(0)
    second = BilinearAttention(query_dim=6, key_dim=4)
    assert isinstance(first.weight, nn.Parameter) and first.weight.shape == (6, 4)
    assert torch.equal(first.weight, second.weight)
    assert first.weight.abs().max() <= math.sqrt(6 / (6 + 4))  # Xavier-uniform bound
    q, k = randn(2, 3, 6, seed=1), randn(2, 7, 4, seed=2)
    expected = torch.einsum("bqi,ij,bkj->bqk", q, first.weight, k)
    torch.testing.assert_close(first.scores(q, k), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(bilinear_scores(q, k, first.weight), expected, atol=1e-5, rtol=1e-5)


def test_modules_are_seeded_deterministically():
    for kind in ["additive", "bilinear"]:
        first, second = make_module(kind, seed=3), make_module(kind, seed=3)
        for a, b in zip(first.parameters(), second.parameters()):
            assert torch.equal(a, b)


# ------------------------------------------------------------- behaviour, dropout
@pytest.mark.parametrize("kind", ["dot", "scaled", "additive", "bilinear"])
def test_weights_are_returned_not_stashed(kind):
    module = make_module(kind)
    before = set(vars(module))
    module(*random_qkv())
    assert set(vars(module)) == before
    assert not any(isinstance(value, torch.Tensor) for value in vars(module).values())


@pytest.mark.parametrize("kind", ["dot", "scaled", "additive", "bilinear"])
def test_fully_masked_query_gets_zero_weights_and_output(kind):
    module = make_module(kind)
    q, k, v = random_qkv((2,), seed=11)
    mask = valid_length_mask(torch.tensor([[0, 2, 5, 1], [3, 0, 0, 4]]), 5)  # (B, Q, K)
    out, weights = module(q, k, v, mask)
    assert torch.equal(weights[0, 0], torch.zeros(5)) and torch.equal(out[0, 0], torch.zeros(6))
    assert torch.equal(weights[1, 1:3], torch.zeros(2, 5))


@pytest.mark.parametrize("kind", ["dot", "scaled", "additive", "bilinear"])
def test_dropout_acts_on_the_output_only_while_training(kind):
    torch.manual_seed(0)
    module = {
        "dot": DotProductAttention(dropout=0.5),
        "scaled": ScaledDotProductAttention(dropout=0.5),
        "additive": AdditiveAttention(8, 8, 7, dropout=0.5),
        "bilinear": BilinearAttention(8, 8, dropout=0.5),
    }[kind]
    q, k, v = random_qkv(seed=12)
    out, weights = module.train()(q, k, v)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 4))  # weights not dropped
    assert not torch.allclose(out, weights @ v)
    out, weights = module.eval()(q, k, v)
    torch.testing.assert_close(out, weights @ v)


# ---------------------------------------------------------------- property tests
@st.composite
def module_inputs(draw, kinds=("dot", "scaled", "additive", "bilinear")):
    """A module, inputs of rank 2 to 4 and a bool mask broadcastable to (…, Q, K)."""
    kind = draw(st.sampled_from(kinds))
    dtype = draw(st.sampled_from(DTYPES))
    lead = draw(st.sampled_from([(), (2,), (1, 3), (2, 2)]))
    num_queries, num_keys = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    query_dim = draw(st.integers(1, 6))
    key_dim = query_dim if kind in DOT_MODULES else draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**16))
    q, k, v = random_qkv(lead, num_queries, num_keys, query_dim, key_dim, 3, dtype, seed)
    full = (*lead, num_queries, num_keys)
    mask_shape = tuple(draw(st.sampled_from([size, 1])) for size in full)
    mask_shape = mask_shape[draw(st.integers(0, len(lead))) :]  # drop some leading axes
    mask = torch.from_numpy(draw(arrays(np.bool_, mask_shape)))
    module = make_module(kind, query_dim, key_dim, hidden_dim=4, dtype=dtype, seed=seed)
    return module, q, k, v, mask


def check_weights(weights, mask):
    """Rows sum to 1, or are exactly 0 when fully masked; masked weights exactly 0."""
    assert not torch.isnan(weights).any() and torch.isfinite(weights).all()
    assert (weights >= 0).all()
    full_mask = mask.expand(weights.shape)
    assert torch.equal(weights[~full_mask], torch.zeros_like(weights[~full_mask]))
    sums, seen = weights.sum(-1), full_mask.any(-1)
    torch.testing.assert_close(sums[seen], torch.ones_like(sums[seen]), atol=1e-5, rtol=0)
    assert torch.equal(sums[~seen], torch.zeros_like(sums[~seen]))


@given(module_inputs())
def test_property_weights_are_a_distribution_or_zero(data):
    module, q, k, v, mask = data
    out, weights = module(q, k, v, mask)
    check_weights(weights, mask)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, weights @ v)


@given(module_inputs())
def test_property_gradients_are_finite(data):
    module, q, k, v, mask = data
    inputs = [t.clone().requires_grad_() for t in (q, k, v)]
    out, weights = module(*inputs, mask)
    (out.square().sum() + (weights * weights).sum()).backward()
    for tensor in [*inputs, *module.parameters()]:
        assert tensor.grad is not None and torch.isfinite(tensor.grad).all()


@given(module_inputs(kinds=tuple(DOT_MODULES)), st.sampled_from([1e2, 1e4]))
def test_property_dot_modules_are_finite_for_scores_near_1e4(data, target):
    """Scale the queries so that the largest |score| is ``target`` (up to 1e4)."""
    module, q, k, v, mask = data
    largest = module.scores(q, k).abs().max()
    if largest > 0:
        q = q * (target / largest)
    q.requires_grad_()
    out, weights = module(q, k, v, mask)
    check_weights(weights, mask)
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert torch.isfinite(q.grad).all()


# ------------------------------------------------------------------- bad input
ALL_KINDS = ["dot", "scaled", "additive", "bilinear"]


@pytest.mark.parametrize("kind", DOT_MODULES)
def test_dot_feature_mismatch_suggests_other_modules(kind):
    module = make_module(kind)
    q, k, v = randn(2, 4, 8), randn(2, 5, 6), randn(2, 5, 3)
    pattern = (
        r"queries and keys must have the same feature size D.*\(2, 4, 8\).*\(2, 5, 6\)"
        r".*use AdditiveAttention or BilinearAttention"
    )
    with pytest.raises(ValueError, match=pattern):
        module(q, k, v)
    with pytest.raises(ValueError, match=pattern):
        module.scores(q, k)


@pytest.mark.parametrize("kind", ["additive", "bilinear"])
def test_input_dtype_must_match_parameters(kind):
    q, k, v = random_qkv(dtype=torch.float64)
    with pytest.raises(
        ValueError,
        match=r"queries must have the parameters' dtype "
        r"torch.float32, got dtype torch.float64",
    ):
        make_module(kind)(q, k, v)
