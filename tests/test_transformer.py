"""helpers.transformer: FFN, LayerNorm, Add & Norm, encoder/decoder blocks, parity with torch."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from helpers.masks import causal_mask, to_key_padding_mask, valid_length_mask
from helpers.transformer import (
    AddNorm,
    DecoderBlock,
    EncoderBlock,
    LayerNorm,
    PositionWiseFFN,
    RMSNorm,
    batch_norm_tokens,
)

B, T, S, D, H, F_HIDDEN = 3, 6, 5, 16, 4, 32


@pytest.fixture
def no_fastpath():
    """nn.TransformerEncoderLayer in eval mode under no_grad may take a fused "fast path"
    (one C++ kernel; inside nn.TransformerEncoder it also packs padded batches into nested
    tensors and returns 0 at padded positions). We switch it off with
    torch.backends.mha.set_fastpath_enabled(False) (torch >= 2.1) so that our blocks are
    compared with PyTorch's reference Python path at every position, padded ones included;
    the setting is restored afterwards. (With torch 2.13 the fused path of a single layer
    also agreed to 5e-7 in a check, at padded positions too.)"""
    mha = getattr(torch.backends, "mha", None)
    if mha is None or not hasattr(mha, "set_fastpath_enabled"):
        yield
        return
    before = mha.get_fastpath_enabled()
    mha.set_fastpath_enabled(False)
    yield
    mha.set_fastpath_enabled(before)


def _randomise(module: nn.Module, seed: int) -> None:
    """Random values for every parameter (LayerNorm gains and biases included)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(
                torch.randn(p.shape, generator=generator, dtype=torch.float64) * 0.3
                + (1.0 if p.dim() == 1 and p.shape[0] == D else 0.0)
            )


# --- LayerNorm and batch norm -----------------------------------------------------------


@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    d_model=st.integers(1, 12),
    eps=st.sampled_from([1e-5, 1e-6, 1e-3]),
    double=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_layer_norm_equals_torch(shape, d_model, eps, double, seed):
    generator = torch.Generator().manual_seed(seed)
    dtype = torch.float64 if double else torch.float32
    x = torch.randn(*shape, d_model, generator=generator, dtype=dtype) * 3 + 1
    ours, theirs = LayerNorm(d_model, eps).to(dtype), nn.LayerNorm(d_model, eps).to(dtype)
    with torch.no_grad():
        theirs.weight.copy_(torch.randn(d_model, generator=generator))
        theirs.bias.copy_(torch.randn(d_model, generator=generator))
        ours.weight.copy_(theirs.weight)
        ours.bias.copy_(theirs.bias)
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-5, rtol=1e-5)


# --- RMSNorm ------------------------------------------------------------------------------


@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    d_model=st.integers(1, 12),
    eps=st.sampled_from([1e-5, 1e-6, 1e-3]),
    double=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_rms_norm_equals_torch(shape, d_model, eps, double, seed):
    generator = torch.Generator().manual_seed(seed)
    dtype = torch.float64 if double else torch.float32
    x = torch.randn(*shape, d_model, generator=generator, dtype=dtype) * 3 + 1
    ours, theirs = RMSNorm(d_model, eps).to(dtype), nn.RMSNorm(d_model, eps=eps).to(dtype)
    with torch.no_grad():
        theirs.weight.copy_(torch.randn(d_model, generator=generator))
        ours.weight.copy_(theirs.weight)
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-5, rtol=1e-5)


def test_rms_norm_of_a_centred_token_is_layer_norm_without_shift():
    x = torch.randn(B, T, D, generator=torch.Generator().manual_seed(0)) * 2 + 3
    centred = x - x.mean(-1, keepdim=True)
    torch.testing.assert_close(RMSNorm(D)(centred), LayerNorm(D)(x), atol=1e-5, rtol=1e-5)
    assert RMSNorm(D).weight.shape == (D,) and not hasattr(RMSNorm(D), "bias")
    assert sum(p.numel() for p in RMSNorm(D).parameters()) == D


@pytest.mark.parametrize("norm_first", [False, True])
def test_blocks_take_rms_norm_and_keep_layer_norm_by_default(norm_first):
    torch.manual_seed(0)
    for block in (
        EncoderBlock(D, H, F_HIDDEN, norm_first=norm_first),
        DecoderBlock(D, H, F_HIDDEN, norm_first=norm_first),
    ):
        assert isinstance(block.norm1, LayerNorm) and isinstance(block.norm2, LayerNorm)
    encoder = EncoderBlock(D, H, F_HIDDEN, norm_first=norm_first, norm="rms")
    decoder = DecoderBlock(D, H, F_HIDDEN, norm_first=norm_first, norm="rms")
    assert all(isinstance(n, RMSNorm) for n in (encoder.norm1, encoder.norm2, decoder.norm3))
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    out, _ = encoder(x, causal_mask(T))
    assert out.shape == (B, T, D) and torch.isfinite(out).all()
    out, _, _ = decoder(x, memory, causal_mask(T))
    assert out.shape == (B, T, D) and torch.isfinite(out).all()
    if not norm_first:  # post-norm: each output token has root mean square 1 (gain 1)
        rms = out.pow(2).mean(-1).sqrt()
        torch.testing.assert_close(rms, torch.ones_like(rms), atol=1e-4, rtol=1e-4)


def test_add_norm_rms_equals_rms_norm_of_sum():
    x, sub = torch.randn(B, T, D), torch.randn(B, T, D)
    add_norm = AddNorm(D, norm="rms")
    torch.testing.assert_close(add_norm(x, sub), RMSNorm(D)(x + sub))


def test_from_torch_leaves_the_global_random_stream_alone():
    encoder = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    decoder = nn.TransformerDecoderLayer(16, 4, 32, batch_first=True)
    torch.manual_seed(3)
    expected = torch.rand(3)
    torch.manual_seed(3)
    EncoderBlock.from_torch(encoder), DecoderBlock.from_torch(decoder)
    assert torch.equal(torch.rand(3), expected)


def test_layer_norm_is_per_token_batch_norm_is_not():
    x = torch.randn(B, T, D, generator=torch.Generator().manual_seed(0))
    other = x.clone()
    other[1:] = other[1:] * 5 + 3  # change every sequence but the first
    norm = LayerNorm(D)
    torch.testing.assert_close(norm(x)[0], norm(other)[0])
    assert not torch.allclose(batch_norm_tokens(x)[0], batch_norm_tokens(other)[0])


def test_batch_norm_tokens_equals_batch_norm1d():
    x = torch.randn(B, T, D, generator=torch.Generator().manual_seed(1))
    reference = nn.BatchNorm1d(D, affine=False, track_running_stats=False)
    expected = reference(x.transpose(1, 2)).transpose(1, 2)  # BatchNorm1d wants (B, D, T)
    torch.testing.assert_close(batch_norm_tokens(x), expected, atol=1e-5, rtol=1e-5)
    stats = batch_norm_tokens(x).reshape(-1, D)
    torch.testing.assert_close(stats.mean(0), torch.zeros(D), atol=1e-5, rtol=0)


def test_batch_norm_tokens_valid_mask_uses_real_tokens_only():
    x = torch.randn(B, T, D, generator=torch.Generator().manual_seed(2))
    valid = valid_length_mask(torch.tensor([6, 2, 4]), T)  # (B, T)
    out = batch_norm_tokens(x, valid)
    real = x[valid]  # (N, D)
    expected = (real - real.mean(0)) / torch.sqrt(real.var(0, unbiased=False) + 1e-5)
    torch.testing.assert_close(out[valid], expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="valid"):
        batch_norm_tokens(x, valid[:, :2])


# --- FFN and Add & Norm -------------------------------------------------------------------


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_ffn_shapes_and_positionwise(activation):
    torch.manual_seed(0)
    ffn = PositionWiseFFN(D, F_HIDDEN, activation=activation)
    assert (ffn.linear1.in_features, ffn.linear1.out_features) == (D, F_HIDDEN)
    assert (ffn.linear2.in_features, ffn.linear2.out_features) == (F_HIDDEN, D)
    x = torch.randn(B, T, D)
    out = ffn(x)
    assert out.shape == (B, T, D)
    permutation = torch.randperm(T)
    torch.testing.assert_close(ffn(x[:, permutation]), out[:, permutation])  # no mixing


def test_add_norm_equals_layer_norm_of_sum():
    generator = torch.Generator().manual_seed(3)
    x, y = torch.randn(B, T, D, generator=generator), torch.randn(B, T, D, generator=generator)
    add_norm = AddNorm(D, dropout=0.5).eval()  # eval: dropout is the identity
    torch.testing.assert_close(add_norm(x, y), nn.functional.layer_norm(x + y, (D,)))
    with pytest.raises(ValueError, match="sublayer_out"):
        add_norm(x, y[:, :2])


# --- encoder block --------------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_block_equals_torch(no_fastpath, norm_first, dtype, activation):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(
        D,
        H,
        F_HIDDEN,
        dropout=0.1,
        activation=activation,
        batch_first=True,
        norm_first=norm_first,
        layer_norm_eps=1e-6,
    )
    _randomise(layer, seed=1)
    layer = layer.to(dtype).eval()
    block = EncoderBlock.from_torch(layer)
    assert not block.training and block.norm_first == norm_first and block.norm1.eps == 1e-6
    x = torch.randn(B, T, D, dtype=dtype)
    mask = valid_length_mask(torch.tensor([T, 3, 1]), T)  # (B, T), True = real token
    with torch.no_grad():
        expected = layer(x, src_key_padding_mask=to_key_padding_mask(mask))
        out, weights = block(x, mask[:, None, None, :])
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)  # all positions
    assert weights.shape == (B, H, T, T)
    assert torch.all(weights[1, :, :, 3:] == 0)  # padded keys get no weight
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T, dtype=dtype))


def test_encoder_block_post_ln_output_is_normalised_pre_ln_is_not():
    torch.manual_seed(0)
    x = torch.randn(B, T, D) * 4 + 2
    post, _ = EncoderBlock(D, H, F_HIDDEN)(x)
    pre, _ = EncoderBlock(D, H, F_HIDDEN, norm_first=True)(x)
    torch.testing.assert_close(post.mean(-1), torch.zeros(B, T), atol=1e-5, rtol=0)
    torch.testing.assert_close(post.var(-1, unbiased=False), torch.ones(B, T), atol=1e-3, rtol=0)
    assert pre.mean(-1).abs().max() > 0.5  # the residual stream keeps x's offset


# --- decoder block --------------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_decoder_block_equals_torch(norm_first, dtype):
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(
        D, H, F_HIDDEN, dropout=0.1, batch_first=True, norm_first=norm_first
    )
    _randomise(layer, seed=2)
    layer = layer.to(dtype).eval()
    block = DecoderBlock.from_torch(layer)
    x, memory = torch.randn(B, T, D, dtype=dtype), torch.randn(B, S, D, dtype=dtype)
    src_mask = valid_length_mask(torch.tensor([S, 2, 4]), S)  # (B, S)
    causal = causal_mask(T)  # (T, T), True = may attend
    with torch.no_grad():
        # torch's masks read True = ignore: negate the book's
        expected = layer(
            x, memory, tgt_mask=~causal, memory_key_padding_mask=to_key_padding_mask(src_mask)
        )
        out, self_weights, cross_weights = block(x, memory, causal, src_mask[:, None, None, :])
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert self_weights.shape == (B, H, T, T) and cross_weights.shape == (B, H, T, S)
    assert torch.all(self_weights.triu(1) == 0)  # no peeking ahead
    assert torch.all(cross_weights[1, :, :, 2:] == 0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_block_is_causal(norm_first):
    torch.manual_seed(0)
    block = DecoderBlock(D, H, F_HIDDEN, norm_first=norm_first)
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    out, _, _ = block(x, memory, causal_mask(T))
    for t in range(T - 1):
        changed = x.clone()
        changed[:, t + 1 :] = torch.randn(B, T - t - 1, D)
        out_changed, _, _ = block(changed, memory, causal_mask(T))
        torch.testing.assert_close(out_changed[:, : t + 1], out[:, : t + 1])
        assert not torch.allclose(out_changed[:, t + 1 :], out[:, t + 1 :])


# --- the texts the chapter prints, and bad input ----------------------------------------------


def test_chapter_error_texts():
    with pytest.raises(ValueError) as error:
        DecoderBlock(64, 4, 128)(torch.zeros(2, 5, 64), torch.zeros(2, 7, 32))
    assert str(error.value) == (
        "memory must have d_model=64 features in the last axis, got shape (2, 7, 32)"
    )
    with pytest.raises(ValueError) as error:
        PositionWiseFFN(64, 0)
    assert str(error.value) == "ffn_hidden must be a positive integer, got 0"
    with pytest.raises(ValueError) as error:
        EncoderBlock(64, 4, -128)
    assert str(error.value) == "ffn_hidden must be a positive integer, got -128"


def test_empty_axes():
    assert LayerNorm(D)(torch.zeros(0, T, D)).shape == (0, T, D)
    assert RMSNorm(D)(torch.zeros(0, T, D)).shape == (0, T, D)
    assert batch_norm_tokens(torch.zeros(0, T, D)).shape == (0, T, D)
    assert batch_norm_tokens(torch.zeros(B, 0, D)).shape == (B, 0, D)
    torch.manual_seed(0)
    encoder, decoder = EncoderBlock(D, H, F_HIDDEN), DecoderBlock(D, H, F_HIDDEN)
    out, weights = encoder(torch.randn(B, 0, D))
    assert out.shape == (B, 0, D) and weights.shape == (B, H, 0, 0)
    out, self_weights, cross = decoder(torch.randn(B, 0, D), torch.randn(B, S, D))
    assert out.shape == (B, 0, D) and cross.shape == (B, H, 0, S)
