"""Value and reference tests for the relative-position schemes and the recall task."""

import math

import pytest
import torch
from torch.nn import functional as F

from helpers.relative import (
    alibi_bias,
    alibi_slopes,
    relative_index,
    relative_position_bucket,
    shaw_attention,
    shaw_scores,
)
from helpers.tasks.recall import SCHEMES, RecallModel, recall_scores, recall_task, train_recall


def randn(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


# --- Shaw et al. (2018), Section 3
@pytest.mark.parametrize(
    "num_queries, num_keys, clip", [(5, 5, 2), (3, 7, 1), (6, 4, 3), (0, 3, 2)]
)
def test_relative_index_is_the_clipped_offset(num_queries, num_keys, clip):
    index = relative_index(num_queries, clip, num_keys)
    assert index.shape == (num_queries, num_keys) and index.dtype == torch.long
    for i in range(num_queries):
        for j in range(num_keys):
            assert index[i, j] == max(-clip, min(clip, j - i)) + clip


def _shaw_loop(q, k, v, rel_keys, rel_values):
    """Shaw et al.'s equations 3 to 5, one (i, j) at a time."""
    clip = rel_keys.shape[0] // 2
    num_q, num_k, dim = q.shape[-2], k.shape[-2], q.shape[-1]
    scores = torch.zeros(num_q, num_k, dtype=q.dtype)
    for i in range(num_q):
        for j in range(num_k):
            row = max(-clip, min(clip, j - i)) + clip
            scores[i, j] = q[i] @ (k[j] + rel_keys[row]) / math.sqrt(dim)
    weights = torch.softmax(scores, -1)
    out = torch.zeros(num_q, v.shape[-1], dtype=q.dtype)
    for i in range(num_q):
        for j in range(num_k):
            row = max(-clip, min(clip, j - i)) + clip
            out[i] += weights[i, j] * (v[j] + rel_values[row])
    return scores, out, weights


@pytest.mark.parametrize("num_q, num_k, clip", [(6, 6, 2), (4, 7, 3), (5, 3, 1)])
def test_shaw_matches_the_loop(num_q, num_k, clip):
    q, k, v = randn(2, num_q, 4, seed=1), randn(2, num_k, 4, seed=2), randn(2, num_k, 3, seed=3)
    rel_keys, rel_values = randn(2 * clip + 1, 4, seed=4), randn(2 * clip + 1, 3, seed=5)
    scores = shaw_scores(q, k, rel_keys)
    out, weights = shaw_attention(q, k, v, rel_keys, rel_values)
    for b in range(2):
        want_scores, want_out, want_weights = _shaw_loop(q[b], k[b], v[b], rel_keys, rel_values)
        torch.testing.assert_close(scores[b], want_scores)
        torch.testing.assert_close(out[b], want_out)
        torch.testing.assert_close(weights[b], want_weights)


def test_shaw_against_pytorch_with_the_relative_term_as_a_bias():
    # With a^V = 0, Shaw's layer is PyTorch's attention with the bias q_i · a^K_ij / sqrt(D).
    q, k, v = randn(2, 3, 5, 8, seed=1), randn(2, 3, 6, 8, seed=2), randn(2, 3, 6, 4, seed=3)
    rel_keys = randn(5, 8, seed=4)
    bias = torch.einsum("bhqd,qkd->bhqk", q, rel_keys[relative_index(5, 2, 6)]) / math.sqrt(8)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    out, _ = shaw_attention(q, k, v, rel_keys, torch.zeros(5, 4, dtype=torch.float64))
    torch.testing.assert_close(out, want)


def test_shaw_scores_depend_on_the_offset_only():
    # The same query and key at every position: the scores are constant along diagonals.
    q = randn(1, 4, seed=1).expand(7, 4)
    k = randn(1, 4, seed=2).expand(7, 4)
    scores = shaw_scores(q, k, randn(5, 4, seed=3))
    for offset in range(-6, 7):
        diagonal = scores.diagonal(offset)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal))


# --- T5's buckets (Raffel et al. 2020, Section 2.1)
def _hf_relative_position_bucket(
    relative_position, bidirectional=True, num_buckets=32, max_distance=128
):
    """Literal transcription of Hugging Face's T5Attention._relative_position_bucket
    (itself a port of Mesh TensorFlow's), kept as written there."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
    )
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", [(32, 128), (8, 16), (16, 20), (6, 7)])
def test_bucket_matches_the_reference(bidirectional, num_buckets, max_distance):
    offsets = torch.arange(-1000, 1001)
    got = relative_position_bucket(offsets, bidirectional, num_buckets, max_distance)
    want = _hf_relative_position_bucket(offsets, bidirectional, num_buckets, max_distance)
    assert torch.equal(got, want)
    assert got.min() >= 0 and got.max() == num_buckets - 1


def test_bucket_hand_picked_values():
    # T5's defaults: 32 buckets, max_distance 128. Bidirectional: 16 per side, 8 exact.
    # n = 12: 8 + floor(8 log(12/8) / log 16) = 8 + floor(1.17) = 9; n = 50: 8 + 5 = 13.
    hand = {
        0: 0,
        -1: 1,
        -7: 7,
        -8: 8,
        -12: 9,
        -50: 13,
        -127: 15,
        -5000: 15,
        1: 17,
        7: 23,
        12: 25,
        50: 29,
        5000: 31,
    }
    got = relative_position_bucket(torch.tensor(list(hand)))
    assert got.tolist() == list(hand.values())
    # Causal: 32 buckets for distances, 16 exact; keys after the query are distance 0.
    # n = 20: 16 + floor(16 log(20/16) / log 8) = 16 + floor(1.716) = 17.
    causal = {5: 0, 0: 0, -1: 1, -15: 15, -16: 16, -20: 17, -127: 31, -5000: 31}
    got = relative_position_bucket(torch.tensor(list(causal)), bidirectional=False)
    assert got.tolist() == list(causal.values())


def test_bucket_is_monotone_in_distance():
    distances = torch.arange(0, 500)
    buckets = relative_position_bucket(
        -distances, bidirectional=False, num_buckets=16, max_distance=64
    )
    assert (buckets[1:] >= buckets[:-1]).all()


# --- ALiBi (Press et al. 2022, Section 3)
def _reference_slopes(n):
    """The authors' get_slopes (ofirpress/attention_with_linear_biases), transcribed."""

    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + _reference_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("num_heads", [1, 2, 3, 4, 5, 6, 8, 12, 16, 20])
def test_alibi_slopes_match_the_reference(num_heads):
    torch.testing.assert_close(
        alibi_slopes(num_heads), torch.tensor(_reference_slopes(num_heads), dtype=torch.float64)
    )


def test_alibi_slopes_hand_values():
    assert alibi_slopes(8).tolist() == [2.0**-h for h in range(1, 9)]
    assert alibi_slopes(2).tolist() == [2.0**-4, 2.0**-8]
    # 6 heads: the 4 of P = 4 (1/4, 1/16, 1/64, 1/256), then 2^-1 and 2^-3 from P = 8.
    assert alibi_slopes(6).tolist() == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]


def test_alibi_bias_is_minus_slope_times_distance():
    bias = alibi_bias(4, 5)
    assert bias.shape == (4, 5, 5) and bias.dtype == torch.float32
    slopes = alibi_slopes(4)
    for h in range(4):
        for i in range(5):
            for j in range(i + 1):  # the causal part: -m (i - j)
                assert bias[h, i, j].item() == pytest.approx(-slopes[h].item() * (i - j))
    # queries are the last Q of K positions
    torch.testing.assert_close(alibi_bias(4, 2, 5), bias[:, 3:])


# --- the recall task and its models
def test_recall_task_has_one_needle_at_the_stated_distance():
    data = recall_task(200, 40, min_distance=16, max_distance=30, seed=3)
    assert data.keys.shape == data.values.shape == (200, 40)
    assert ((data.distance >= 16) & (data.distance <= 30)).all()
    query = data.keys[:, -1]
    matches = data.keys[:, :-1] == query[:, None]
    assert (matches.sum(1) == 1).all()
    needle = 39 - data.distance
    assert matches[torch.arange(200), needle].all()
    assert torch.equal(data.answer, data.values[torch.arange(200), needle])
    assert (data.values[:, -1] == 8).all()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_copies_are_the_models_they_would_be_alone(scheme):
    together = RecallModel(scheme, seeds=(3, 5), d_model=8, num_heads=2)
    alone = RecallModel(scheme, seeds=(5,), d_model=8, num_heads=2)
    train_recall(together, steps=5, batch_size=8)
    train_recall(alone, steps=5, batch_size=8)
    data = recall_task(16, 24, seed=0)  # longer than train_len: clamp, extrapolation paths
    with torch.no_grad():
        torch.testing.assert_close(
            together(data.keys, data.values)[1], alone(data.keys, data.values)[0]
        )
    accuracy, loss = recall_scores(together, data)
    assert len(accuracy) == len(loss) == 2


def test_recall_model_refuses_an_unknown_scheme():
    with pytest.raises(ValueError, match="scheme"):
        RecallModel("nope")


def test_train_recall_draws_from_the_model_s_own_vocabulary():
    """A model with 32 keys and 4 values trains on data of 32 keys and 4 values (it used to
    get the task's default 16 and 8, silently, or an index error)."""
    model = RecallModel("alibi", seeds=(0,), num_keys=32, num_values=4)
    losses = train_recall(model, steps=2, batch_size=8)
    assert len(losses) == 1 and math.isfinite(losses[0])
