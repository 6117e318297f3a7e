"""Result tables as text: one markdown writer for every command, notebook and page.

pandas' own DataFrame.to_markdown needs the `tabulate` package, which the lab does not
install; and one writer means every table in the lab formats numbers and gaps alike.
"""

from __future__ import annotations

import math

import pandas as pd


def _format_number(value: float, floatfmt: str | None) -> str:
    """`value` with `floatfmt`, else with 3 significant digits and never an exponent."""
    if floatfmt is not None:
        return format(value, floatfmt)
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def _cell(value: object, floatfmt: str | None) -> str:
    """The text of one table cell: missing values as 'n/a', pipes escaped."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        return _format_number(value, floatfmt)
    return str(value).replace("|", "\\|").replace("\n", " ")


def to_markdown(df: pd.DataFrame, floatfmt: str | None = None) -> str:
    """A padded pipe table of `df` (index not shown), numbers right-aligned.

    pandas' own to_markdown needs the `tabulate` package, which the lab does not install.
    Floats get 3 significant digits unless `floatfmt` (e.g. ".2f") is given.
    """
    columns = [str(c) for c in df.columns]
    rows = [[_cell(v, floatfmt) for v in row] for row in df.itertuples(index=False, name=None)]
    numeric = [
        pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
        for c in df.columns
    ]
    widths = [max([len(c), 3, *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]

    def line(cells: list[str]) -> str:
        padded = (
            cell.rjust(w) if right else cell.ljust(w)
            for cell, w, right in zip(cells, widths, numeric, strict=True)
        )
        return "| " + " | ".join(padded) + " |"

    rule = (
        "|"
        + "|".join(
            "-" * (w + 1) + ":" if right else "-" * (w + 2)
            for w, right in zip(widths, numeric, strict=True)
        )
        + "|"
    )
    return "\n".join([line(columns), rule, *(line(r) for r in rows)])
