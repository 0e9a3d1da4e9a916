# Warren's ipykernel startup file (run with IPKernelApp.exec_files).
# It registers the display formatters behind E2B's result fields:
#   e2b/data   pandas DataFrames as {column: [values]}
#   e2b/chart  matplotlib figures described as charts (warren_charts.py)
# and shows PIL images when they are saved to a file.
# Everything lives inside a function so the user's namespace stays clean,
# and pandas/matplotlib are only bound when the user imports them.


def _warren_setup():
    import datetime
    import math
    import sys

    from IPython import get_ipython
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    shell = get_ipython()
    if shell is None:
        return

    def json_safe(v):
        """Turns numpy/pandas scalars into what JSON can carry."""
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        if isinstance(v, int):
            return v
        if isinstance(v, (datetime.date, datetime.datetime, datetime.time)):
            return v.isoformat()
        item = getattr(v, "item", None)
        if callable(item):
            try:
                return json_safe(item())
            except (TypeError, ValueError):
                pass
        isoformat = getattr(v, "isoformat", None)
        if callable(isoformat):
            return isoformat()
        if v != v:  # NaN, NaT, pd.NA-like values that compare unequal
            return None
        return str(v)

    def dataframe_data(df):
        return {
            str(col): [json_safe(v) for v in df[col].tolist()]
            for col in df.columns
        }

    def formatter(mime):
        class Formatter(BaseFormatter):
            format_type = Unicode(mime)
            print_method = ObjectName("_repr_warren_none_")
            _return_type = (dict, list)

        f = Formatter(parent=shell.display_formatter)
        shell.display_formatter.formatters[mime] = f
        return f

    formatter("e2b/data").for_type_by_name(
        "pandas.core.frame", "DataFrame", dataframe_data
    )

    # A PIL image saved to a file is also shown, as a result with a png,
    # like in E2B's template.
    try:
        from PIL import Image as pil_image
    except ImportError:
        pil_image = None
    if pil_image is not None:
        import os
        from IPython.display import display

        pil_save = pil_image.Image.save

        def save(image, fp, format=None, **params):
            if isinstance(fp, (str, os.PathLike)):
                display(image)
            return pil_save(image, fp, format, **params)

        pil_image.Image.save = save

    # IPython puts this file's directory on sys.path while it runs it, so
    # the charts module next to it is importable now (and only now).
    try:
        from warren_charts import figure_to_chart
    except ImportError:
        return

    class ChartFormatter(BaseFormatter):
        """Describes matplotlib figures. Not a type printer: the inline
        backend removes every Figure printer when pyplot is set up."""

        format_type = Unicode("e2b/chart")
        print_method = ObjectName("_repr_warren_none_")
        _return_type = (dict,)

        def __call__(self, obj):
            figure = sys.modules.get("matplotlib.figure")
            if figure is None or not isinstance(obj, figure.Figure):
                return None
            try:
                return figure_to_chart(obj)
            except Exception:  # a chart is a bonus; the png still goes out
                return None

    shell.display_formatter.formatters["e2b/chart"] = ChartFormatter(
        parent=shell.display_formatter
    )


_warren_setup()
del _warren_setup
