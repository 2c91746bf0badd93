"""Tests for helpers.plotting: figures are returned, never shown."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from helpers.plotting import heatmap, multihead_diagram, show_heatmaps, to_numpy  # noqa: E402


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
    fig = heatmap(np.eye(2), xlabel="positions", ylabel="tokens", colorbar=False,
                  xticklabels=["a", "b"], yticklabels=["c", "d"])
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


@pytest.mark.parametrize("grid", [
    [np.random.rand(3, 4), np.random.rand(3, 5)],  # a flat list, different shapes
    [[np.random.rand(3, 4), np.random.rand(3, 5)]],  # one row, different shapes
    [[[0.1, 0.9], [0.5, 0.5]], [[1.0, 0.0], [0.3, 0.7]]],  # a flat list of nested lists
])
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


@pytest.mark.parametrize("call", [
    lambda: heatmap(np.zeros((2, 3)), xticklabels=["a", "b"]),
    lambda: heatmap(np.zeros((2, 3)), yticklabels=["a", "b", "c"]),
    lambda: show_heatmaps(np.zeros((2, 3, 3)), titles=["only one"]),
    lambda: heatmap(np.zeros((2, 3)), annotate=True, fmt="{:d}"),  # fails mid-drawing
])
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


@pytest.mark.parametrize("bad", [0, 9, 2.0, True, "3"])
def test_multihead_diagram_rejects_bad_head_counts(bad):
    with pytest.raises(ValueError, match="num_heads"):
        multihead_diagram(bad)
