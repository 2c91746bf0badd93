"""helpers.seq2seq: the full model, greedy decoding, the reversal task and the training loop.

No long training here: a few steps check that the loss falls and that runs repeat. The
>= 99 % held-out accuracy is shown in the chapter and timed by benchmarks/transformer.py.
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from helpers import transformer
from helpers.seq2seq import (BOS, EOS, FIRST_DIGIT, PAD, VOCAB_SIZE, Seq2SeqTransformer,
                             greedy_decode, reversal_batch, reversal_model, source_valid_lens,
                             stability_run, token_accuracy, train_seq2seq)

B, S, T = 4, 7, 5
SMALL = dict(d_model=16, num_heads=2, ffn_hidden=32, num_encoder_layers=1,
             num_decoder_layers=1)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny tensors: one thread avoids thread contention on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _tokens(shape, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(FIRST_DIGIT, VOCAB_SIZE, shape, generator=generator)


# --- the task ---------------------------------------------------------------------------------

@given(batch=st.integers(1, 6), length=st.integers(1, 10), data=st.data(),
       seed=st.integers(0, 2**16))
def test_reversal_batch_reverses(batch, length, data, seed):
    min_length = data.draw(st.one_of(st.none(), st.integers(1, length)))
    src, tgt_in, tgt_out = reversal_batch(batch, length, torch.Generator().manual_seed(seed),
                                          min_length)
    assert src.shape == (batch, length) and tgt_in.shape == tgt_out.shape == (batch, length + 1)
    lens = source_valid_lens(src)
    assert int(lens.min()) >= (length if min_length is None else min_length)
    for row in range(batch):
        n = int(lens[row])
        digits = src[row, :n]
        assert torch.all((digits >= FIRST_DIGIT) & (digits < VOCAB_SIZE))
        assert torch.all(src[row, n:] == PAD)
        assert tgt_out[row].tolist() == digits.flip(0).tolist() + [EOS] + [PAD] * (length - n)
        assert tgt_in[row].tolist() == [BOS] + digits.flip(0).tolist() + [PAD] * (length - n)


def test_reversal_batch_is_seeded_and_checks_arguments():
    first = reversal_batch(8, 6, torch.Generator().manual_seed(5))
    second = reversal_batch(8, 6, torch.Generator().manual_seed(5))
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    with pytest.raises(ValueError, match="min_length"):
        reversal_batch(2, 4, min_length=5)
    with pytest.raises(ValueError, match="length"):
        reversal_batch(2, 0)


# --- the model ----------------------------------------------------------------------------

@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_model_shapes_and_attention_dict(norm_first, positional):
    model = reversal_model(0, **{**SMALL, "num_decoder_layers": 2}, norm_first=norm_first,
                           positional=positional)
    src, tgt_in = _tokens((B, S), 0), _tokens((B, T), 1)
    logits, attention = model(src, tgt_in, torch.tensor([7, 3, 5, 1]))
    assert logits.shape == (B, T, VOCAB_SIZE)
    assert [len(attention[k]) for k in ("encoder_self", "decoder_self", "cross")] == [1, 2, 2]
    assert attention["encoder_self"][0].shape == (B, 2, S, S)
    assert all(w.shape == (B, 2, T, T) for w in attention["decoder_self"])
    assert all(w.shape == (B, 2, T, S) for w in attention["cross"])
    assert torch.all(attention["cross"][0][1, :, :, 3:] == 0)  # padding of source 1


def test_model_is_reexported_by_helpers_transformer():
    assert transformer.Seq2SeqTransformer is Seq2SeqTransformer
    assert transformer.greedy_decode is greedy_decode


def test_model_decoder_is_causal_and_ignores_source_padding():
    model = reversal_model(0, **SMALL)
    src, tgt_in = _tokens((B, S), 2), _tokens((B, T), 3)
    logits, _ = model(src, tgt_in)
    for t in range(T - 1):
        changed = tgt_in.clone()
        changed[:, t + 1:] = _tokens((B, T - t - 1), 10 + t)
        torch.testing.assert_close(model(src, changed)[0][:, :t + 1], logits[:, :t + 1])
    lens = torch.tensor([S, 4, 2, 6])
    padded = src.clone()
    padded[torch.arange(S) >= lens[:, None]] = PAD  # different tokens beyond the lengths
    torch.testing.assert_close(model(padded, tgt_in, lens)[0], model(src, tgt_in, lens)[0])


def test_model_rejects_bad_input():
    model = reversal_model(0, **SMALL, max_len=6)
    src = _tokens((B, S - 1), 0)
    with pytest.raises(ValueError, match="tgt_in"):
        model(src, _tokens((B, 7), 1))  # longer than max_len = 6
    with pytest.raises(ValueError, match="src"):
        model(_tokens((B, 7), 1), _tokens((B, 3), 1))
    with pytest.raises(ValueError, match="tgt_in"):
        model(src, torch.full((B, 3), VOCAB_SIZE))  # not a token id
    with pytest.raises(ValueError, match="src"):
        model(src.float(), _tokens((B, 3), 1))
    with pytest.raises(ValueError, match="d_model"):
        reversal_model(0, d_model=18, num_heads=4)  # 18 % 4 != 0
    with pytest.raises(ValueError, match="ffn_hidden"):
        reversal_model(0, ffn_hidden=0)
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, src, 7, BOS)
    tgt = _tokens((B, 3), 1)
    for bad in (torch.full((1,), 2), torch.full((B, 1), 2), torch.full((B + 1,), 2), [2] * B):
        with pytest.raises(ValueError, match=r"src_valid_lens must have shape \(B,\)"):
            model(src, tgt, bad)  # (1,) would silently apply one length to every sequence


# --- greedy decoding ------------------------------------------------------------------------

def test_greedy_decode_shapes_and_consistency():
    model = reversal_model(0, **SMALL).train()
    src = _tokens((B, S), 4)
    tokens, cross = greedy_decode(model, src, 6, BOS, return_attention=True)
    assert model.training  # mode restored
    assert tokens.shape == (B, 6) and tokens.dtype == torch.long
    assert len(cross) == 1 and cross[0].shape == (B, 2, 6, S)
    # every token is the argmax of a teacher-forced pass over the decoded prefix
    tgt_in = torch.cat([torch.full((B, 1), BOS), tokens[:, :-1]], dim=1)
    model.eval()
    logits, attention = model(src, tgt_in)
    assert torch.equal(logits.argmax(-1), tokens)
    torch.testing.assert_close(attention["cross"][0], cross[0])


def test_greedy_decode_stops_at_eos_and_pads():
    model = reversal_model(0, **SMALL)
    with torch.no_grad():  # make EOS the most likely token after the first step
        model.output.bias.zero_()
        model.output.bias[EOS] = 50.0
    tokens = greedy_decode(model, _tokens((B, S), 5), 8, BOS, eos=EOS)
    assert tokens.shape == (B, 1) and torch.all(tokens == EOS)  # stopped early
    with torch.no_grad():
        model.output.bias[EOS] = 0.0
        model.output.bias[5] = 50.0
    assert greedy_decode(model, _tokens((B, S), 5), 8, BOS, eos=EOS).shape == (B, 8)


# --- training -------------------------------------------------------------------------------

def test_training_lowers_the_loss_and_repeats():
    histories = []
    for _ in range(2):
        model = reversal_model(0, **SMALL)
        rng_before = torch.random.get_rng_state()
        histories.append(train_seq2seq(model, 40, batch_size=32, lr=3e-3, warmup_steps=10,
                                       length=5, min_length=3, progress=False))
        assert torch.equal(torch.random.get_rng_state(), rng_before)  # global RNG untouched
    loss = histories[0]["loss"]
    assert len(loss) == 40 and histories[0]["steps"] == 40
    assert sum(loss[-5:]) / 5 < 0.8 * sum(loss[:5]) / 5
    assert loss == histories[1]["loss"]  # deterministic given the seed
    lrs = histories[0]["lr"]
    assert lrs[0] == pytest.approx(3e-4) and lrs[9] == pytest.approx(3e-3)
    assert lrs[10:] == [pytest.approx(3e-3)] * 30


def test_training_stops_at_the_target_accuracy():
    model = reversal_model(0, **SMALL)
    history = train_seq2seq(model, 50, batch_size=16, length=3, eval_every=5,
                            target_accuracy=0.0, eval_sequences=20, progress=False)
    assert history["steps"] == 5 and len(history["accuracy"]) == 1
    step, accuracy = history["accuracy"][0]
    assert step == 5 and 0.0 <= accuracy <= 1.0
    assert accuracy == token_accuracy(model, 20, length=3)


def test_stability_run_is_short_and_repeatable():
    first = stability_run(norm_first=False, warmup_steps=2, steps=4, num_layers=1, d_model=16)
    second = stability_run(norm_first=False, warmup_steps=2, steps=4, num_layers=1, d_model=16)
    assert len(first) == 4 and first == second
    with pytest.raises(ValueError, match="lr"):
        train_seq2seq(reversal_model(0, **SMALL), 1, lr=-1.0, progress=False)
