"""Tests for helpers.tasks.classification: the two toy data sets, full-batch training,
probabilities, accuracy and the decision grid."""

import pytest
import torch
from torch import nn

from helpers.mlp import MLP
from helpers.seeding import set_seed
from helpers.tasks.classification import (
    accuracy,
    class1_probability,
    decision_grid,
    train_full_batch,
    two_circles,
    two_moons,
)

# --- data ----------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [two_moons, two_circles])
@pytest.mark.parametrize("num_points", [2, 7, 200])
def test_classification_sets_shapes_dtypes_and_balance(make, num_points):
    x, y = make(num_points, seed=0)
    assert x.shape == (num_points, 2) and x.dtype == torch.float32
    assert y.shape == (num_points,) and y.dtype == torch.int64
    assert set(y.tolist()) <= {0, 1}
    assert int((y == 0).sum()) == num_points // 2
    assert int((y == 1).sum()) == num_points - num_points // 2


@pytest.mark.parametrize("make", [two_moons, two_circles])
def test_classification_sets_are_deterministic_and_shuffled(make):
    x1, y1 = make(100, seed=3)
    x2, y2 = make(100, seed=3)
    x3, _ = make(100, seed=4)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert not torch.equal(x1, x3)
    assert not torch.equal(y1, torch.sort(y1).values)  # labels are not in blocks


def test_two_circles_without_noise_have_the_right_radii():
    x, y = two_circles(50, noise=0.0, factor=0.3, seed=0)
    radius = x.norm(dim=1)
    torch.testing.assert_close(radius[y == 0], torch.ones(25), atol=1e-5, rtol=0)
    torch.testing.assert_close(radius[y == 1], torch.full((25,), 0.3), atol=1e-5, rtol=0)


def test_two_moons_without_noise_lie_on_their_half_circles():
    x, y = two_moons(60, noise=0.0, seed=0)
    upper, lower = x[y == 0], x[y == 1]
    torch.testing.assert_close(upper.norm(dim=1), torch.ones(30), atol=1e-5, rtol=0)
    assert (upper[:, 1] >= 0).all()
    centre = torch.tensor([1.0, 0.5])
    torch.testing.assert_close((lower - centre).norm(dim=1), torch.ones(30), atol=1e-5, rtol=0)
    assert (lower[:, 1] <= 0.5).all()


@pytest.mark.parametrize(
    "call, pattern",
    [
        (lambda: two_moons(1), r"num_points must be an integer >= 2, got 1"),
        (lambda: two_circles(1), r"num_points must be an integer >= 2, got 1"),
        (
            lambda: two_circles(10, factor=1.0),
            r"factor must be a finite number in \(0, 1\), got 1.0",
        ),
        (
            lambda: two_circles(10, factor=0.0),
            r"factor must be a finite number in \(0, 1\), got 0.0",
        ),
        # regressions: these were accepted (NaN points, negative seeds) or failed inside torch
        (lambda: two_moons(10.0), r"num_points must be an integer >= 2, got 10.0"),
        (lambda: two_moons(10, noise=float("nan")), r"noise must be a finite number >= 0, got nan"),
        (lambda: two_moons(10, noise=-0.1), r"noise must be a finite number >= 0, got -0.1"),
        (lambda: two_moons(10, seed=-1), r"seed must be a non-negative integer, got -1"),
        (lambda: two_circles(10, factor=float("nan")), r"factor must be a finite number in"),
        (lambda: two_circles(10, noise=float("inf")), r"noise must be a finite number >= 0"),
        (lambda: two_circles(10, seed=True), r"seed must be a non-negative integer, got True"),
    ],
)
def test_classification_sets_reject_bad_arguments(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


# --- training ----------------------------------------------------------------------------


def _regression():
    x = torch.linspace(-2, 2, 64).unsqueeze(1)
    return x, torch.sin(2 * x)


def test_train_full_batch_is_repeatable_and_learns():
    x, y = _regression()
    runs = []
    for _ in range(2):
        set_seed(3)
        net = MLP(1, [16], 1, activation="tanh")
        runs.append(train_full_batch(net, x, y, nn.MSELoss(), steps=200, lr=0.02))
    assert runs[0] == runs[1]
    assert len(runs[0]) == 200
    assert runs[0][-1] < runs[0][0] / 10


def test_train_full_batch_sgd_and_callback():
    x, y = _regression()
    set_seed(0)
    net = MLP(1, [8], 1)
    seen = []
    losses = train_full_batch(
        net,
        x,
        y,
        nn.MSELoss(),
        steps=5,
        lr=0.05,
        optimizer="sgd",
        callback=lambda step, model: seen.append((step, model is net)),
    )
    assert seen == [(s, True) for s in range(1, 6)]
    assert losses[-1] < losses[0]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(steps=0, lr=0.1), "steps"),
        (dict(steps=2.5, lr=0.1), "steps"),
        (dict(steps=3, lr=0.0), "lr"),
        (dict(steps=3, lr=float("nan")), "lr"),
        (dict(steps=3, lr=0.1, optimizer="lbfgs"), "optimizer"),
        # regressions: these failed inside torch with TypeError or RuntimeError
        (dict(steps=True, lr=0.1), "steps must be a positive integer, got True"),
        (dict(steps=3, lr=float("inf")), r"lr must be a finite number > 0, got inf"),
        (dict(steps=3, lr=True), r"lr must be a finite number > 0, got True"),
        (dict(steps=3, lr=0.1, optimizer=["adam"]), r"optimizer must be one of \['adam', 'sgd'\]"),
        (dict(steps=3, lr=0.1, callback=3), "callback must be callable or None, got 3"),
    ],
)
def test_train_full_batch_rejects_bad_arguments(kwargs, match):
    x, y = _regression()
    with pytest.raises(ValueError, match=match):
        train_full_batch(MLP(1, [2], 1), x, y, nn.MSELoss(), **kwargs)


@pytest.mark.parametrize(
    "args, match",
    [
        ((nn.ReLU(), "x", "y", nn.MSELoss()), "model must have parameters to train, got none"),
        (("model", "x", "y", nn.MSELoss()), "model must be an nn.Module, got 'model'"),
        (
            (MLP(1, [2], 1), [[0.0]], "y", nn.MSELoss()),
            r"x must be a torch.Tensor of shape "
            r"\(N, D_in\)",
        ),
        (
            (MLP(1, [2], 1), torch.zeros(3, 1, dtype=torch.long), "y", nn.MSELoss()),
            "x must be a floating-point tensor, got dtype torch.int64",
        ),
        ((MLP(1, [2], 1), "x", [0.0], nn.MSELoss()), "y must be a torch.Tensor, got"),
        ((MLP(1, [2], 1), "x", "y", "mse"), "loss_fn must be callable, got 'mse'"),
        (
            (MLP(1, [2], 1), "x", "y", lambda out, y: (out - y) ** 2),
            r"loss_fn must return a scalar \(0-d\) tensor, got a tensor of shape \(64, 1\)",
        ),
    ],
)
def test_train_full_batch_rejects_bad_model_data_and_loss(args, match):
    """Regression: these failed inside torch (RuntimeError, TypeError, AttributeError)."""
    x, y = _regression()
    model, xs, ys, loss_fn = args
    xs = x if isinstance(xs, str) else xs
    ys = y if isinstance(ys, str) else ys
    with pytest.raises(ValueError, match=match):
        train_full_batch(model, xs, ys, loss_fn, steps=2, lr=0.1)


# --- classification helpers ----------------------------------------------------------------


def test_class1_probability_for_one_and_two_logits():
    logits = torch.tensor([[0.0], [2.0]])
    torch.testing.assert_close(class1_probability(logits), torch.sigmoid(logits[:, 0]))
    pairs = torch.tensor([[0.0, 0.0], [1.0, 3.0]])
    torch.testing.assert_close(class1_probability(pairs), torch.softmax(pairs, 1)[:, 1])
    with pytest.raises(ValueError, match="logits"):
        class1_probability(torch.zeros(4, 3))
    assert class1_probability(torch.zeros(0, 1)).shape == (0,)


@pytest.mark.parametrize(
    "logits, match",
    [
        ([[0.0]], r"logits must be a torch.Tensor of shape \(N, 1\) or \(N, 2\), got"),
        (
            torch.zeros(3, 1, dtype=torch.long),
            "logits must be a floating-point tensor, got dtype torch.int64",
        ),
        (torch.zeros(3), r"logits must have shape \(N, 1\) or \(N, 2\), got \(3,\)"),
    ],
)
def test_class1_probability_rejects_bad_logits(logits, match):
    """Regression: a list raised AttributeError; int logits gave a sigmoid of integers."""
    with pytest.raises(ValueError, match=match):
        class1_probability(logits)


class _Halfplane(nn.Module):
    """Logit 10 * x_1: class 1 exactly where x_1 > 0."""

    def forward(self, x):
        return 10 * x[:, :1]


def test_accuracy_and_decision_grid():
    x = torch.tensor([[-1.0, 0.0], [1.0, 0.0], [2.0, 1.0], [-2.0, -1.0]])
    y = torch.tensor([0, 1, 1, 0])
    model = _Halfplane()
    assert accuracy(model, x, y) == 1.0
    assert accuracy(model, x, 1 - y) == 0.0
    assert accuracy(model, x, y.bool()) == 1.0 and accuracy(model, x, y.float()) == 1.0
    xx, yy, probs = decision_grid(model, x, resolution=21, margin=0.5)
    assert xx.shape == yy.shape == probs.shape == (21, 21)
    assert xx.min() == pytest.approx(-2.5) and xx.max() == pytest.approx(2.5)
    assert yy.min() == pytest.approx(-1.5) and yy.max() == pytest.approx(1.5)
    assert ((probs >= 0) & (probs <= 1)).all()
    torch.testing.assert_close(probs, torch.sigmoid(10 * xx))
    with pytest.raises(ValueError):
        decision_grid(model, torch.zeros(5, 3))
    with pytest.raises(ValueError):
        accuracy(model, x, y[:3])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda m, x, y: accuracy(m, x[:0], y[:0]), "at least one example, got N=0"),
        (
            lambda m, x, y: accuracy(m, x, torch.tensor([0, 1, 2, 0])),
            "y must hold the labels 0 and 1 only",
        ),
        (lambda m, x, y: accuracy(m, x.tolist(), y), r"x must be a torch.Tensor of shape"),
        (lambda m, x, y: accuracy(m, x, y.tolist()), r"y must be a torch.Tensor of shape \(N,\)"),
        (lambda m, x, y: accuracy("model", x, y), "model must be callable"),
        (lambda m, x, y: decision_grid(m, x[:0]), "at least one point to span the grid, got N=0"),
        (
            lambda m, x, y: decision_grid(m, x, margin=float("nan")),
            "margin must be a finite number >= 0, got nan",
        ),
        (lambda m, x, y: decision_grid(m, x, margin=-1.0), "margin must be a finite number >= 0"),
        (lambda m, x, y: decision_grid(m, x.long()), "x must be a floating-point tensor"),
        (
            lambda m, x, y: decision_grid(m, x, resolution=0),
            "resolution must be a positive integer",
        ),
        (
            lambda m, x, y: decision_grid(m, x, resolution=2.5),
            "resolution must be a positive integer",
        ),
    ],
)
def test_accuracy_and_decision_grid_reject_bad_input(call, match):
    """Regression: N = 0 gave NaN (accuracy) or an IndexError (grid); labels 2 were counted
    as wrong; a NaN margin gave a grid of NaN; lists raised AttributeError."""
    x = torch.tensor([[-1.0, 0.0], [1.0, 0.0], [2.0, 1.0], [-2.0, -1.0]])
    y = torch.tensor([0, 1, 1, 0])
    with pytest.raises(ValueError, match=match):
        call(_Halfplane(), x, y)
