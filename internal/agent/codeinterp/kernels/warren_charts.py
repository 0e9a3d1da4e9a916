"""Describes matplotlib figures as E2B chart objects (MIME e2b/chart).

Loaded by Warren's kernel startup file. Handles the common cases: line,
scatter, bar, pie and box-and-whisker axes; a figure with several axes is a
superchart; anything else is an "unknown" chart with no elements. Imports matplotlib
only when a figure is described, so it costs nothing until then.
"""


def _num(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return str(v)
    return v if v == v and v not in (float("inf"), float("-inf")) else None


def _round(v):
    """Rounds away float noise (323.99999141 -> 324.0): keeps eight digits
    before the point and fewer after it as the number grows."""
    v = _num(v)
    if not isinstance(v, float) or v == 0:
        return v
    import math

    digits = max(1, 8 - math.floor(math.log10(abs(v))))
    return float(f"{v:.{digits}g}")


def _unit(label):
    """The unit an axis label names: "Time (s)" -> "s", "Mass [kg]" -> "kg"."""
    import re

    m = re.search(r"\s\((.*?)\)|\[(.*?)\]", label or "")
    return (m.group(1) or m.group(2)) if m else None


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
            x_unit=_unit(ax.get_xlabel()),
            y_unit=_unit(ax.get_ylabel()),
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
    from matplotlib.patches import PathPatch, Wedge

    wedges = [p for p in ax.patches if isinstance(p, Wedge)]
    if wedges:
        chart = _base(ax, "pie")
        texts = [t.get_text() for t in ax.texts]
        for i, w in enumerate(wedges):
            label = _label(w, texts[i] if i < len(texts) else str(i))
            chart["elements"].append({"label": label, "angle": _round(abs(w.theta2 - w.theta1)), "radius": _num(w.r)})
        return chart

    boxes = [p for p in ax.patches if isinstance(p, PathPatch)]
    if boxes and not ax.collections:
        return _box_chart(ax, boxes)

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


def _box_chart(ax, boxes):
    """Describes a boxplot drawn with patch_artist=True: each box is a
    PathPatch from the first to the third quartile; the lines are its
    median, whiskers, caps and fliers."""
    chart = _base(ax, "box_and_whisker")
    extents = []
    for b in boxes:
        v = b.get_path().vertices
        extents.append((min(v[:, 0]), max(v[:, 0]), min(v[:, 1]), max(v[:, 1])))
    # Boxes of a vertical plot share their width, those of a horizontal
    # one their height; value is the axis the quartiles are measured on.
    widths = {_round(e[1] - e[0]) for e in extents}
    heights = {_round(e[3] - e[2]) for e in extents}
    vertical = len(widths) == 1 or len(heights) != 1
    pos_axis = ax.xaxis if vertical else ax.yaxis
    ticks = list(pos_axis.get_majorticklocs())
    names = [t.get_text() for t in pos_axis.get_majorticklabels()]
    eps = 1e-9
    for i, (x0, x1, y0, y1) in enumerate(extents):
        p0, p1, q1, q3 = (x0, x1, y0, y1) if vertical else (y0, y1, x0, x1)
        center = (p0 + p1) / 2
        label = str(i + 1)
        if ticks:
            nearest = min(range(len(ticks)), key=lambda k: abs(ticks[k] - center))
            if nearest < len(names) and names[nearest]:
                label = names[nearest]
        el = {"label": label, "min": _round(q1), "first_quartile": _round(q1), "median": None,
              "third_quartile": _round(q3), "max": _round(q3), "outliers": []}
        for line in ax.get_lines():
            xs, ys = line.get_xdata(orig=False), line.get_ydata(orig=False)
            ps, vs = (xs, ys) if vertical else (ys, xs)
            if len(ps) == 0 or not all(p0 - eps <= p <= p1 + eps for p in ps):
                continue
            if line.get_linestyle() in ("None", "", " "):  # fliers
                el["outliers"].extend(_round(v) for v in vs)
            elif len(vs) == 2 and vs[0] == vs[1] and q1 - eps <= vs[0] <= q3 + eps:
                el["median"] = _round(vs[0])
            elif len(vs) == 2 and ps[0] == ps[1]:  # a whisker: from the box outwards
                lo, hi = min(vs), max(vs)
                if abs(hi - q1) <= eps:
                    el["min"] = _round(lo)
                elif abs(lo - q3) <= eps:
                    el["max"] = _round(hi)
        chart["elements"].append(el)
    return chart


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
