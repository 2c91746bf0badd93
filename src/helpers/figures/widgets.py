"""Live figures: a slider over precomputed frames, with or without a kernel.

Python renders every frame with the real code when the cell runs; moving the slider only
chooses which frame is shown. How it is shown depends on the ipywidgets the kernel has
(decided once, in :data:`KERNEL_FREE`):

* ipywidgets 8 (the book's environment, JupyterLab, VS Code, Kaggle): the slider is
  jslinked to a ``Stack`` of images, so the link runs in JavaScript and the figure stays
  live with no kernel: in the static HTML book and in a saved notebook.
* ipywidgets 7 (Colab ships 7.7.1, which has no ``Stack``): the same slider drives one
  ``Image`` whose value the kernel swaps when the slider's index changes. Same slider,
  readout and frames; it needs the running kernel, which Colab always has.

Frames are made by :mod:`helpers.figures.frames`: byte-stable, palette-quantised PNGs with
two pixels per CSS pixel (sharp on high-density screens). On ipywidgets 8 each frame is an
``HTML`` widget holding one ``<img>`` with a ``data:`` URL (base64 once, in the saved state,
and painted in the next display frame when the slider moves), an ``alt`` text naming
what the frame shows and at which parameter value, and its smallest text in CSS px at its
natural size (``data-text-px``, ``"none"`` when it draws no text), so a browser test can
check the text a reader sees when a narrower column scales the frame down. A live figure's
output also carries its first frame as a plain ``image/png``, so a client that does not
render widgets (an untrusted notebook, GitHub's viewer, nbviewer) shows a picture, not the
text form.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from helpers.figures.frames import (
    DEFAULT_DPI,
    PIXEL_RATIO,
    css_size,
    drawn_font_sizes,
    figure_to_png,
    figure_words,
    panel_columns,
    png_data_url,
    split_png,
)
from helpers.figures.language import phrase, translate
from helpers.figures.plotting import heatmap, to_numpy

__all__ = [
    "KERNEL_FREE",
    "LiveFigure",
    "slider_figure",
    "slider_figure_2d",
    "slider_heatmap",
    "slider_heatmap_2d",
]

# The label's tooltip trait: ``tooltip`` on ipywidgets 8, ``description_tooltip`` on 7.
_TOOLTIP = (
    "tooltip" if "tooltip" in widgets.SelectionSlider.class_trait_names() else "description_tooltip"
)

#: True when the installed ipywidgets (8 or newer) has ``Stack``: frames are switched by a
#: jslink in the browser, with no kernel. False on ipywidgets 7 (Colab): the kernel swaps
#: the frame of one ``Image``. The one place the mechanism is chosen.
KERNEL_FREE: bool = int(widgets.__version__.split(".")[0]) >= 8


class LiveFigure(widgets.VBox):
    """A VBox of sliders over a Stack of frames, with a short, stable text form.

    ``frames`` holds the PNG bytes (nested lists for two parameters) and ``values`` the
    parameter values, so tests and chapters can inspect what the widget will show.
    """

    def __init__(
        self, children, *, frames, values, descriptions, alts, first_frame, pixel_ratio=1, **kwargs
    ):
        super().__init__(children=children, **kwargs)
        self.pixel_ratio = pixel_ratio  # PNG pixels per CSS pixel of every frame
        self.frames = frames
        self.values = values
        self.descriptions = descriptions
        self.alts = alts  # the alt text of every frame, nested like ``frames``
        self.first_frame = first_frame  # the PNG shown before any slider moves

    def _repr_mimebundle_(self, **kwargs):
        """The widget view, its text form and the first frame as ``image/png`` (shown at its
        CSS width): a client that cannot show the widget (untrusted notebook, GitHub,
        nbviewer) shows the picture."""
        bundle = super()._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        if data is None:
            return bundle
        data["image/png"] = base64.b64encode(self.first_frame).decode("ascii")
        width, height = css_size(self.first_frame, self.pixel_ratio)
        metadata = dict(metadata or {}, **{"image/png": {"width": width, "height": height}})
        return data, metadata

    def __repr__(self) -> str:  # shown as text/plain: keep it short and deterministic
        sizes = " x ".join(str(len(v)) for v in self.values)
        names = ", ".join(self.descriptions)
        return f"LiveFigure({names}: {sizes} frames)"


def _format_options(values: Sequence, fmt: str | Callable) -> list[tuple[str, int]]:
    if len(values) == 0:
        raise ValueError("values must hold at least one parameter value, got an empty sequence")
    label = fmt if callable(fmt) else fmt.format
    labels = [translate(label(v)) for v in values]
    if len(set(labels)) != len(labels):
        raise ValueError(f"fmt gives two values the same label: {labels}; use more digits")
    return [(text, i) for i, text in enumerate(labels)]


def _initial_index(values: Sequence, initial) -> int:
    if initial is None:
        return 0
    for i, v in enumerate(values):
        if v == initial:
            return i
    raise ValueError(f"initial must be one of values {list(values)}, got {initial!r}")


def _render(fig, dpi: float, pixel_ratio: int) -> tuple[bytes, float, list[float]]:
    # The frame's PNG (figure_to_png checks its text on a phone), its smallest text in CSS
    # px at its natural size (inf when it draws none) and where its panels can be cut apart.
    with drawn_font_sizes() as sizes:
        png = figure_to_png(fig, dpi=dpi, pixel_ratio=pixel_ratio)
    return png, min(sizes, default=float("inf")) * dpi / 72, panel_columns(fig)


def _frame(
    png: bytes, alt: str, pixel_ratio: int, text_px: float, columns: Sequence[float] = (0, 1)
) -> widgets.HTML:
    # One <img> per panel, each holding a data: URL. The Stack re-creates the visible view on
    # every move; a data: URL is decoded synchronously and shows in the next frame (~4 ms,
    # measured), where a blob: URL paints a blank frame first. Width and height are the CSS
    # size (the PNG's over pixel_ratio), so the page does not reflow while it loads; CSS
    # scales them down to the column. A figure of side-by-side panels (``columns``, from
    # panel_columns) is cut into one <img> per panel inside a ``div.live-panels``: side by
    # side on a wide screen, where they look like the whole figure, one above the other on a
    # phone (book/assets/phone.css). The first panel's alt text describes the whole figure.
    text = "none" if text_px == float("inf") else f"{text_px:.2f}"
    images = []
    for i, piece in enumerate(split_png(png, list(columns), pixel_ratio)):
        width, height = css_size(piece, pixel_ratio)
        images.append(
            f'<img src="{png_data_url(piece)}" alt="{html.escape(alt) if i == 0 else ""}" '
            f'width="{width}" height="{height}" class="live-frame" data-text-px="{text}" '
            'style="max-width: 100%; height: auto">'
        )
    if len(images) == 1:
        return widgets.HTML(value=images[0])
    return widgets.HTML(value='<div class="live-panels">' + "".join(images) + "</div>")


def _kernel_image(png: bytes, pixel_ratio: int) -> widgets.Image:
    # ipywidgets 7: the kernel replaces the value of this one Image on every move. Raw PNG
    # bytes (not a data: URL) keep each message small; the view keeps its <img> element,
    # so the old frame stays on screen until the new one has loaded.
    width, _ = css_size(png, pixel_ratio)
    return widgets.Image(
        value=png,
        format="png",
        width=str(width),
        layout=widgets.Layout(max_width="100%", height="auto"),
    )


def _slider(values, description, fmt, initial) -> widgets.SelectionSlider:
    return widgets.SelectionSlider(
        options=_format_options(values, fmt),
        index=_initial_index(values, initial),
        description=description,
        **{_TOOLTIP: description},  # the label's title; unset, ipywidgets 8 writes "null"
        continuous_update=True,
        style={"description_width": "initial"},
        layout=widgets.Layout(width="min(520px, 100%)"),
    )


def slider_figure(
    render: Callable,
    values: Sequence,
    *,
    description: str,
    fmt: str | Callable = "{:g}",
    initial=None,
    dpi: float = DEFAULT_DPI,
    pixel_ratio: int = PIXEL_RATIO,
) -> LiveFigure:
    """A slider over ``values`` showing the figure ``render(value)`` for each value.

    Args:
        render: a function taking one parameter value and returning a matplotlib figure
            (one panel, or several: a heatmap beside the fitted curve, say).
        values: the parameter values, in slider order.
        description: the slider's label, e.g. ``"bandwidth σ"``.
        fmt: a format string or function giving each value's readout label.
        initial: the value shown first (default: the first value).
        dpi: the frames' resolution as shown, in CSS pixels per inch.
        pixel_ratio: PNG pixels per CSS pixel (2: sharp on high-density screens).

    Returns:
        A :class:`LiveFigure` (a ``VBox``) holding the slider and a ``Stack`` of images.
    """
    description = translate(description)
    slider = _slider(values, description, fmt, initial)
    labels = [text for text, _ in _format_options(values, fmt)]
    frames, alts, text_px, columns = [], [], [], []
    for value, label in zip(values, labels):
        fig = render(value)
        alts.append(phrase("{}, at {} = {}", figure_words(fig), description, label))
        png, px, cuts = _render(fig, dpi, pixel_ratio)
        frames.append(png), text_px.append(px), columns.append(cuts)
    if KERNEL_FREE:
        shown = widgets.Stack(
            children=[
                _frame(f, a, pixel_ratio, px, c)
                for f, a, px, c in zip(frames, alts, text_px, columns)
            ],
            selected_index=slider.index,
        )
        widgets.jslink((slider, "index"), (shown, "selected_index"))
    else:
        shown = _kernel_image(frames[slider.index], pixel_ratio)

        def show(change):
            shown.value = frames[change["new"]]

        slider.observe(show, names="index")
    return LiveFigure(
        [slider, shown],
        frames=frames,
        values=[list(values)],
        descriptions=[description],
        alts=alts,
        first_frame=frames[slider.index],
        pixel_ratio=pixel_ratio,
    )


def slider_figure_2d(
    render: Callable,
    values_a: Sequence,
    values_b: Sequence,
    *,
    descriptions: tuple[str, str],
    fmts: tuple = ("{:g}", "{:g}"),
    initial: tuple = (None, None),
    dpi: float = DEFAULT_DPI,
    pixel_ratio: int = PIXEL_RATIO,
) -> LiveFigure:
    """Two sliders over a grid of frames ``render(a, b)``.

    On ipywidgets 8 the frames sit in nested Stacks: the outer Stack is indexed by the first
    slider; each of its children is an inner Stack indexed by the second slider (one jslink
    per inner Stack), so any (a, b) pair shows its own frame without a kernel. On
    ipywidgets 7 the kernel shows frame ``[a][b]`` in one Image when either slider moves.
    """
    descriptions = tuple(map(translate, descriptions))
    slider_a = _slider(values_a, descriptions[0], fmts[0], initial[0])
    slider_b = _slider(values_b, descriptions[1], fmts[1], initial[1])
    labels_a = [text for text, _ in _format_options(values_a, fmts[0])]
    labels_b = [text for text, _ in _format_options(values_b, fmts[1])]
    frames, alts, text_px, columns = [], [], [], []
    for a, label_a in zip(values_a, labels_a):
        frames.append([]), alts.append([]), text_px.append([]), columns.append([])
        for b, label_b in zip(values_b, labels_b):
            fig = render(a, b)
            alts[-1].append(
                phrase(
                    "{}, at {} = {} and {} = {}",
                    figure_words(fig),
                    descriptions[0],
                    label_a,
                    descriptions[1],
                    label_b,
                )
            )
            png, px, cuts = _render(fig, dpi, pixel_ratio)
            frames[-1].append(png), text_px[-1].append(px), columns[-1].append(cuts)
    first_frame = frames[slider_a.index][slider_b.index]
    if not KERNEL_FREE:
        shown = _kernel_image(frames[slider_a.index][slider_b.index], pixel_ratio)

        def show(change):
            shown.value = frames[slider_a.index][slider_b.index]

        slider_a.observe(show, names="index")
        slider_b.observe(show, names="index")
        return LiveFigure(
            [slider_a, slider_b, shown],
            frames=frames,
            values=[list(values_a), list(values_b)],
            descriptions=list(descriptions),
            alts=alts,
            first_frame=first_frame,
            pixel_ratio=pixel_ratio,
        )
    inner = []
    for row, row_alts, row_px, row_cuts in zip(frames, alts, text_px, columns):
        stack = widgets.Stack(
            children=[
                _frame(f, a, pixel_ratio, px, c)
                for f, a, px, c in zip(row, row_alts, row_px, row_cuts)
            ],
            selected_index=slider_b.index,
        )
        widgets.jslink((slider_b, "index"), (stack, "selected_index"))
        inner.append(stack)
    outer = widgets.Stack(children=inner, selected_index=slider_a.index)
    widgets.jslink((slider_a, "index"), (outer, "selected_index"))
    return LiveFigure(
        [slider_a, slider_b, outer],
        frames=frames,
        values=[list(values_a), list(values_b)],
        descriptions=list(descriptions),
        alts=alts,
        first_frame=first_frame,
        pixel_ratio=pixel_ratio,
    )


def _heatmap_renderer(matrix_of, second_panel, heatmap_kwargs, vmax, figsize):
    def render(*params):
        if second_panel is None:
            fig, ax = plt.subplots(figsize=figsize or (4.4, 3.4))
        else:
            # 8.5 in: 680 CSS px at 80 dpi, within a desktop's column (684 px at 1280 x 900),
            # so the frame is shown at its natural size, its text as figure_to_png checked it.
            fig, (ax, ax2) = plt.subplots(1, 2, figsize=figsize or (8.5, 3.4))
            second_panel(ax2, *params)
        heatmap(matrix_of(*params), ax=ax, vmax=vmax, **heatmap_kwargs)
        fig.tight_layout()
        return fig

    return render


def _matrices(matrices, values_list):
    """Evaluate every matrix once (for the shared colour scale) and return a lookup."""
    for values in values_list:
        if len(values) == 0:
            raise ValueError("values must hold at least one parameter value, got an empty sequence")
    if callable(matrices):
        table = {}
        grid = np.array(np.meshgrid(*[range(len(v)) for v in values_list], indexing="ij"))
        for idx in grid.reshape(len(values_list), -1).T:
            params = [values_list[k][i] for k, i in enumerate(idx)]
            table[tuple(idx)] = to_numpy(matrices(*params))
        return table
    if len(values_list) != 1:
        raise ValueError("matrices must be a function of both parameters for a 2-D slider")
    if len(matrices) != len(values_list[0]):
        raise ValueError(
            f"matrices holds {len(matrices)} matrices but values holds "
            f"{len(values_list[0])}; need one matrix per value"
        )
    return {(i,): to_numpy(m) for i, m in enumerate(matrices)}


def slider_heatmap(
    matrices,
    values: Sequence,
    *,
    description: str,
    fmt: str | Callable = "{:g}",
    initial=None,
    second_panel: Callable | None = None,
    vmax: float | None = None,
    figsize: tuple[float, float] | None = None,
    dpi: float = DEFAULT_DPI,
    pixel_ratio: int = PIXEL_RATIO,
    **heatmap_kwargs,
) -> LiveFigure:
    """A slider over ``values`` moving a heatmap (and optionally a second panel).

    Args:
        matrices: a function ``value -> (Q, K) matrix`` (run once per value, with the real
            code) or a sequence of matrices, one per value.
        values: parameter values in slider order.
        description: the slider's label.
        fmt: readout format for the values.
        initial: the value shown first.
        second_panel: optional ``f(ax, value)`` drawing a second panel to the right, e.g. a
            fitted curve for the same parameter.
        vmax: the top of the colour scale; by default the largest value over all frames,
            so colours are comparable between frames.
        figsize, dpi, pixel_ratio: frame size, resolution as shown (CSS pixels per inch)
            and PNG pixels per CSS pixel.
        **heatmap_kwargs: passed to :func:`helpers.figures.plotting.heatmap` (labels, title,
            cmap).

    Returns:
        A :class:`LiveFigure`.
    """
    table = _matrices(matrices, [list(values)])
    if vmax is None:
        vmax = max(float(np.nanmax(m)) for m in table.values())
    index_of = {v: i for i, v in enumerate(values)} if _hashable(values) else None

    def matrix_of(value):
        i = index_of[value] if index_of is not None else list(values).index(value)
        return table[(i,)]

    render = _heatmap_renderer(matrix_of, second_panel, heatmap_kwargs, vmax, figsize)
    return slider_figure(
        render,
        values,
        description=description,
        fmt=fmt,
        initial=initial,
        dpi=dpi,
        pixel_ratio=pixel_ratio,
    )


def slider_heatmap_2d(
    matrices: Callable,
    values_a: Sequence,
    values_b: Sequence,
    *,
    descriptions: tuple[str, str],
    fmts: tuple = ("{:g}", "{:g}"),
    initial: tuple = (None, None),
    second_panel: Callable | None = None,
    vmax: float | None = None,
    figsize: tuple[float, float] | None = None,
    dpi: float = DEFAULT_DPI,
    pixel_ratio: int = PIXEL_RATIO,
    **heatmap_kwargs,
) -> LiveFigure:
    """Two sliders moving one heatmap: ``matrices(a, b)`` for every pair (nested Stacks)."""
    if not callable(matrices):
        raise ValueError("matrices must be a function (a, b) -> matrix for a 2-D slider")
    table = _matrices(matrices, [list(values_a), list(values_b)])
    if vmax is None:
        vmax = max(float(np.nanmax(m)) for m in table.values())
    a_index = {v: i for i, v in enumerate(values_a)}
    b_index = {v: i for i, v in enumerate(values_b)}

    def matrix_of(a, b):
        return table[(a_index[a], b_index[b])]

    render = _heatmap_renderer(matrix_of, second_panel, heatmap_kwargs, vmax, figsize)
    return slider_figure_2d(
        render,
        values_a,
        values_b,
        descriptions=descriptions,
        fmts=fmts,
        initial=initial,
        dpi=dpi,
        pixel_ratio=pixel_ratio,
    )


def _hashable(values) -> bool:
    try:
        return len({v for v in values}) == len(values)
    except TypeError:
        return False
