"""helpers.tasks.reversal: the reversal task, the chapter's model and the training loop.

No long training here: a few steps check that the loss falls and that runs repeat. The
>= 99 % held-out accuracy is shown in the chapter and timed by benchmarks/transformer.py.
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from helpers.tasks.reversal import (
    BOS_ID,
    EOS_ID,
    FIRST_DIGIT,
    PAD_ID,
    VOCAB_SIZE,
    reversal_batch,
    reversal_model,
    source_valid_lens,
    stability_run,
    token_accuracy,
    train_seq2seq,
)

SMALL = dict(d_model=16, num_heads=2, ffn_hidden=32, num_encoder_layers=1, num_decoder_layers=1)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny tensors: one thread avoids thread contention on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_token_ids():
    assert (PAD_ID, BOS_ID, EOS_ID, FIRST_DIGIT, VOCAB_SIZE) == (0, 1, 2, 3, 13)


# --- the task ---------------------------------------------------------------------------------


@given(
    batch=st.integers(1, 6), length=st.integers(1, 10), data=st.data(), seed=st.integers(0, 2**16)
)
def test_reversal_batch_reverses(batch, length, data, seed):
    min_length = data.draw(st.one_of(st.none(), st.integers(1, length)))
    src, tgt_in, tgt_out = reversal_batch(
        batch, length, torch.Generator().manual_seed(seed), min_length
    )
    assert src.shape == (batch, length) and tgt_in.shape == tgt_out.shape == (batch, length + 1)
    lens = source_valid_lens(src)
    assert int(lens.min()) >= (length if min_length is None else min_length)
    for row in range(batch):
        n = int(lens[row])
        digits = src[row, :n]
        assert torch.all((digits >= FIRST_DIGIT) & (digits < VOCAB_SIZE))
        assert torch.all(src[row, n:] == PAD_ID)
        assert tgt_out[row].tolist() == (
            digits.flip(0).tolist() + [EOS_ID] + [PAD_ID] * (length - n)
        )
        assert tgt_in[row].tolist() == (
            ([BOS_ID] + digits.flip(0).tolist()) + [PAD_ID] * (length - n)
        )


def test_reversal_batch_is_seeded_and_checks_arguments():
    first = reversal_batch(8, 6, torch.Generator().manual_seed(5))
    second = reversal_batch(8, 6, torch.Generator().manual_seed(5))
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    with pytest.raises(ValueError, match="min_length"):
        reversal_batch(2, 4, min_length=5)
    with pytest.raises(ValueError, match="length"):
        reversal_batch(2, 0)


@pytest.mark.parametrize(
    "args, kwargs, pattern",
    [
        ((-1, 4), {}, "batch_size must be a non-negative integer"),
        ((2.0, 4), {}, "batch_size must be a non-negative integer"),
        ((2, 4), dict(min_length=0), "min_length must be a positive integer"),
        ((2, 4), dict(generator=5), "generator must be a torch.Generator or None"),
    ],
)
def test_reversal_batch_rejects_bad_arguments(args, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        reversal_batch(*args, **kwargs)


def test_reversal_batch_of_zero_sequences_is_empty():
    src, tgt_in, tgt_out = reversal_batch(0, 5)
    assert src.shape == (0, 5) and tgt_in.shape == tgt_out.shape == (0, 6)


def test_source_valid_lens_rejects_what_is_not_token_ids():
    assert source_valid_lens(torch.tensor([[3, 4, 0], [0, 0, 0]])).tolist() == [2, 0]
    with pytest.raises(ValueError, match="src must be an integer tensor"):
        source_valid_lens(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="src must have shape"):
        source_valid_lens(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="src must be a torch.Tensor"):
        source_valid_lens([[3, 4]])


def test_reversal_model_is_seeded_and_checks_its_seed():
    first, second = reversal_model(3, **SMALL), reversal_model(3, **SMALL)
    assert all(torch.equal(a, b) for a, b in zip(first.parameters(), second.parameters()))
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        reversal_model(-1)


# --- training -------------------------------------------------------------------------------


def test_training_lowers_the_loss_and_repeats():
    histories = []
    for _ in range(2):
        model = reversal_model(0, **SMALL)
        rng_before = torch.random.get_rng_state()
        histories.append(
            train_seq2seq(
                model,
                40,
                batch_size=32,
                lr=3e-3,
                warmup_steps=10,
                length=5,
                min_length=3,
                progress=False,
            )
        )
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
    history = train_seq2seq(
        model,
        50,
        batch_size=16,
        length=3,
        eval_every=5,
        target_accuracy=0.0,
        eval_sequences=20,
        progress=False,
    )
    assert history["steps"] == 5 and len(history["accuracy"]) == 1
    step, accuracy = history["accuracy"][0]
    assert step == 5 and 0.0 <= accuracy <= 1.0
    assert accuracy == token_accuracy(model, 20, length=3)


def test_training_stops_below_the_loss_threshold():
    full = train_seq2seq(reversal_model(0, **SMALL), 12, batch_size=16, length=3, progress=False)[
        "loss"
    ]
    window = [sum(full[i - 4 : i + 1]) / 5 for i in range(4, 12)]  # mean of steps i-4..i
    threshold = window[3] + 1e-6  # first reached at step 8 or earlier
    expected = next(i + 5 for i, mean in enumerate(window) if mean < threshold)
    stopped = train_seq2seq(
        reversal_model(0, **SMALL), 12, batch_size=16, length=3, stop_loss=threshold, progress=False
    )
    assert stopped["steps"] == expected == len(stopped["loss"]) <= 8
    assert stopped["loss"] == full[:expected]  # the same run, cut where it learned
    short = stability_run(False, 0, steps=6, num_layers=1, d_model=16, length=3, stop_loss=1e3)
    assert len(short) == 5  # stops at the first step with a 5-step mean


def test_training_with_radam_matches_torch_radam():
    model = reversal_model(0, **SMALL)
    reference = reversal_model(0, **SMALL)
    ours = train_seq2seq(
        model, 3, batch_size=8, length=3, lr=1e-2, optimizer="radam", progress=False
    )["loss"]
    optimizer = torch.optim.RAdam(reference.parameters(), lr=1e-2)
    generator, losses = torch.Generator().manual_seed(0), []
    reference.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for _ in range(3):
            src, tgt_in, tgt_out = reversal_batch(8, 3, generator)
            logits, _ = reference(src, tgt_in, source_valid_lens(src))
            loss = torch.nn.functional.cross_entropy(
                logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD_ID
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    assert ours == pytest.approx(losses, rel=1e-6)
    adam = train_seq2seq(
        reversal_model(0, **SMALL), 3, batch_size=8, length=3, lr=1e-2, progress=False
    )["loss"]
    assert adam[0] == ours[0] and adam[1:] != ours[1:]  # same start, other steps


def test_stability_run_is_short_and_repeatable():
    first = stability_run(norm_first=False, warmup_steps=2, steps=4, num_layers=1, d_model=16)
    second = stability_run(norm_first=False, warmup_steps=2, steps=4, num_layers=1, d_model=16)
    assert len(first) == 4 and first == second
    with pytest.raises(ValueError, match="lr"):
        train_seq2seq(reversal_model(0, **SMALL), 1, lr=-1.0, progress=False)


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(lr=float("nan")), "lr must be a finite number > 0"),
        (dict(lr=0.0), "lr must be a finite number > 0"),
        (dict(warmup_steps=2.5), "warmup_steps must be a non-negative integer"),
        (dict(warmup_steps=-1), "warmup_steps must be a non-negative integer"),
        (dict(batch_size=0), "batch_size must be a positive integer"),
        (dict(eval_every=-5), "eval_every must be a non-negative integer"),
        (dict(target_accuracy=1.5), "target_accuracy must be a finite number in"),
        (dict(eval_sequences=0), "eval_sequences must be a positive integer"),
        (dict(progress="no"), "progress must be True or False"),
        (dict(seed=-3), "seed must be a non-negative integer"),
        (dict(min_length=9), "min_length=9 must be <= length=8"),
        (dict(stop_loss=0.0), "stop_loss must be a finite number > 0"),
        (dict(optimizer="sgd"), "optimizer must be one of \\['adam', 'radam'\\], got 'sgd'"),
    ],
)
def test_train_seq2seq_rejects_bad_arguments(kwargs, pattern):
    model = reversal_model(0, **SMALL)
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError, match=pattern):
        train_seq2seq(model, 1, **{"progress": False, **kwargs})
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # untouched


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(num_sequences=0), "num_sequences must be a positive integer"),
        (dict(batch_size=0), "batch_size must be a positive integer"),
        (dict(seed=-1), "seed must be a non-negative integer"),
        (dict(length=0), "length must be a positive integer"),
    ],
)
def test_token_accuracy_rejects_bad_arguments(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        token_accuracy(reversal_model(0, **SMALL), **kwargs)


def test_training_and_accuracy_reject_a_model_of_another_kind():
    with pytest.raises(ValueError, match="model must be a Seq2SeqTransformer"):
        train_seq2seq(torch.nn.Linear(2, 2), 1, progress=False)
    with pytest.raises(ValueError, match="model must be a Seq2SeqTransformer"):
        token_accuracy(torch.nn.Linear(2, 2))


def test_stability_run_rejects_a_bad_width():
    with pytest.raises(ValueError, match="d_model must be a positive integer"):
        stability_run(False, 0, d_model=16.5, steps=1)
