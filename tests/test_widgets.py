"""Tests for helpers.figures.widgets: a SelectionSlider jslinked to a Stack of PNG frames."""

import base64
import io
import struct

import ipywidgets as widgets
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from ipywidgets.widgets.widget import _instances  # noqa: E402
from ipywidgets.widgets.widget_link import DirectionalLink, Link  # noqa: E402
from PIL import Image  # noqa: E402

from helpers.figures.widgets import (LiveFigure, figure_to_png, figure_words, png_data_url,  # noqa: E402
                                     slider_figure, slider_heatmap, slider_heatmap_2d)

DPI = 30  # small frames keep the tests fast
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def no_show(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("plt.show() must never be called by a helper")
    monkeypatch.setattr(plt, "show", refuse)
    yield
    plt.close("all")


def links_between(source_widget, target_widget):
    """Two-way links (widgets.jslink) from ``source_widget.index`` to the target Stack."""
    found = []
    for widget in list(_instances.values()):
        if type(widget) is not Link:  # jsdlink makes a DirectionalLink: not two-way
            continue
        (src, src_attr), (dst, dst_attr) = widget.source, widget.target
        if src is source_widget and dst is target_widget:
            assert (src_attr, dst_attr) == ("index", "selected_index")
            found.append(widget)
    return found


def png_chunks(data):
    """The (type, payload) chunks of a PNG file."""
    assert data[:8] == PNG_SIGNATURE
    chunks, pos = [], 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        chunks.append((data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]))
        pos += 12 + length
    return chunks


def check_frame(data):
    chunk_types = [kind for kind, _ in png_chunks(data)]
    assert chunk_types[0] == b"IHDR" and chunk_types[-1] == b"IEND"
    for kind, payload in png_chunks(data):
        if kind in (b"tEXt", b"iTXt", b"zTXt"):
            assert not payload.startswith(b"Software"), "the Software chunk breaks byte-stability"
    assert b"Software" not in data
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "PNG"
        assert image.mode == "P"
        assert len(image.getpalette()) // 3 <= 256
        colours = image.getcolors(maxcolors=256)
        assert colours is not None and 2 <= len(colours) <= 256


def matrix_for(value):
    """A (3, 4) softmax whose sharpness grows with ``value``: a different picture per value."""
    scores = np.arange(12, dtype=float).reshape(3, 4) * value
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True)


VALUES = [0.1, 0.5, 2.0]


@pytest.fixture(scope="module")
def live():
    return slider_heatmap(matrix_for, VALUES, description="temperature", fmt="{:.2f}",
                          initial=0.5, dpi=DPI)


# ------------------------------------------------------------------ one parameter
def test_structure_is_vbox_of_selection_slider_and_stack_of_images(live):
    assert isinstance(live, widgets.VBox) and isinstance(live, LiveFigure)
    slider, stack = live.children
    assert isinstance(slider, widgets.SelectionSlider)
    assert isinstance(stack, widgets.Stack)
    assert len(stack.children) == len(VALUES)
    # frames are HTML <img> with data: URLs, so a switch paints without a blank frame
    assert all(isinstance(frame, widgets.HTML) and frame.value.startswith('<img src="data:')
               for frame in stack.children)
    assert slider.description == "temperature"
    assert slider.tooltip == "temperature"  # the label's title: never "null"


def test_readout_labels_are_the_formatted_values_and_initial_is_selected(live):
    slider, stack = live.children
    assert [label for label, _ in slider.options] == ["0.10", "0.50", "2.00"]
    assert slider.index == 1 and slider.label == "0.50"
    assert stack.selected_index == 1


def test_slider_index_is_jslinked_to_stack(live):
    slider, stack = live.children
    assert len(links_between(slider, stack)) == 1


def test_frames_are_quantised_pngs_one_per_value(live):
    _, stack = live.children
    assert [frame.value.split('"')[1] for frame in stack.children] == [
        png_data_url(frame) for frame in live.frames]
    for frame in live.frames:
        check_frame(frame)
    assert len(set(live.frames)) == len(VALUES)  # each value draws its own picture


def test_frames_are_byte_stable(live):
    again = slider_heatmap(matrix_for, VALUES, description="temperature", fmt="{:.2f}",
                           initial=0.5, dpi=DPI)
    assert again.frames == live.frames


def test_repr_is_short_and_stable(live):
    assert repr(live) == "LiveFigure(temperature: 3 frames)"


def test_sequence_of_matrices_matches_the_function_form(live):
    from_list = slider_heatmap([matrix_for(v) for v in VALUES], VALUES,
                               description="temperature", fmt="{:.2f}", dpi=DPI)
    assert from_list.frames == live.frames


def test_callable_fmt_and_second_panel():
    calls = []

    def second_panel(ax, value):
        calls.append(value)
        ax.plot([0, 1], [0, value])

    live = slider_heatmap(matrix_for, [1, 2], description="w",
                          fmt=lambda v: f"w={v}", second_panel=second_panel, dpi=DPI)
    slider, _ = live.children
    assert [label for label, _ in slider.options] == ["w=1", "w=2"]
    assert calls == [1, 2]


def test_slider_figure_calls_render_once_per_value():
    rendered = []

    def render(value):
        rendered.append(value)
        fig, ax = plt.subplots(figsize=(2, 2))
        ax.plot([0, 1], [0, value])
        return fig

    live = slider_figure(render, [1, 2, 3], description="slope", dpi=DPI)
    slider, stack = live.children
    assert rendered == [1, 2, 3]
    assert [label for label, _ in slider.options] == ["1", "2", "3"]
    assert len(links_between(slider, stack)) == 1
    assert plt.get_fignums() == []  # every frame's figure was closed
    for frame in live.frames:
        check_frame(frame)


# ------------------------------------------------------------------ two parameters
def test_2d_has_nested_stacks_with_one_link_per_inner_stack():
    def matrices(a, b):
        return matrix_for(a) * b

    live = slider_heatmap_2d(matrices, [0.1, 1.0], [0.5, 1.0, 2.0],
                             descriptions=("a", "b"), fmts=("{:.1f}", "{:.1f}"),
                             initial=(1.0, 2.0), dpi=DPI)
    slider_a, slider_b, outer = live.children
    assert isinstance(slider_a, widgets.SelectionSlider)
    assert isinstance(slider_b, widgets.SelectionSlider)
    assert [label for label, _ in slider_a.options] == ["0.1", "1.0"]
    assert [label for label, _ in slider_b.options] == ["0.5", "1.0", "2.0"]
    assert isinstance(outer, widgets.Stack) and len(outer.children) == 2
    assert outer.selected_index == 1 == slider_a.index
    assert len(links_between(slider_a, outer)) == 1
    for i, inner in enumerate(outer.children):
        assert isinstance(inner, widgets.Stack) and len(inner.children) == 3
        assert inner.selected_index == 2 == slider_b.index
        assert len(links_between(slider_b, inner)) == 1
        assert [image.value.split('"')[1] for image in inner.children] == [
            png_data_url(frame) for frame in live.frames[i]]
    assert live.alts[0][2].endswith("at a = 0.1 and b = 2.0")
    assert live.first_frame == live.frames[1][2]
    flat = [frame for row in live.frames for frame in row]
    assert len(set(flat)) == 6
    for frame in flat:
        check_frame(frame)
    assert repr(live) == "LiveFigure(a, b: 2 x 3 frames)"


# ------------------------------------------------------------------ bad input
def test_empty_values_raise():
    with pytest.raises(ValueError, match="values must hold at least one parameter value"):
        slider_heatmap(matrix_for, [], description="x", dpi=DPI)
    with pytest.raises(ValueError, match="values must hold at least one parameter value"):
        slider_figure(lambda v: plt.figure(), [], description="x", dpi=DPI)
    with pytest.raises(ValueError, match="values must hold at least one parameter value"):
        slider_heatmap_2d(lambda a, b: matrix_for(a), [1.0], [], descriptions=("a", "b"))


def test_duplicate_labels_raise():
    with pytest.raises(ValueError, match=r"fmt gives two values the same label.*more digits"):
        slider_heatmap(matrix_for, [0.11, 0.12], description="x", fmt="{:.1f}", dpi=DPI)


def test_matrices_length_mismatch_raises():
    with pytest.raises(ValueError, match=r"matrices holds 2 matrices but values holds 3"):
        slider_heatmap([matrix_for(1), matrix_for(2)], [1, 2, 3], description="x", dpi=DPI)


def test_initial_not_in_values_raises():
    with pytest.raises(ValueError, match=r"initial must be one of values \[1, 2\], got 3"):
        slider_heatmap(matrix_for, [1, 2], description="x", initial=3, dpi=DPI)


def test_2d_needs_a_function():
    with pytest.raises(ValueError, match="matrices must be a function"):
        slider_heatmap_2d([matrix_for(1)], [1], [1], descriptions=("a", "b"), dpi=DPI)


@pytest.mark.parametrize("colors", [1, 257])
def test_figure_to_png_rejects_bad_palette_size(colors):
    with pytest.raises(ValueError, match=rf"colors must be between 2 and 256, got {colors}"):
        figure_to_png(plt.figure(), colors=colors)


def test_jsdlink_would_not_count_as_a_link():
    """The link finder is strict: a one-way link (jsdlink) is not reported as jslink."""
    slider = widgets.SelectionSlider(options=[("a", 0), ("b", 1)])
    stack = widgets.Stack(children=[widgets.Image(), widgets.Image()])
    link = widgets.jsdlink((slider, "index"), (stack, "selected_index"))
    assert isinstance(link, DirectionalLink)
    assert links_between(slider, stack) == []
    widgets.jslink((slider, "index"), (stack, "selected_index"))
    assert len(links_between(slider, stack)) == 1


# ipywidgets 7 (Colab): no Stack, so the kernel swaps the frame of one Image. The mechanism
# is chosen once, by helpers.figures.widgets.KERNEL_FREE; here it is switched off to test
# that path under ipywidgets 8 (tests/test_clients.py runs it under a real ipywidgets 7.7.1).

@pytest.fixture
def kernel_path(monkeypatch):
    import helpers.figures.widgets as live_widgets
    monkeypatch.setattr(live_widgets, "KERNEL_FREE", False)


def test_kernel_free_follows_the_installed_ipywidgets():
    import helpers.figures.widgets as live_widgets
    major = int(widgets.__version__.split(".")[0])
    assert live_widgets.KERNEL_FREE is (major >= 8)
    assert live_widgets.KERNEL_FREE is hasattr(widgets, "Stack")


def test_kernel_path_swaps_one_image(kernel_path):
    live = slider_heatmap(matrix_for, VALUES, description="sharpness", dpi=DPI, initial=0.5)
    slider, image = live.children
    assert isinstance(slider, widgets.SelectionSlider) and isinstance(image, widgets.Image)
    assert image.format == "png" and image.value == live.frames[1]
    for i in (2, 0, 1):
        slider.index = i
        assert image.value == live.frames[i], f"index {i} shows the wrong frame"
    assert len(set(live.frames)) == 3
    assert not any(type(w) is Link and w.source[0] is slider for w in _instances.values())


def test_kernel_path_2d_shows_the_frame_of_both_sliders(kernel_path):
    live = slider_heatmap_2d(lambda a, b: matrix_for(a * b), [0.5, 2.0], [1.0, 2.0, 3.0],
                             descriptions=("a", "b"), dpi=DPI)
    slider_a, slider_b, image = live.children
    assert isinstance(image, widgets.Image) and image.value == live.frames[0][0]
    slider_b.index = 2
    assert image.value == live.frames[0][2]
    slider_a.index = 1
    assert image.value == live.frames[1][2]
    slider_b.index = 0
    assert image.value == live.frames[1][0]


def test_every_frame_has_alt_text_naming_the_figure_and_the_value(live):
    _, stack = live.children
    for frame, label in zip(stack.children, ["0.10", "0.50", "2.00"]):
        alt = frame.value.split('alt="')[1].split('"')[0]
        assert alt.endswith(f"at temperature = {label}") and len(alt) > 30


def test_the_output_bundle_carries_the_first_frame_as_png(live):
    """An untrusted notebook, GitHub or nbviewer shows this picture, not the text form."""
    bundle = live._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert base64.b64decode(data["image/png"]) == live.frames[1] == live.first_frame
    assert data["text/plain"] == "LiveFigure(temperature: 3 frames)"
    assert "application/vnd.jupyter.widget-view+json" in data


def test_figure_words_reads_titles_and_axis_labels():
    fig, (left, right) = plt.subplots(1, 2)
    left.set(title="weights", xlabel="keys", ylabel="queries")
    right.set(xlabel="x")
    assert figure_words(fig) == "weights (queries against keys); a plot (x)"
    plt.close(fig)
