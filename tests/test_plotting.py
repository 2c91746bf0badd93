"""Tests for helpers.figures.plotting: figures are returned, never shown."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from torch import nn  # noqa: E402

from helpers.figures.plotting import (  # noqa: E402
    heatmap,
    multihead_diagram,
    plot_decision_boundary,
    show_heatmaps,
    to_numpy,
)
from helpers.mlp import MLP  # noqa: E402


@pytest.fixture(autouse=True)
def no_show(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("plt.show() must never be called by a helper")

    monkeypatch.setattr(plt, "show", refuse)
    monkeypatch.setattr(Figure, "show", refuse)
    yield
    plt.close("all")


def images(fig):
    return [im for ax in fig.axes for im in ax.get_images()]


def test_to_numpy_detaches_tensors_that_require_grad():
    x = torch.ones(2, 2, requires_grad=True) * 3
    out = to_numpy(x)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64
    np.testing.assert_array_equal(out, np.full((2, 2), 3.0))


def test_heatmap_returns_a_figure_with_labels_and_colorbar():
    matrix = torch.softmax(torch.randn(3, 5), dim=-1)
    fig = heatmap(matrix, title="weights")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "keys" and ax.get_ylabel() == "queries"
    assert ax.get_title() == "weights"
    assert len(fig.axes) == 2  # the heatmap and its colour bar
    np.testing.assert_allclose(images(fig)[0].get_array(), matrix.numpy(), rtol=1e-6)


def test_heatmap_custom_labels_ticks_and_no_colorbar():
    fig = heatmap(
        np.eye(2),
        xlabel="positions",
        ylabel="tokens",
        colorbar=False,
        xticklabels=["a", "b"],
        yticklabels=["c", "d"],
    )
    ax = fig.axes[0]
    assert len(fig.axes) == 1
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("positions", "tokens")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["c", "d"]


def test_heatmap_draws_into_a_given_axes():
    fig, (left, right) = plt.subplots(1, 2)
    returned = heatmap([[0.2, 0.8]], ax=right, colorbar=False)
    assert returned is fig
    assert len(right.get_images()) == 1 and len(left.get_images()) == 0


def test_heatmap_annotations():
    fig = heatmap(np.array([[0.25, 0.75]]), annotate=True, fmt="{:.1f}")
    assert sorted(t.get_text() for t in fig.axes[0].texts) == ["0.2", "0.8"]


@pytest.mark.parametrize("shape", [(4,), (2, 3, 4), ()])
def test_heatmap_rejects_wrong_rank(shape):
    with pytest.raises(ValueError, match=r"matrix must be 2-D \(Q, K\), got shape"):
        heatmap(np.zeros(shape))


def test_show_heatmaps_4d_grid_shares_one_colour_scale():
    grid = torch.rand(2, 3, 4, 5)
    grid[1, 2, 0, 0] = 7.0
    fig = show_heatmaps(grid, titles=[["a", "b", "c"], ["d", "e", "f"]])
    assert isinstance(fig, Figure)
    assert len(images(fig)) == 6
    assert {im.get_clim() for im in images(fig)} == {(0.0, 7.0)}
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert [ax.get_title() for ax in panels] == list("abcdef")
    assert panels[3].get_ylabel() == "queries" and panels[4].get_ylabel() == ""
    assert panels[4].get_xlabel() == "keys" and panels[1].get_xlabel() == ""
    assert len(fig.axes) == 7  # six panels and one colour bar


def test_show_heatmaps_3d_is_one_row_with_flat_titles():
    fig = show_heatmaps(np.random.rand(2, 3, 3), titles=["head 1", "head 2"])
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert [ax.get_title() for ax in panels] == ["head 1", "head 2"]


@pytest.mark.parametrize(
    "grid",
    [
        [np.random.rand(3, 4), np.random.rand(3, 5)],  # a flat list, different shapes
        [[np.random.rand(3, 4), np.random.rand(3, 5)]],  # one row, different shapes
        [[[0.1, 0.9], [0.5, 0.5]], [[1.0, 0.0], [0.3, 0.7]]],  # a flat list of nested lists
    ],
)
def test_show_heatmaps_lists_make_one_row(grid):
    fig = show_heatmaps(grid)
    assert len(images(fig)) == 2
    assert all(im.get_array().ndim == 2 for im in images(fig))


def test_show_heatmaps_ragged_rows_switch_off_empty_panels():
    fig = show_heatmaps([[torch.rand(2, 2), torch.rand(2, 2)], [torch.rand(2, 2)]])
    assert len(images(fig)) == 3
    assert sum(not ax.axison for ax in fig.axes) == 1


@pytest.mark.parametrize("grid", [np.zeros((2, 3)), np.zeros((1, 2, 3, 4, 5))])
def test_show_heatmaps_rejects_wrong_rank(grid):
    with pytest.raises(ValueError, match=r"grid must be 3-D \(C, Q, K\) or 4-D"):
        show_heatmaps(grid)


@pytest.mark.parametrize(
    "call",
    [
        lambda: heatmap(np.zeros((2, 3)), xticklabels=["a", "b"]),
        lambda: heatmap(np.zeros((2, 3)), yticklabels=["a", "b", "c"]),
        lambda: show_heatmaps(np.zeros((2, 3, 3)), titles=["only one"]),
        lambda: heatmap(np.zeros((2, 3)), annotate=True, fmt="{:d}"),  # fails mid-drawing
    ],
)
def test_a_failing_call_raises_and_leaves_no_figure_open(call):
    plt.close("all")
    with pytest.raises((ValueError, TypeError)):
        call()
    assert plt.get_fignums() == []


def test_show_heatmaps_rejects_empty_grid():
    with pytest.raises(ValueError, match="grid must hold at least one matrix"):
        show_heatmaps([])


def test_multihead_diagram_draws_one_box_per_head_and_returns_the_figure():
    fig = multihead_diagram(num_heads=4)
    assert isinstance(fig, Figure)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sum(t.startswith("head ") for t in texts) == 4
    assert any("concat" in t for t in texts) and any("W^O" in t for t in texts)


def test_multihead_diagram_draws_into_a_given_axes():
    fig, ax = plt.subplots()
    assert multihead_diagram(2, ax=ax) is fig


@pytest.mark.parametrize("bad", [0, 9, 2.0, True, "3", float("nan")])
def test_multihead_diagram_rejects_bad_head_counts(bad):
    with pytest.raises(ValueError, match="num_heads"):
        multihead_diagram(bad)
    assert plt.get_fignums() == []


def test_multihead_diagram_rejects_what_is_not_an_axes():
    """Regression: ax="left" raised AttributeError."""
    with pytest.raises(ValueError, match="ax must be a matplotlib Axes or None, got 'left'"):
        multihead_diagram(2, ax="left")


# --- to_numpy and the checks of heatmap / show_heatmaps ---------------------------------------


@pytest.mark.parametrize(
    "value, match",
    [
        ("weights", "matrix must be a tensor, an array or a nested list of numbers, got 'weights'"),
        (None, "got None"),
        ([[1.0], [1.0, 2.0]], r"rows of equal length\), got \[\[1.0\], \[1.0, 2.0\]\]"),
        ({"a": 1}, "matrix must be a tensor"),
        ([["a", "b"]], "matrix must be a tensor"),
        (
            torch.ones(2, 2, dtype=torch.complex64),
            "matrix must hold real numbers, got dtype torch.complex64",
        ),
        (np.ones((2, 2), dtype=complex), "matrix must hold real numbers"),
    ],
)
def test_to_numpy_rejects_what_is_not_a_real_matrix(value, match):
    """Regression: ragged lists and strings raised numpy's own errors; complex values lost
    their imaginary part with only a warning."""
    with pytest.raises(ValueError, match=match):
        to_numpy(value)


def test_to_numpy_takes_lists_of_tensors_and_bools():
    np.testing.assert_array_equal(
        to_numpy([torch.ones(2), torch.zeros(2)]), [[1.0, 1.0], [0.0, 0.0]]
    )
    assert to_numpy(torch.tensor([True, False])).dtype == np.float64


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(vmin=float("nan")), "vmin must be a finite real number, got nan"),
        (dict(vmax=float("inf")), "vmax must be a finite real number, got inf"),
        (dict(vmax="1"), "vmax must be a finite real number, got '1'"),
        (dict(vmin=1.0, vmax=0.5), r"vmin must not exceed vmax, got vmin=1.0, vmax=0.5"),
        (dict(fmt=2), "fmt must be a format string"),
        (dict(ax="right"), "ax must be a matplotlib Axes or None, got 'right'"),
    ],
)
def test_heatmap_rejects_bad_options_before_making_a_figure(kwargs, match):
    """Regression: NaN and reversed limits drew an empty or wrong colour scale; a bad ax
    raised AttributeError."""
    plt.close("all")
    with pytest.raises(ValueError, match=match):
        heatmap(np.eye(2), **kwargs)
    assert plt.get_fignums() == []


def test_heatmap_takes_equal_limits_and_0d_tensor_limits():
    fig = heatmap(np.zeros((2, 2)), vmin=0.0, vmax=0.0)  # an all-zero frame of a slider
    assert len(images(fig)) == 1  # matplotlib widens the equal limits itself
    fig = heatmap(np.eye(2), vmax=torch.tensor(0.5))
    assert images(fig)[0].get_clim() == (0.0, 0.5)


@pytest.mark.parametrize(
    "grid, match",
    [
        (
            [np.zeros((2, 2)), np.zeros(3)],
            r"grid\[0\]\[1\] must be a 2-D \(Q, K\) matrix, "
            r"got shape \(3,\)",
        ),
        ([[np.zeros((2, 2))], [np.zeros((0, 2))]], r"grid\[1\]\[0\] must not be empty"),
        (["a", "b"], "matrix must be a tensor"),
    ],
)
def test_show_heatmaps_rejects_entries_that_are_not_matrices(grid, match):
    """Regression: a 1-D entry failed in imshow with TypeError; an empty one in nanmax."""
    plt.close("all")
    with pytest.raises(ValueError, match=match):
        show_heatmaps(grid)
    assert plt.get_fignums() == []


def test_show_heatmaps_rejects_bad_limits():
    with pytest.raises(ValueError, match="vmin must not exceed vmax"):
        show_heatmaps(np.zeros((2, 3, 3)), vmin=1.0, vmax=0.0)


# --- plot_decision_boundary ------------------------------------------------------------------


class _Halfplane(nn.Module):
    """Logit 10 * x_1: class 1 exactly where x_1 > 0."""

    def forward(self, x):
        return 10 * x[:, :1]


POINTS = torch.tensor([[-1.0, 0.0], [1.0, 0.0], [2.0, 1.0], [-2.0, -1.0]])
LABELS = torch.tensor([0, 1, 1, 0])


def test_plot_decision_boundary_returns_the_figure():
    fig, ax = plt.subplots()
    assert plot_decision_boundary(_Halfplane(), POINTS, LABELS, ax=ax, title="half-plane") is fig
    assert ax.get_title() == "half-plane"
    own = plot_decision_boundary(MLP(2, [4], 1), POINTS, LABELS, colorbar=False)
    assert own is not fig and len(own.axes) == 1


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: plot_decision_boundary(_Halfplane(), POINTS.tolist(), LABELS),
            r"x must be a torch.Tensor of shape \(N, 2\)",
        ),
        (
            lambda: plot_decision_boundary(_Halfplane(), POINTS.long(), LABELS),
            "x must be a floating-point tensor",
        ),
        (
            lambda: plot_decision_boundary(_Halfplane(), POINTS[:, :1], LABELS),
            r"expected a tensor of shape \('\*', 2\), got shape \(4, 1\)",
        ),
        (
            lambda: plot_decision_boundary(_Halfplane(), POINTS, LABELS[:3]),
            r"expected a tensor of shape \(4,\), got shape \(3,\)",
        ),
        (
            lambda: plot_decision_boundary(_Halfplane(), POINTS, LABELS.tolist()),
            r"y must be a torch.Tensor of shape \(N,\)",
        ),
        (
            lambda: plot_decision_boundary(_Halfplane(), POINTS, torch.tensor([0, 1, 2, 0])),
            "y must hold the labels 0 and 1 only",
        ),
        (
            lambda: plot_decision_boundary(_Halfplane(), POINTS, LABELS, resolution=0),
            "resolution must be a positive integer, got 0",
        ),
        (
            lambda: plot_decision_boundary(_Halfplane(), POINTS, LABELS, ax="left"),
            "ax must be a matplotlib Axes or None",
        ),
        (
            lambda: plot_decision_boundary(_Halfplane(), POINTS[:0], LABELS[:0]),
            "at least one point",
        ),
    ],
)
def test_plot_decision_boundary_rejects_bad_input_and_leaves_no_figure(call, match):
    """Regression: lists raised AttributeError, labels 2 were silently left out of the
    scatter, and a failing call left an open figure behind."""
    plt.close("all")
    with pytest.raises(ValueError, match=match):
        call()
    assert plt.get_fignums() == []
