"""The attention core under PyTorch's transforms: torch.func.vmap, torch.compile with
fullgraph=True (one graph, no break: no Python branch depends on a tensor's values),
torch.jit.trace (a traced module keeps the never-NaN promise for fully masked rows) and
the meta device (shape inference without data).

torch.compile runs with ``backend="eager"``: it checks that TorchDynamo captures one graph,
which is the property at stake, without a C compiler or inductor's compile time.
"""

import pytest
import torch

from helpers.attention import masked_softmax, scaled_dot_product_attention
from helpers.masks import causal_mask
from helpers.multihead import MultiHeadAttention


@pytest.fixture
def mha():
    torch.manual_seed(0)
    return MultiHeadAttention(8, 2).eval()


def _mask_with_empty_row(q, k):
    mask = causal_mask(q, k).clone()
    mask[1] = False  # query 1 may attend no key
    return mask


def test_vmap_masked_softmax_and_sdpa():
    scores = torch.randn(4, 3, 5)
    mask = _mask_with_empty_row(3, 5)
    torch.testing.assert_close(
        torch.func.vmap(lambda s: masked_softmax(s, mask))(scores), masked_softmax(scores, mask)
    )
    q, k, v = torch.randn(4, 3, 2), torch.randn(4, 5, 2), torch.randn(4, 5, 6)
    batched = torch.func.vmap(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)[0])
    torch.testing.assert_close(batched(q, k, v), scaled_dot_product_attention(q, k, v, mask)[0])


def test_vmap_multihead(mha):
    x = torch.randn(4, 5, 8)  # vmapped over the first axis, each example (1, T, D)
    mask = _mask_with_empty_row(5, 5)[None]
    per_example = torch.func.vmap(lambda x: mha(x[None], x[None], x[None], mask)[0][0])(x)
    torch.testing.assert_close(per_example, mha(x, x, x, mask)[0])


def test_vmap_per_example_gradients(mha):
    """The use vmap is for: per-example gradients through the attention."""
    params = dict(mha.named_parameters())
    x = torch.randn(3, 4, 8)

    def loss(p, x):
        out, _ = torch.func.functional_call(mha, p, (x[None], x[None], x[None]))
        return out.square().sum()

    grads = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0))(params, x)
    assert grads["w_q.weight"].shape == (3, 8, 8)
    assert all(torch.isfinite(g).all() for g in grads.values())


@pytest.mark.parametrize("with_mask", [False, True])
def test_compile_fullgraph_one_graph(mha, with_mask):
    torch._dynamo.reset()
    mask = _mask_with_empty_row(5, 5)[None] if with_mask else None
    scores, x = torch.randn(2, 5, 5), torch.randn(2, 5, 8)
    soft = torch.compile(masked_softmax, backend="eager", fullgraph=True)
    torch.testing.assert_close(soft(scores, mask), masked_softmax(scores, mask))
    sdpa = torch.compile(scaled_dot_product_attention, backend="eager", fullgraph=True)
    torch.testing.assert_close(
        sdpa(x, x, x, mask)[0], scaled_dot_product_attention(x, x, x, mask)[0]
    )
    module = torch.compile(mha, backend="eager", fullgraph=True)
    torch.testing.assert_close(module(x, x, x, mask)[0], mha(x, x, x, mask)[0])


def test_jit_trace_keeps_fully_masked_rows_at_zero(mha):
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        traced = torch.jit.trace(mha, (x, x, x, causal_mask(5)[None]))
        empty = torch.zeros(1, 5, 5, dtype=torch.bool)  # every row fully masked
        out, weights = traced(x, x, x, empty)
        eager_out, eager_weights = mha(x, x, x, empty)
    assert not out.isnan().any()
    assert torch.equal(weights, torch.zeros_like(weights))
    torch.testing.assert_close(out, eager_out)
    torch.testing.assert_close(weights, eager_weights)


def test_meta_device_gives_shapes(mha):
    q, k, v = (torch.empty(2, 3, n, device="meta") for n in (4, 4, 6))
    mask = torch.ones(3, 3, dtype=torch.bool, device="meta")
    assert masked_softmax(torch.empty(2, 3, 5, device="meta")).shape == (2, 3, 5)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert out.shape == (2, 3, 6) and weights.shape == (2, 3, 3) and out.is_meta
    x = torch.empty(2, 3, 8, device="meta")
    out, weights = mha.to("meta")(x, x, x)
    assert out.shape == (2, 3, 8) and weights.shape == (2, 2, 3, 3)
