"""The book's figure style (:mod:`aimlib.plotting`): readable sizes, labels inside the figure."""
from __future__ import annotations

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from aimlib import plotting  # noqa: E402


def _outside(fig):
    """The axes of ``fig`` (by their labels) whose drawn decorations extend beyond the figure's edges.

    An axes' tight box holds everything drawn for it: tick labels, axis labels,
    title, legend and the offset text.
    """
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    w, h = fig.bbox.width, fig.bbox.height
    out = []
    for ax in fig.axes:
        box = ax.get_tightbbox(renderer)
        if box.x0 < -0.5 or box.y0 < -0.5 or box.x1 > w + 0.5 or box.y1 > h + 0.5:
            out.append(ax.get_ylabel() or ax.get_xlabel() or "an unlabelled axes")
    return out


def _crowded_figure():
    """Two panels whose long tick labels and axis labels need more room than default margins give."""
    fig = Figure(figsize=(plotting.MAX_WIDTH, 3))
    for i in (1, 2):
        ax = fig.add_subplot(1, 2, i)
        ax.plot([0, 1], [0.000123456, 123456.789])
        ax.set_ylabel("a long axis label, density per unit")
        ax.set_xlabel("iterations of the algorithm")
    return fig


def test_style_sets_readable_sizes_and_a_layout_engine():
    with plotting.book_style():
        rc = matplotlib.rcParams
        assert rc["figure.constrained_layout.use"] and rc["savefig.bbox"] == "tight"
        assert rc["figure.figsize"][0] <= plotting.MAX_WIDTH
        assert plotting.MAX_WIDTH * rc["figure.dpi"] <= 720  # the text column of the built book
        for key in ("xtick.labelsize", "ytick.labelsize", "axes.labelsize"):
            assert rc[key] >= 10
        assert rc["legend.fontsize"] >= 9


def test_book_style_leaves_the_global_state_alone():
    before = dict(matplotlib.rcParams)
    with plotting.book_style():
        assert matplotlib.rcParams["legend.fontsize"] == plotting.STYLE["legend.fontsize"]
    assert dict(matplotlib.rcParams) == before


def test_use_book_style_sets_the_global_state():
    with matplotlib.rc_context():
        plotting.use_book_style()
        for key, value in plotting.STYLE.items():
            got = matplotlib.rcParams[key]
            assert (tuple(got) if isinstance(got, list) else got) == value, key


def test_labels_stay_inside_the_figure_in_the_book_style():
    with matplotlib.rc_context({"figure.subplot.left": 0.02, "figure.subplot.right": 0.99}):
        assert _outside(_crowded_figure())  # tight default margins cut the labels off
        with plotting.book_style():
            assert _outside(_crowded_figure()) == []


def test_log_axis_labels_the_given_ticks_only():
    with plotting.book_style():
        fig = Figure(figsize=(4, 3))
        ax = fig.add_subplot()
        ax.plot([20, 200], [1, 2])
        plotting.log_axis(ax, [20, 50, 100, 200])
        fig.draw(FigureCanvasAgg(fig).get_renderer())
        assert ax.get_xscale() == "log"
        major = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        minor = [t.get_text() for t in ax.get_xticklabels(minor=True) if t.get_text()]
        assert major == ["20", "50", "100", "200"] and minor == []


def test_log_axis_on_the_y_axis():
    fig = Figure()
    ax = fig.add_subplot()
    plotting.log_axis(ax, [0.1, 1], axis="y")
    assert ax.get_yscale() == "log" and list(ax.get_yticks()) == [0.1, 1.0]


@pytest.mark.parametrize("kw,words", [
    ({"ticks": []}, "at least one"),
    ({"ticks": [0, 1]}, "ticks must be > 0"),
    ({"ticks": [float("nan")]}, "finite"),
    ({"ticks": [1], "axis": "z"}, "axis must be one of"),
])
def test_log_axis_bad_input(kw, words):
    ax = Figure().add_subplot()
    with pytest.raises(ValueError, match=words):
        plotting.log_axis(ax, **kw)


def test_widget_panels_keep_every_label_inside():
    """The panels draw in the book style: the labels that fixed margins cut off are inside."""
    pytest.importorskip("ipywidgets")
    from aimlib import widgets as aw

    for panel in (aw.spectrum_panel(delta=1.0, rho=0.5, d=100), aw.amp_panel(d=20, max_iter=3)):
        assert panel.error == ""
        with plotting.book_style():
            fig = panel._plot(panel.last_data)
            assert _outside(fig) == []
        assert fig.get_layout_engine() is not None
