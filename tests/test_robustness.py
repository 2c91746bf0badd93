"""Numerical robustness, one probe each (the review of turn 3, robustness.md): NaN and ±inf
reach the output of the efficient paths as they reach naive attention's; fully masked rows
give finite gradients; float16 and bfloat16 keep statistics in float32, with errors within
twice torch's on the same input; the training loops leave the caller's random streams
alone. Refusals of bad input are in the registry (test_bad_input.py), not here."""

from unittest import mock

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from helpers import efficient, hopfield, masks, measure, transformer
from helpers.attention import scaled_dot_product_attention
from helpers.multihead import MultiHeadAttention
from helpers.positional import SinusoidalPositionalEncoding, sinusoidal_encoding
from helpers.tasks import classification, reversal
from helpers.tasks import hopfield as hopfield_tasks
from helpers.tasks.scoring import hardmax, softmax_with_temperature
from helpers.tasks.tokens import format_matrix

NAN, INF = float("nan"), float("inf")


# ---------------------------------------------------------------- NaN and inf
@pytest.mark.parametrize(
    "q, k",
    [
        ([[NAN, 0.0]], [[0.5, 1.0], [1.0, 0.0], [0.0, 2.0]]),  # a NaN query
        ([[1.0, 0.5], [0.3, 0.2]], [[NAN, 0.0], [0.0, 1.0], [1.0, 1.0]]),  # a NaN key
        ([[1.0, 1.0]], [[INF, 0.0], [0.0, 0.0]]),  # a score of +inf
    ],
)
def test_tiled_attention_propagates_nan_and_inf_as_naive_attention(q, k):
    q, k = torch.tensor(q), torch.tensor(k)
    v = torch.randn(k.shape[0], 2, generator=torch.Generator().manual_seed(0))
    naive, tiled = efficient.naive_attention(q, k, v), efficient.tiled_attention(q, k, v)
    torch.testing.assert_close(tiled, naive, equal_nan=True)
    assert tiled.isnan().any()


def test_online_softmax_keeps_a_nan_row_nan():
    weights = efficient.online_softmax(torch.tensor([[NAN, 0.0, 1.0], [0.0, 1.0, 2.0]]))
    assert weights[0].isnan().all() and torch.isfinite(weights[1]).all()


def test_online_softmax_has_finite_gradients_with_a_fully_masked_row():
    q = torch.randn(2, 3, requires_grad=True)
    k = torch.randn(2, 3, requires_grad=True)
    additive = masks.to_additive_mask(torch.tensor([[True, True], [False, False]]))
    weights = efficient.online_softmax(q @ k.T + additive)
    weights.sum().backward()
    assert torch.equal(weights[1], torch.zeros(2))
    assert torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all()


def test_hardmax_of_a_nan_row_is_nan_as_a_small_temperature_gives():
    scores = torch.tensor([[NAN, 1.0, 2.0], [0.0, 3.0, 1.0]])
    hard = softmax_with_temperature(scores, 0.0)
    assert hard[0].isnan().all() and softmax_with_temperature(scores, 1e-3)[0].isnan().all()
    assert torch.equal(hard[1], hardmax(scores[1:])[0]) and hard[1].tolist() == [0, 1, 0]


# ---------------------------------------------------------------- low precision
def _errors(ours, theirs, reference):
    return (
        (ours.double() - reference).abs().max().item(),
        (theirs.double() - reference).abs().max().item(),
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_sdpa_in_low_precision_is_within_twice_torchs_error(dtype):
    gen = torch.Generator().manual_seed(0)
    q, k = (8 * torch.randn(2, 2, n, 64, generator=gen, dtype=torch.float64) for n in (16, 256))
    v = torch.randn(2, 2, 256, 64, generator=gen, dtype=torch.float64)
    reference = F.scaled_dot_product_attention(q, k, v)
    low = [t.to(dtype) for t in (q, k, v)]
    ours, theirs = _errors(
        scaled_dot_product_attention(*low)[0], F.scaled_dot_product_attention(*low), reference
    )
    assert ours <= 2 * theirs + 1e-3


def test_float16_scores_beyond_65504_do_not_overflow():
    q = torch.full((1, 4, 64), 100.0).half()  # q·k = 640 000 > float16's largest
    out, weights = scaled_dot_product_attention(q, q, q)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert not F.scaled_dot_product_attention(q, q, q).isnan().any()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_layer_norm_in_low_precision_is_within_twice_torchs_error(dtype):
    x = (torch.randn(16, 256, generator=torch.Generator().manual_seed(1)) * 0.1 + 100).to(dtype)
    reference = F.layer_norm(x.double(), (256,))
    ours, theirs = _errors(
        transformer.LayerNorm(256).to(dtype)(x), torch.nn.LayerNorm(256).to(dtype)(x), reference
    )
    assert ours <= 2 * theirs + 1e-3


def test_online_softmax_and_tiled_attention_keep_float32_statistics_in_float16():
    scores = torch.randn(4, 8192, generator=torch.Generator().manual_seed(2)).half()
    ours = (efficient.online_softmax(scores).double().sum(-1) - 1).abs().max().item()
    theirs = (torch.softmax(scores, -1).double().sum(-1) - 1).abs().max().item()
    assert ours <= 2 * theirs + 1e-3
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, n, 64, generator=gen, dtype=torch.float64) for n in (16, 4096, 4096))
    reference = F.scaled_dot_product_attention(q, k, v)
    low = [t.half() for t in (q, k, v)]
    ours, theirs = _errors(
        efficient.tiled_attention(*low), F.scaled_dot_product_attention(*low), reference
    )
    assert ours <= 2 * theirs + 1e-4


def test_sinusoidal_module_gives_the_float64_table_to_float64_inputs():
    module = SinusoidalPositionalEncoding(64, max_len=512).double()
    table = sinusoidal_encoding(512, 64, dtype=torch.float64)
    assert torch.equal(module(torch.zeros(1, 512, 64, dtype=torch.float64))[0], table)


# ---------------------------------------------------------------- modules and state
def test_an_ambiguous_two_d_mask_is_refused_by_name():
    mha = MultiHeadAttention(8, 2)
    q, kv = torch.randn(3, 3, 8), torch.randn(3, 4, 8)
    padding = masks.valid_length_mask(torch.tensor([4, 2, 1]), 4)  # (B, K) with B == Q
    with pytest.raises(ValueError, match=r"mask of shape \(3, 4\) is ambiguous"):
        mha(q, kv, kv, padding)
    out, _ = mha(q, kv, kv, padding[:, None, None, :])  # said explicitly: fine
    assert out.shape == (3, 3, 8)


def test_hopfield_recall_differentiates_its_energies():
    weights = hopfield.hebbian_weights(torch.tensor([[1.0, -1, 1, -1]])).requires_grad_()
    state = torch.tensor([1.0, 1, 1, -1])
    _, energies = hopfield.recall(weights, state, 2, generator=torch.Generator().manual_seed(0))
    energies.sum().backward()
    assert torch.isfinite(weights.grad).all()


def test_corrupt_refuses_an_unsigned_pattern():
    with pytest.raises(ValueError, match="signed dtype"):
        hopfield_tasks.corrupt(torch.ones(6, dtype=torch.uint8), 0.5)


def test_format_matrix_writes_a_numpy_bool_matrix_as_marks():
    assert format_matrix(np.eye(2, dtype=bool)) == format_matrix(torch.eye(2, dtype=torch.bool))


def test_train_full_batch_trains_in_training_mode():
    model = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Dropout(0.5), torch.nn.Linear(4, 1))
    model.eval()
    x, y = torch.randn(8, 2), torch.randn(8, 1)
    classification.train_full_batch(model, x, y, torch.nn.MSELoss(), 2, 0.1)
    assert model.training


def test_reversal_training_needs_eval_every_for_a_target_accuracy():
    with pytest.raises(ValueError, match="target_accuracy needs eval_every"):
        reversal.train_seq2seq(reversal.reversal_model(), 1, eval_every=0, target_accuracy=0.5)


def test_reversal_model_and_training_never_reseed_a_cuda_stream():
    """torch.manual_seed would reseed every CUDA stream; fork_rng(devices=[]) restores none."""
    with (
        mock.patch.object(torch.cuda, "manual_seed_all") as seed_all,
        mock.patch.object(torch.cuda, "manual_seed") as seed_one,
    ):
        model = reversal.reversal_model(seed=7)
        reversal.train_seq2seq(model, 1, batch_size=2)
    assert seed_all.call_count == seed_one.call_count == 0


def test_reversal_runs_are_repeatable_and_leave_the_global_stream_alone():
    before = torch.random.get_rng_state()
    first = reversal.train_seq2seq(reversal.reversal_model(seed=1), 2, batch_size=4)["loss"]
    second = reversal.train_seq2seq(reversal.reversal_model(seed=1), 2, batch_size=4)["loss"]
    assert first == second and torch.equal(torch.random.get_rng_state(), before)


def test_loglog_slope_and_entropy_work_on_good_input():
    assert measure.loglog_slope([1, 2, 4], [1, 4, 16]) == pytest.approx(2.0)
    assert measure.attention_entropy(torch.tensor([0.5, 0.5])).item() == pytest.approx(np.log(2))
