"""Describes matplotlib figures as E2B chart objects (MIME e2b/chart).

Loaded by Warren's kernel startup file. Handles the common cases: line,
scatter, bar and pie axes; a figure with several axes is a superchart;
anything else is an "unknown" chart with no elements. Imports matplotlib
only when a figure is described, so it costs nothing until then.
"""


def _num(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return str(v)
    return v if v == v and v not in (float("inf"), float("-inf")) else None


def _axis_kind(axis):
    """The scale of an axis in E2B's vocabulary."""
    import matplotlib.category

    conv = axis.get_converter() if hasattr(axis, "get_converter") else axis.converter
    if isinstance(conv, matplotlib.category.StrCategoryConverter):
        return "categorical"
    if conv is not None and "Date" in type(conv).__name__:
        return "datetime"
    return axis.get_scale()


def _value(axis, kind, v):
    if kind == "datetime":
        import matplotlib.dates

        return matplotlib.dates.num2date(v).isoformat()
    if kind == "categorical":
        for label, pos in (axis.units._mapping.items() if axis.units is not None else []):
            if pos == v:
                return label
    return _num(v)


def _base(ax, kind):
    chart = {"type": kind, "title": ax.get_title() or None, "elements": []}
    if kind != "pie":
        chart.update(
            x_label=ax.get_xlabel() or None,
            y_label=ax.get_ylabel() or None,
            x_unit=None,
            y_unit=None,
        )
    return chart


def _add_ticks(chart, ax):
    for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        kind = _axis_kind(axis)
        chart[name + "_scale"] = kind
        ticks = list(axis.get_majorticklocs())
        chart[name + "_ticks"] = [_value(axis, kind, t) for t in ticks]
        chart[name + "_tick_labels"] = [t.get_text() for t in axis.get_majorticklabels()]


def _label(artist, fallback):
    label = artist.get_label()
    return fallback if not label or label.startswith("_") else label


def _axes_chart(ax):
    from matplotlib.collections import PathCollection
    from matplotlib.container import BarContainer
    from matplotlib.patches import Wedge

    wedges = [p for p in ax.patches if isinstance(p, Wedge)]
    if wedges:
        chart = _base(ax, "pie")
        texts = [t.get_text() for t in ax.texts]
        for i, w in enumerate(wedges):
            label = _label(w, texts[i] if i < len(texts) else str(i))
            chart["elements"].append({"label": label, "angle": _num(w.theta2 - w.theta1), "radius": _num(w.r)})
        return chart

    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    if bars:
        chart = _base(ax, "bar")
        horizontal = bars[0].orientation == "horizontal"
        cat_axis = ax.yaxis if horizontal else ax.xaxis
        positions = list(cat_axis.get_majorticklocs())
        names = [t.get_text() for t in cat_axis.get_majorticklabels()]
        for gi, container in enumerate(bars):
            group = _label(container, str(gi))
            for rect in container.patches:
                center = rect.get_y() + rect.get_height() / 2 if horizontal else rect.get_x() + rect.get_width() / 2
                label = str(_num(center))
                if positions:
                    nearest = min(range(len(positions)), key=lambda i: abs(positions[i] - center))
                    if nearest < len(names) and names[nearest]:
                        label = names[nearest]
                value = rect.get_width() if horizontal else rect.get_height()
                chart["elements"].append({"label": label, "value": _num(value), "group": group})
        return chart

    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    lines = ax.get_lines()
    if scatters or lines:
        chart = _base(ax, "scatter" if scatters and not lines else "line")
        _add_ticks(chart, ax)
        xk, yk = chart["x_scale"], chart["y_scale"]
        series = [(s, s.get_offsets()) for s in scatters] if chart["type"] == "scatter" else [
            (ln, list(zip(ln.get_xdata(orig=False), ln.get_ydata(orig=False)))) for ln in lines
        ]
        for i, (artist, points) in enumerate(series):
            chart["elements"].append({
                "label": _label(artist, str(i)),
                "points": [[_value(ax.xaxis, xk, x), _value(ax.yaxis, yk, y)] for x, y in points],
            })
        return chart

    return {"type": "unknown", "title": ax.get_title() or None, "elements": []}


def figure_to_chart(fig):
    """Returns the e2b/chart object of a figure, or None if it has no axes."""
    axes = [ax for ax in fig.get_axes() if ax.get_visible()]
    if not axes:
        return None
    if len(axes) == 1:
        chart = _axes_chart(axes[0])
        if not chart.get("title") and fig._suptitle is not None:
            chart["title"] = fig._suptitle.get_text()
        return chart
    title = fig._suptitle.get_text() if fig._suptitle is not None else None
    return {"type": "superchart", "title": title, "elements": [_axes_chart(ax) for ax in axes]}
