"""Parity with nn.MultiheadAttention, property and error tests for MultiHeadAttention."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn
from torch.nn import functional as F

from helpers.attention import scaled_dot_product_attention
from helpers.masks import causal_mask, to_key_padding_mask, valid_length_mask
from helpers.multihead import MultiHeadAttention

DTYPES = [torch.float32, torch.float64]


def randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def torch_pair(d_model=16, num_heads=4, bias=True, dtype=torch.float32, seed=0):
    """A seeded nn.MultiheadAttention (random biases too) and the book module copied from it."""
    torch.manual_seed(seed)
    reference = nn.MultiheadAttention(
        d_model, num_heads, bias=bias, batch_first=True, dtype=dtype
    ).eval()
    if bias:
        with torch.no_grad():
            reference.in_proj_bias.normal_()
            reference.out_proj.bias.normal_()
    return reference, MultiHeadAttention.from_torch(reference)


def run_torch(reference, q, k, v, **kwargs):
    return reference(q, k, v, need_weights=True, average_attn_weights=False, **kwargs)


def assert_close(ours, theirs, tol=1e-5):
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("self_attention", [True, False])
def test_matches_torch_without_mask(dtype, bias, self_attention):
    reference, module = torch_pair(bias=bias, dtype=dtype)
    q = randn(3, 5, 16, dtype=dtype, seed=1)
    k, v = (
        (q, q)
        if self_attention
        else (randn(3, 7, 16, dtype=dtype, seed=2), randn(3, 7, 16, dtype=dtype, seed=3))
    )
    out, weights = module(q, k, v)
    assert out.shape == (3, 5, 16) and weights.shape == (3, 4, 5, k.shape[1])
    assert_close((out, weights), run_torch(reference, q, k, v))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
def test_matches_torch_with_padding_mask(dtype, bias):
    reference, module = torch_pair(bias=bias, dtype=dtype)
    q, kv = randn(4, 5, 16, dtype=dtype, seed=1), randn(4, 7, 16, dtype=dtype, seed=2)
    mask = valid_length_mask(torch.tensor([7, 3, 1, 5]), 7)  # (B, K), True = may attend
    ours = module(q, kv, kv, mask[:, None, None, :])
    theirs = run_torch(reference, q, kv, kv, key_padding_mask=to_key_padding_mask(mask))
    assert_close(ours, theirs)
    assert torch.all(ours[1][~mask[:, None, None, :].expand_as(ours[1])] == 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
def test_matches_torch_with_causal_and_padding_mask(dtype, bias):
    reference, module = torch_pair(bias=bias, dtype=dtype)
    x = randn(2, 6, 16, dtype=dtype, seed=1)
    causal = causal_mask(6)  # (Q, K), True = may attend
    assert_close(module(x, x, x, causal), run_torch(reference, x, x, x, attn_mask=~causal))
    padding = valid_length_mask(torch.tensor([6, 4]), 6)  # (B, K)
    ours = module(x, x, x, causal & padding[:, None, None, :])
    theirs = run_torch(
        reference, x, x, x, attn_mask=~causal, key_padding_mask=to_key_padding_mask(padding)
    )
    assert_close(ours, theirs)


@pytest.mark.parametrize(
    "shape", [(5, 7), (1, 5, 7), (3, 1, 5, 7), (3, 4, 5, 7), (3, 1, 1, 7), (1, 4, 1, 1), (7,)]
)
def test_every_broadcastable_mask_shape_matches_the_full_mask(shape):
    module = MultiHeadAttention(16, 4).eval()
    q, kv = randn(3, 5, 16, seed=1), randn(3, 7, 16, seed=2)
    mask = torch.rand(shape, generator=torch.Generator().manual_seed(3)) > 0.3
    full = mask.expand(3, 4, 5, 7)
    assert_close(module(q, kv, kv, mask), module(q, kv, kv, full), tol=0)


@pytest.mark.parametrize("shape", [(2, 1, 7), (2, 5, 7)])
def test_a_3d_mask_is_per_example_even_when_the_batch_equals_the_heads(shape):
    # (B, 1, K) and (B, Q, K) are per-example masks shared by the heads; with B == H they
    # must not be read as one mask per head.
    module = MultiHeadAttention(16, 2).eval()
    q, kv = randn(2, 5, 16, seed=4), randn(2, 7, 16, seed=5)
    mask = torch.rand(shape, generator=torch.Generator().manual_seed(6)) > 0.3
    mask[0, ..., 4:] = False  # example 0: keys 4.. are padding
    out, weights = module(q, kv, kv, mask)
    assert_close((out, weights), module(q, kv, kv, mask[:, None]), tol=0)
    assert torch.equal(weights[0, :, :, 4:], torch.zeros(2, 5, 3))


def test_equals_per_head_scaled_dot_product_attention():
    module = MultiHeadAttention(12, 3).eval()
    q, kv = randn(2, 4, 12, seed=1), randn(2, 6, 12, seed=2)
    mask = causal_mask(4, 6)
    heads, weights = scaled_dot_product_attention(
        module.split_heads(module.w_q(q)),
        module.split_heads(module.w_k(kv)),
        module.split_heads(module.w_v(kv)),
        mask,
    )
    expected = module.w_o(module.merge_heads(heads))
    assert_close(module(q, kv, kv, mask), (expected, weights))


def test_from_torch_and_to_torch_leave_the_global_random_stream_alone():
    mha = nn.MultiheadAttention(16, 4, batch_first=True)
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    MultiHeadAttention.from_torch(mha).to_torch()
    assert torch.equal(torch.rand(3), expected)


def test_split_and_merge_heads_are_inverse():
    module = MultiHeadAttention(12, 3)
    x = randn(2, 5, 12)
    heads = module.split_heads(x)
    assert heads.shape == (2, 3, 5, 4)
    torch.testing.assert_close(heads[:, 1], x[..., 4:8], atol=0, rtol=0)
    torch.testing.assert_close(module.merge_heads(heads), x, atol=0, rtol=0)


@pytest.mark.parametrize("bias", [True, False])
def test_to_torch_round_trip(bias):
    module = MultiHeadAttention(16, 2, bias=bias).double().eval()
    reference = module.to_torch()
    assert reference.batch_first and reference.in_proj_weight.dtype == torch.float64
    x = randn(2, 5, 16, dtype=torch.float64)
    assert_close(module(x, x, x), run_torch(reference, x, x, x))
    back = MultiHeadAttention.from_torch(reference)
    for name, tensor in module.state_dict().items():
        torch.testing.assert_close(back.state_dict()[name], tensor, atol=0, rtol=0)


def test_weights_are_returned_not_stashed_and_gradients_flow():
    module = MultiHeadAttention(8, 2)
    x = randn(2, 3, 8).requires_grad_()
    out, weights = module(x, x, x, causal_mask(3))
    (out.sum() + weights.sum()).backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert all(not isinstance(value, torch.Tensor) for value in vars(module).values())


def test_dropout_only_while_training():
    module = MultiHeadAttention(8, 2, dropout=0.5)
    x = randn(2, 6, 8)
    torch.testing.assert_close(module.eval()(x, x, x)[0], module.eval()(x, x, x)[0])
    torch.manual_seed(0)
    out, weights = module.train()(x, x, x)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 6))  # returned undropped
    assert not torch.allclose(out, module.eval()(x, x, x)[0])


@given(
    batch=st.integers(1, 3),
    num_queries=st.integers(1, 6),
    num_keys=st.integers(1, 6),
    num_heads=st.sampled_from([1, 2, 4]),
    seed=st.integers(0, 2**16),
)
def test_weights_rows_sum_to_one_or_zero(batch, num_queries, num_keys, num_heads, seed):
    gen = torch.Generator().manual_seed(seed)
    module = MultiHeadAttention(8, num_heads)
    q = torch.randn(batch, num_queries, 8, generator=gen) * 10
    kv = torch.randn(batch, num_keys, 8, generator=gen) * 10
    mask = torch.rand(batch, 1, num_queries, num_keys, generator=gen) > 0.5
    out, weights = module(q, kv, kv, mask)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    sums = weights.sum(-1)  # (B, H, Q)
    has_key = mask.any(-1).expand_as(sums)
    torch.testing.assert_close(sums[has_key], torch.ones_like(sums[has_key]))
    assert torch.all(sums[~has_key] == 0)
    assert torch.all(weights[~mask.expand_as(weights)] == 0)


@given(
    batch=st.integers(1, 3),
    length=st.integers(1, 7),
    seed=st.integers(0, 2**16),
    padding=st.booleans(),
)
def test_self_attention_is_permutation_equivariant(batch, length, seed, padding):
    gen = torch.Generator().manual_seed(seed)
    module = MultiHeadAttention(8, 2).double()
    x = torch.randn(batch, length, 8, generator=gen, dtype=torch.float64)
    perm = torch.randperm(length, generator=gen)
    mask = None
    if padding:  # a padding mask (B, 1, 1, K) is permuted with its keys
        mask = torch.rand(batch, 1, 1, length, generator=gen) > 0.3
    out, weights = module(x, x, x, mask)
    out_p, weights_p = module(
        x[:, perm], x[:, perm], x[:, perm], None if mask is None else mask[..., perm]
    )
    torch.testing.assert_close(out_p, out[:, perm])
    torch.testing.assert_close(weights_p, weights[:, :, perm][..., perm])


def test_forward_is_the_core_applied_per_head():
    """The module's attention is helpers.attention.scaled_dot_product_attention, head by head."""
    torch.manual_seed(0)
    module = MultiHeadAttention(12, 3).eval()
    q, kv = randn(2, 4, 12, seed=1), randn(2, 6, 12, seed=2)
    mask = valid_length_mask(torch.tensor([6, 2]), 6)[:, None, None, :]
    out, weights = module(q, kv, kv, mask)
    heads_q = module.split_heads(module.w_q(q))
    heads_k, heads_v = module.split_heads(module.w_k(kv)), module.split_heads(module.w_v(kv))
    heads = []
    for h in range(3):
        head_out, head_w = scaled_dot_product_attention(
            heads_q[:, h], heads_k[:, h], heads_v[:, h], mask[:, 0]
        )
        torch.testing.assert_close(weights[:, h], head_w)
        heads.append(head_out)  # (B, Q, D/H)
    merged = torch.cat(heads, dim=-1)  # (B, Q, D): head h holds features h·D/H onwards
    torch.testing.assert_close(out, module.w_o(merged))


@pytest.mark.parametrize("bias", [True, False])
def test_fused_self_attention_projection_equals_the_three_projections(bias):
    """MultiHeadAttention._project fuses w_q, w_k, w_v for self-attention; it must equal them."""
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4, bias=bias)
    x = randn(3, 5, 16, seed=1)
    fused = module._project(x, x, x)
    separate = (module.w_q(x), module.w_k(x), module.w_v(x))
    for a, b in zip(fused, separate):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


# ---------------------------------------------------------------- grouped- and multi-query attention
def gqa_reference(module, q, kv, mask=None):
    """The same projections, then PyTorch's SDPA with enable_gqa=True (key-value heads shared)."""
    heads = F.scaled_dot_product_attention(
        module.split_heads(module.w_q(q)),  # (B, H, Q, D/H)
        module.split_heads(module.w_k(kv)),  # (B, H_kv, K, D/H)
        module.split_heads(module.w_v(kv)),
        attn_mask=mask,
        enable_gqa=True,
    )
    return module.w_o(module.merge_heads(heads))


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("self_attention", [True, False])
def test_grouped_query_attention_matches_sdpa_enable_gqa(num_kv_heads, dtype, self_attention):
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4, num_kv_heads=num_kv_heads).to(dtype).eval()
    assert module.w_k.out_features == module.w_v.out_features == num_kv_heads * 4
    q = randn(3, 5, 16, dtype=dtype, seed=1)
    kv = q if self_attention else randn(3, 7, 16, dtype=dtype, seed=2)
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    padding = torch.rand(3, 1, 5, kv.shape[1], generator=torch.Generator().manual_seed(4)) > 0.3
    padding[..., 0] = True  # every query keeps a key: SDPA gives NaN for an empty row, ours 0
    for mask in (None, causal_mask(5, kv.shape[1]), padding):
        out, weights = module(q, kv, kv, mask)
        assert weights.shape == (3, 4, 5, kv.shape[1])
        torch.testing.assert_close(out, gqa_reference(module, q, kv, mask), atol=tol, rtol=tol)


def test_query_heads_of_one_group_read_the_same_keys_and_values():
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4, num_kv_heads=2, bias=False).eval()
    with torch.no_grad():  # make query heads 0 and 1 (group 0) identical: same weights
        module.w_q.weight[4:8] = module.w_q.weight[0:4]
        module.w_q.weight[12:16] = module.w_q.weight[8:12]  # and heads 2, 3 (group 1)
    x = randn(2, 6, 16, seed=3)
    _, weights = module(x, x, x)
    torch.testing.assert_close(weights[:, 0], weights[:, 1], atol=0, rtol=0)
    torch.testing.assert_close(weights[:, 2], weights[:, 3], atol=0, rtol=0)
    assert not torch.allclose(weights[:, 0], weights[:, 2])


def test_num_kv_heads_equal_to_num_heads_is_the_old_module():
    torch.manual_seed(3)
    default = MultiHeadAttention(16, 4)
    torch.manual_seed(3)
    explicit = MultiHeadAttention(16, 4, num_kv_heads=4)
    for name, tensor in default.state_dict().items():
        assert torch.equal(explicit.state_dict()[name], tensor)
    x = randn(2, 5, 16)
    assert_close(default(x, x, x, causal_mask(5)), explicit(x, x, x, causal_mask(5)), tol=0)
    assert repr(default) == repr(explicit) and "num_kv_heads" not in repr(default)
    reference, module = torch_pair()
    assert_close(module(x, x, x), run_torch(reference, x, x, x))  # from_torch, unchanged


def test_grouped_query_to_torch_is_refused_by_name():
    module = MultiHeadAttention(16, 4, num_kv_heads=2)
    assert "num_kv_heads=2" in repr(module)
    with pytest.raises(ValueError, match="num_kv_heads"):
        module.to_torch()


@pytest.mark.parametrize("num_kv_heads", [3, 8, 0])
def test_num_kv_heads_must_divide_num_heads(num_kv_heads):
    with pytest.raises(ValueError, match="num_kv_heads"):
        MultiHeadAttention(16, 4, num_kv_heads=num_kv_heads)


@pytest.mark.parametrize("num_kv_heads", [2, 1])
def test_grouped_query_zero_sizes_and_gradients(num_kv_heads):
    module = MultiHeadAttention(8, 4, num_kv_heads=num_kv_heads)
    out, weights = module(randn(2, 0, 8), randn(2, 3, 8), randn(2, 3, 8))
    assert out.shape == (2, 0, 8) and weights.shape == (2, 4, 0, 3)
    out, weights = module(randn(2, 3, 8), randn(2, 0, 8), randn(2, 0, 8))
    assert out.shape == (2, 3, 8) and weights.shape == (2, 4, 3, 0)
    x = randn(2, 3, 8).requires_grad_()
    out, _ = module(x, x, x, causal_mask(3))
    out.sum().backward()
    assert torch.isfinite(x.grad).all() and module.w_k.weight.grad.shape == (num_kv_heads * 2, 8)
