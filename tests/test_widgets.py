"""Tests for helpers.figures.widgets: a SelectionSlider jslinked to a Stack of PNG frames."""

import base64
import io
import re
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

from helpers.figures.frames import (  # noqa: E402
    MIN_TEXT_PX,
    PIXEL_RATIO,
    figure_to_png,
    figure_words,
    png_data_url,
    smallest_text_px,
)
from helpers.figures.widgets import LiveFigure, slider_figure, slider_heatmap, slider_heatmap_2d  # noqa: E402

DPI = 66  # small frames keep the tests fast; 10-point text is 9.2 px, legible (>= 9 px)
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
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        chunks.append((data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]))
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
    return slider_heatmap(
        matrix_for, VALUES, description="temperature", fmt="{:.2f}", initial=0.5, dpi=DPI
    )


# ------------------------------------------------------------------ one parameter
def test_structure_is_vbox_of_selection_slider_and_stack_of_images(live):
    assert isinstance(live, widgets.VBox) and isinstance(live, LiveFigure)
    slider, stack = live.children
    assert isinstance(slider, widgets.SelectionSlider)
    assert isinstance(stack, widgets.Stack)
    assert len(stack.children) == len(VALUES)
    # frames are HTML <img> with data: URLs, so a switch paints without a blank frame
    assert all(
        isinstance(frame, widgets.HTML) and frame.value.startswith('<img src="data:')
        for frame in stack.children
    )
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
        png_data_url(frame) for frame in live.frames
    ]
    for frame in live.frames:
        check_frame(frame)
    assert len(set(live.frames)) == len(VALUES)  # each value draws its own picture


def test_frames_are_byte_stable(live):
    again = slider_heatmap(
        matrix_for, VALUES, description="temperature", fmt="{:.2f}", initial=0.5, dpi=DPI
    )
    assert again.frames == live.frames


def test_repr_is_short_and_stable(live):
    assert repr(live) == "LiveFigure(temperature: 3 frames)"


def test_sequence_of_matrices_matches_the_function_form(live):
    from_list = slider_heatmap(
        [matrix_for(v) for v in VALUES], VALUES, description="temperature", fmt="{:.2f}", dpi=DPI
    )
    assert from_list.frames == live.frames


def test_callable_fmt_and_second_panel():
    calls = []

    def second_panel(ax, value):
        calls.append(value)
        ax.plot([0, 1], [0, value])

    live = slider_heatmap(
        matrix_for,
        [1, 2],
        description="w",
        fmt=lambda v: f"w={v}",
        second_panel=second_panel,
        dpi=DPI,
    )
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

    live = slider_heatmap_2d(
        matrices,
        [0.1, 1.0],
        [0.5, 1.0, 2.0],
        descriptions=("a", "b"),
        fmts=("{:.1f}", "{:.1f}"),
        initial=(1.0, 2.0),
        dpi=DPI,
    )
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
            png_data_url(frame) for frame in live.frames[i]
        ]
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
    live = slider_heatmap_2d(
        lambda a, b: matrix_for(a * b),
        [0.5, 2.0],
        [1.0, 2.0, 3.0],
        descriptions=("a", "b"),
        dpi=DPI,
    )
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


def test_every_frame_records_its_smallest_text_in_css_px(live):
    """tests/test_browser.py reads ``data-text-px`` to check the text a desktop reader sees
    when the column scales a frame down: the smallest drawn size at the frames' dpi."""
    from helpers.figures.frames import MIN_TEXT_PX

    _, stack = live.children
    for frame in stack.children:
        text_px = float(frame.value.split('data-text-px="')[1].split('"')[0])
        assert MIN_TEXT_PX <= text_px <= 12 * DPI / 72, frame.value[-200:]


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


# --- legibility: every frame's text at least MIN_TEXT_PX CSS px on a phone (natural size)


def _text_figure(size_pt):
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.set_xticks([]), ax.set_yticks([])
    ax.text(0.5, 0.5, "label", fontsize=size_pt)
    return fig


@pytest.mark.parametrize(
    "size_pt, dpi, readable", [(8, 80, False), (7, 100, True), (8.5, 80, True), (10, 30, False)]
)
def test_figure_to_png_refuses_text_under_nine_pixels(size_pt, dpi, readable):
    fig = _text_figure(size_pt)
    if readable:
        assert figure_to_png(fig, dpi=dpi)[:8] == PNG_SIGNATURE
    else:
        with pytest.raises(ValueError, match=r"smallest text is .* px at dpi=.*at least 9 px"):
            figure_to_png(fig, dpi=dpi)
    assert not plt.fignum_exists(fig.number), "the figure is closed either way"


def test_slider_figure_refuses_a_frame_with_small_text():
    with pytest.raises(ValueError, match="at least 9 px"):
        slider_figure(lambda v: _text_figure(6), [1, 2], description="x")
    assert plt.get_fignums() == []


def test_smallest_text_px_counts_only_drawn_text():
    fig, ax = plt.subplots()
    ax.set_xlim(0, 1), ax.set_ylim(0, 1)
    ax.set_xticks([0, 1]), ax.set_yticks([])
    ax.tick_params(labelsize=12)
    ax.text(0.5, 0.5, "", fontsize=4)  # empty: never drawn
    ax.text(0.5, 0.5, "hidden", fontsize=5).set_visible(False)
    ax.text(5.0, 5.0, "outside the axes but drawn", fontsize=11, clip_on=False)
    assert smallest_text_px(fig, dpi=72) == pytest.approx(11)
    assert smallest_text_px(fig, dpi=144) == pytest.approx(22)
    assert smallest_text_px(fig) == pytest.approx(11 * fig.dpi / 72)
    empty = plt.figure()
    assert smallest_text_px(empty) == float("inf")
    with pytest.raises(ValueError, match="dpi"):
        smallest_text_px(fig, dpi=0)
    assert MIN_TEXT_PX == 9


# --- pixel ratio: frames hold PIXEL_RATIO PNG pixels per CSS pixel and are shown at CSS size


def _png_size(png):
    with Image.open(io.BytesIO(png)) as image:
        return image.size


def test_frames_hold_two_png_pixels_per_css_pixel_and_say_their_css_size():
    assert PIXEL_RATIO == 2
    live = slider_heatmap(matrix_for, VALUES, description="t", dpi=DPI, figsize=(4.0, 3.0))
    _, stack = live.children
    for png, frame in zip(live.frames, stack.children):
        width, height = _png_size(png)
        assert (width, height) == (round(4.0 * DPI * 2), round(3.0 * DPI * 2))
        assert f'width="{round(width / 2)}" height="{round(height / 2)}"' in frame.value
    data, metadata = live._repr_mimebundle_()
    assert metadata["image/png"] == {"width": round(4.0 * DPI), "height": round(3.0 * DPI)}
    single = slider_heatmap(
        matrix_for, VALUES, description="t", dpi=DPI, figsize=(4.0, 3.0), pixel_ratio=1
    )
    assert _png_size(single.frames[0]) == (round(4.0 * DPI), round(3.0 * DPI))
    assert single._repr_mimebundle_()[1]["image/png"]["width"] == round(4.0 * DPI)


def test_kernel_path_shows_a_two_x_frame_at_its_css_width(kernel_path):
    live = slider_heatmap(matrix_for, VALUES, description="t", dpi=DPI, figsize=(4.0, 3.0))
    _, image = live.children
    assert image.width == str(round(4.0 * DPI))


def test_legibility_is_judged_at_the_css_resolution_not_the_png_one():
    # 8 pt at 80 CSS dpi is 8.9 CSS px whatever the pixel ratio: refused at 1x and at 2x
    for ratio in (1, 2):
        with pytest.raises(ValueError, match="at least 9 px"):
            figure_to_png(_text_figure(8), dpi=80, pixel_ratio=ratio)
    assert _png_size(figure_to_png(_text_figure(9), dpi=80, pixel_ratio=2)) == (320, 240)


@pytest.mark.parametrize("ratio", [0, 4, 1.5, True, "2"])
def test_figure_to_png_rejects_bad_pixel_ratio(ratio):
    fig = _text_figure(10)
    with pytest.raises(ValueError, match="pixel_ratio must be 1, 2 or 3"):
        figure_to_png(fig, pixel_ratio=ratio)
    assert not plt.fignum_exists(fig.number)


# ------------------------------------------------------------------ panels on a phone
def _two_panels(suptitle=None, colorbar=False):
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.5, 3.4))
    image = left.imshow(np.eye(4))
    if colorbar:
        fig.colorbar(image, ax=left)
    left.set_title("weights")
    right.plot([0, 1, 2], [0, 1, 4])
    right.set_title("output")
    if suptitle:
        fig.suptitle(suptitle)
    fig.tight_layout()
    fig.savefig(io.BytesIO(), format="png", dpi=DPI)
    return fig


@pytest.mark.parametrize("colorbar", [False, True])
def test_panel_columns_cuts_between_side_by_side_panels(colorbar):
    """One cut, in the gap between the two panels; a colour bar stays with its heatmap."""
    from helpers.figures.frames import panel_columns

    fig = _two_panels(colorbar=colorbar)
    columns = panel_columns(fig)
    right = fig.axes[1].get_tightbbox(fig.canvas.get_renderer()).x0 / fig.bbox.width
    assert len(columns) == 3 and columns[0] == 0.0 and columns[-1] == 1.0, columns
    assert 0.3 < columns[1] < right, (columns, right)
    plt.close(fig)


def test_panel_columns_keeps_a_figure_whole_when_a_suptitle_spans_it():
    from helpers.figures.frames import panel_columns

    fig = _two_panels(suptitle="a title across both panels")
    assert panel_columns(fig) == [0.0, 1.0]
    fig_one, ax = plt.subplots()
    fig_one.savefig(io.BytesIO(), format="png", dpi=DPI)
    assert panel_columns(fig_one) == [0.0, 1.0]
    plt.close(fig), plt.close(fig_one)


def test_split_png_cuts_whole_css_pixels_and_keeps_every_column():
    from helpers.figures.frames import css_size, figure_to_png, split_png

    png = figure_to_png(_two_panels(), dpi=DPI, pixel_ratio=2)
    pieces = split_png(png, [0.0, 0.37, 1.0], pixel_ratio=2)
    widths = [Image.open(io.BytesIO(p)).size[0] for p in pieces]
    heights = {Image.open(io.BytesIO(p)).size[1] for p in pieces}
    assert len(pieces) == 2 and all(w % 2 == 0 for w in widths), widths
    assert sum(widths) == Image.open(io.BytesIO(png)).size[0] and len(heights) == 1
    assert sum(css_size(p, 2)[0] for p in pieces) == css_size(png, 2)[0]
    assert split_png(png, [0.0, 1.0], pixel_ratio=2) == [png]


def test_a_two_panel_frame_is_one_image_per_panel_and_one_alt_text():
    """On a phone the panels stack (book/assets/phone.css); on a desktop they sit side by
    side. The first panel's alt text describes the whole figure, the others are marked
    decorative, and every panel records the frame's smallest text."""
    live = slider_heatmap(
        matrix_for,
        [1, 2],
        description="w",
        second_panel=lambda ax, value: ax.plot([0, 1], [0, value]),
        dpi=DPI,
    )
    _, stack = live.children
    for frame, whole in zip(stack.children, live.frames):
        html = frame.value
        assert html.startswith('<div class="live-panels"><img src="data:'), html[:60]
        alts = re.findall(r'alt="([^"]*)"', html)
        widths = [int(w) for w in re.findall(r'<img [^>]*?width="(\d+)"', html)]
        assert len(alts) == 2 and alts[0].endswith(
            "at w = 1" if whole is live.frames[0] else "at w = 2"
        )
        assert alts[1] == "" and html.count("data-text-px=") == 2
        assert abs(sum(widths) - Image.open(io.BytesIO(whole)).size[0] / 2) <= 1, widths
