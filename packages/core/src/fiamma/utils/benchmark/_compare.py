"""Compare: PyTorch's table of many Measurements (rows: threads and sub-labels; columns:
descriptions; one table per label)."""

import enum
import math

from fiamma.utils.benchmark._measurement import select_unit, trim_sigfig, unit_to_english

__all__ = ["Colorize", "Compare"]

_BEST, _GOOD, _BAD, _VERY_BAD = "\033[92m", "\033[34m", "\033[2m\033[91m", "\033[31m"
_BOLD, _END = "\033[1m", "\033[0m"


class Colorize(enum.Enum):
    NONE = "none"
    COLUMNWISE = "columnwise"
    ROWWISE = "rowwise"


def _unique(xs):
    out = []
    for x in xs:
        if x not in out:
            out.append(x)
    return out


def _color(text, value, best):
    if value <= best * 1.01 or value <= best + 100e-9:
        return _BEST + _BOLD + text + _END * 2
    if value <= best * 1.1:
        return _GOOD + _BOLD + text + _END * 2
    if value >= best * 5:
        return _VERY_BAD + _BOLD + text + _END * 2
    if value >= best * 2:
        return _BAD + text + _END * 2
    return text


class Compare:
    """Tables of Measurements: ``Compare(results).print()``.

    ``trim_significant_figures()`` rounds each cell to the digits its measurement supports,
    ``colorize(rowwise=False)`` marks the best and worst cells, ``highlight_warnings()`` shows
    the spread of noisy cells.
    """

    def __init__(self, results):
        self._results = []
        self.extend_results(results)
        self._trim = False
        self._colorize = Colorize.NONE
        self._highlight = False

    def extend_results(self, results):
        from fiamma.utils.benchmark._measurement import Measurement

        for r in results:
            if not isinstance(r, Measurement):
                raise ValueError(f"Compare: expected Measurements, got {type(r).__name__}")
        self._results.extend(results)

    def trim_significant_figures(self):
        self._trim = True

    def colorize(self, rowwise=False):
        self._colorize = Colorize.ROWWISE if rowwise else Colorize.COLUMNWISE

    def highlight_warnings(self):
        self._highlight = True

    def print(self):
        print(str(self))

    def __str__(self):
        return "\n".join(self._render())

    def _render(self):
        merged = _merge(self._results)
        return [self._table(label, [r for r in merged if r.label == label])
                for label in _unique(r.label for r in merged)]

    def _table(self, label, results):
        unit, scale = select_unit(min(r.median for r in results))
        rows = _unique((r.num_threads, r.env, r.as_row_name) for r in results)
        rows.sort(key=lambda k: k[:2])  # stable: statements keep their order
        cols = _unique(r.description for r in results)
        cell = {(r.num_threads, r.env, r.as_row_name, r.description): r for r in results}
        grid = [[cell.get(row + (c,)) for c in cols] for row in rows]
        render_env = len({r.env for r in results}) > 1
        env_len = max(len(r.env) for r in results) if render_env else 0
        highlight = self._highlight and any(r.has_warnings for r in results)
        # per column: one number format for its values
        formats = []
        for j in range(len(cols)):
            ms = [grid[i][j] for i in range(len(rows)) if grid[i][j] is not None]
            digits = [math.ceil(math.log10(m.median / scale)) for m in ms]
            unit_digits = max(digits)
            dec = min(max(m.significant_figures - d, 0) for m, d in zip(ms, digits)) \
                if self._trim else 1
            length = unit_digits + dec + (1 if dec else 0)
            formats.append((f"{{:>{length}.{dec}f}}", 7 if highlight else 0))

        def num(j, m):
            fmt, pad = formats[j]
            if m is None:
                return " " * len(fmt.format(1.0) + " " * pad)
            v = m.median / scale
            if self._trim:
                v = trim_sigfig(v, m.significant_figures)
            spread = f" (! {m.iqr / m.median * 100:.0f}%)" if highlight and m.has_warnings else ""
            return fmt.format(v) + f"{spread:>{pad}}"

        str_rows = [[""] + [c or "" for c in cols]]
        prior_env = None
        for (threads, env, name), ms in zip(rows, grid):
            e = f"({env})" if render_env and env != prior_env else ""
            prior_env = env
            str_rows.append(["  " + e.ljust(env_len + 4) + name] +
                            [num(j, m) for j, m in enumerate(ms)])
        widths = [max(len(r[k]) for r in str_rows) for k in range(len(str_rows[0]))]
        out = ["  |  ".join(s.center(w) for s, w in zip(str_rows[0], widths))]
        width = len(out[0])
        prior_threads = None
        for (threads, _, _), srow, ms in zip(rows, str_rows[1:], grid):
            if threads != prior_threads:
                out.append(f"{threads} threads: ".ljust(width, "-"))
                prior_threads = threads
            parts = [srow[0].ljust(widths[0])]
            for j, (s, w, m) in enumerate(zip(srow[1:], widths[1:], ms)):
                s = s.center(w)
                if self._colorize != Colorize.NONE and m is not None:
                    if self._colorize == Colorize.ROWWISE:
                        best = min(x.median for x in ms if x is not None)
                    else:
                        best = min(grid[i][j].median for i in range(len(rows))
                                   if grid[i][j] is not None and rows[i][0] == threads)
                    s = _color(s, m.median, best)
                parts.append(s)
            out.append("  |  ".join(parts))
        title = f"[{(' ' + (label or '') + ' ').center(width - 2, '-')}]"
        text = [title, *out, f"Times are in {unit_to_english(unit)}s ({unit})."]
        if highlight:
            text.append("(! XX%) Measurement has high variance, where XX is the IQR / median "
                        "* 100.\n")
        else:
            text.append("")
        return "\n".join(text)


def _merge(results):
    from fiamma.utils.benchmark._measurement import Measurement

    return Measurement.merge(results)
