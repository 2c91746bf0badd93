"""Value, identity, property and error tests for the positional encodings."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from helpers.positional import (
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
    rotary_embedding,
    rotation_matrix,
    sinusoidal_encoding,
)


def randn(*shape, dtype=torch.float64, seed=0):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("num_positions, d_model", [(1, 2), (7, 4), (50, 16), (9, 6)])
def test_sinusoidal_values_match_the_loop_formula(num_positions, d_model):
    table = sinusoidal_encoding(num_positions, d_model)
    assert table.shape == (num_positions, d_model) and table.dtype == torch.float32
    expected = torch.zeros(num_positions, d_model, dtype=torch.float64)
    for t in range(num_positions):
        for i in range(d_model // 2):
            angle = t / 10000 ** (2 * i / d_model)
            expected[t, 2 * i], expected[t, 2 * i + 1] = math.sin(angle), math.cos(angle)
    torch.testing.assert_close(table, expected.float(), atol=1e-7, rtol=0)
    torch.testing.assert_close(
        sinusoidal_encoding(num_positions, d_model, dtype=torch.float64),
        expected,
        atol=1e-12,
        rtol=0,
    )


def test_sinusoidal_first_row_and_range():
    table = sinusoidal_encoding(200, 32)
    assert torch.equal(table[0], torch.tensor([0.0, 1.0] * 16))
    assert table.abs().max() <= 1.0
    assert sinusoidal_encoding(0, 4).shape == (0, 4)


def test_shift_is_a_fixed_linear_map():
    table = sinusoidal_encoding(300, 16, dtype=torch.float64)  # (T, D)
    for k in [0, 1, 2, 5, 17, 100]:
        shift = rotation_matrix(k, 16, dtype=torch.float64)  # (D, D)
        torch.testing.assert_close(table[k:], table[: 300 - k] @ shift.T, atol=1e-10, rtol=0)
        assert torch.allclose(shift @ shift.T, torch.eye(16, dtype=torch.float64))  # orthogonal


def test_rotation_matrix_float32_and_block_structure():
    shift = rotation_matrix(3, 8)
    assert shift.shape == (8, 8) and shift.dtype == torch.float32
    assert torch.count_nonzero(shift[:2, 2:]) == 0 and torch.count_nonzero(shift[2:, :2]) == 0
    table = sinusoidal_encoding(40, 8)
    torch.testing.assert_close(table[3:], table[:-3] @ shift.T, atol=1e-6, rtol=0)
    torch.testing.assert_close(
        rotation_matrix(2, 8) @ rotation_matrix(5, 8), rotation_matrix(7, 8), atol=1e-6, rtol=0
    )


def test_dot_product_depends_only_on_offset():
    table = sinusoidal_encoding(400, 32, dtype=torch.float64)
    omegas = 10000.0 ** (-torch.arange(0, 32, 2, dtype=torch.float64) / 32)
    for k in [0, 1, 3, 10, 50]:
        dots = (table[: 400 - k] * table[k:]).sum(-1)  # PE(t)·PE(t+k) for every t
        expected = torch.cos(k * omegas).sum()
        torch.testing.assert_close(dots, expected.expand_as(dots), atol=1e-10, rtol=0)


@given(
    m=st.integers(0, 5000),
    n=st.integers(0, 5000),
    shift=st.integers(-5000, 5000),
    seed=st.integers(0, 2**16),
)
def test_rope_scores_depend_only_on_offset(m, n, shift, seed):
    q, k = randn(2, 1, 8, seed=seed)  # (1, D) each
    score = (rotary_embedding(q, torch.tensor([m])) * rotary_embedding(k, torch.tensor([n]))).sum()
    shifted = (
        rotary_embedding(q, torch.tensor([m + shift]))
        * rotary_embedding(k, torch.tensor([n + shift]))
    ).sum()
    torch.testing.assert_close(shifted, score, atol=1e-9, rtol=1e-9)


@given(length=st.integers(1, 20), seed=st.integers(0, 2**16))
def test_rope_preserves_norms_and_position_zero(length, seed):
    x = randn(2, 3, length, 8, seed=seed)  # (B, H, T, D)
    rotated = rotary_embedding(x)
    assert rotated.shape == x.shape and rotated.dtype == x.dtype
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(rotated[..., 0, :], x[..., 0, :])


def test_rope_equals_rotation_matrix_and_its_formula():
    x = randn(5, 6)  # (T, D)
    rotated = rotary_embedding(x)
    for t in range(5):
        torch.testing.assert_close(rotated[t], x[t] @ rotation_matrix(t, 6, dtype=torch.float64))
    t, i, theta = 3, 1, 10000.0 ** (-2 * 1 / 6)
    expected = (
        x[t, 2 * i] * math.cos(t * theta) - x[t, 2 * i + 1] * math.sin(t * theta),
        x[t, 2 * i] * math.sin(t * theta) + x[t, 2 * i + 1] * math.cos(t * theta),
    )
    torch.testing.assert_close(rotated[t, 2 * i : 2 * i + 2], torch.stack(expected).to(x.dtype))


def test_rope_positions_and_float32():
    x = randn(2, 4, 8, dtype=torch.float32)
    torch.testing.assert_close(rotary_embedding(x, torch.arange(4)), rotary_embedding(x))
    shifted = rotary_embedding(x, torch.arange(4) + 2)
    twice = torch.cat([x[:, :2], x[:, :2]], 1)  # positions 2, 3 hold rows 0, 1 again
    torch.testing.assert_close(shifted[:, :2], rotary_embedding(twice)[:, 2:4])
    per_batch = rotary_embedding(x, torch.tensor([[0, 1, 2, 3], [5, 6, 7, 8]]))
    torch.testing.assert_close(per_batch[1], rotary_embedding(x[1], torch.arange(5, 9)))
    assert rotary_embedding(x).dtype == torch.float32


def test_sinusoidal_module_adds_the_table_and_keeps_a_buffer():
    module = SinusoidalPositionalEncoding(8, max_len=50)
    x = randn(2, 10, 8, dtype=torch.float32)
    torch.testing.assert_close(module(x), x + sinusoidal_encoding(10, 8))
    assert any(buffer is module.encoding for buffer in module.buffers())
    assert "encoding" not in module.state_dict()  # non-persistent
    assert list(module.parameters()) == []
    module = module.to(torch.float64)
    assert module.encoding.dtype == torch.float64
    assert module(x.double()).dtype == torch.float64


def test_positional_modules_check_length_and_features():
    sinusoidal = SinusoidalPositionalEncoding(8, max_len=5)
    with pytest.raises(ValueError, match=r"holds max_len=5 positions, got T=6"):
        sinusoidal(torch.zeros(1, 6, 8))
    with pytest.raises(ValueError, match="d_model=8"):
        sinusoidal(torch.zeros(1, 3, 6))
    learned = LearnedPositionalEncoding(4, 8)
    with pytest.raises(
        ValueError,
        match=r"LearnedPositionalEncoding holds max_len=4 positions, "
        r"got T=5",
    ):
        learned(torch.zeros(2, 5, 8))
    with pytest.raises(ValueError, match="d_model=8"):
        learned(torch.zeros(2, 3, 4))


def test_learned_module_adds_its_trainable_table():
    torch.manual_seed(0)
    module = LearnedPositionalEncoding(16, 8)
    x = randn(2, 10, 8, dtype=torch.float32)
    out = module(x)
    torch.testing.assert_close(out, x + module.embedding.weight[:10])
    out.sum().backward()
    grad = module.embedding.weight.grad
    assert torch.all(grad[:10] == 2) and torch.all(grad[10:] == 0)  # batch of 2, 10 positions


def test_dropout_in_modules():
    module = SinusoidalPositionalEncoding(8, dropout=0.5)
    x = torch.zeros(4, 10, 8)
    torch.testing.assert_close(module.eval()(x), x + sinusoidal_encoding(10, 8))
    assert (module.train()(x) == 0).float().mean() > 0.2


def test_chapter_error_texts():
    for module in (LearnedPositionalEncoding(16, 8), SinusoidalPositionalEncoding(8, max_len=16)):
        with pytest.raises(ValueError) as error:
            module(torch.zeros(1, 20, 8))
        assert str(error.value) == (
            f"{type(module).__name__} holds max_len=16 positions, got "
            f"T=20 (x of shape (1, 20, 8)); build it with a larger "
            f"max_len"
        )


def test_positional_empty_axes():
    assert SinusoidalPositionalEncoding(8)(torch.zeros(2, 0, 8)).shape == (2, 0, 8)
    assert LearnedPositionalEncoding(4, 8)(torch.zeros(0, 3, 8)).shape == (0, 3, 8)
    assert rotary_embedding(torch.zeros(2, 0, 8)).shape == (2, 0, 8)
