"""Measurement and TaskSpec: what a Timer measured, with PyTorch's statistics and printed form."""

import math
import textwrap

__all__ = ["Measurement", "TaskSpec", "select_unit", "trim_sigfig", "unit_to_english"]

_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25
_MAX_SIGNIFICANT_FIGURES = 4


def select_unit(t):
    """The unit ('ns', 'us', 'ms' or 's') to show a time of ``t`` seconds in, and its scale."""
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(math.log10(t) // 3), "s") if t > 0 else "s"
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[unit]


def unit_to_english(u):
    return {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}[u]


def trim_sigfig(x, n):
    """``x`` rounded to ``n`` significant figures (3.14159, 2 -> 3.1)."""
    if x == 0:
        return 0.0
    scale = 10 ** (math.ceil(math.log10(abs(x))) - n)
    return float(round(x / scale) * scale)


def _quantile(sorted_xs, q):
    """Linear-interpolation quantile of sorted values (PyTorch's and NumPy's default)."""
    pos = (len(sorted_xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


class TaskSpec:
    """What was timed: the statement, setup and the labels that group results."""

    __slots__ = ("stmt", "setup", "global_setup", "label", "sub_label", "description", "env",
                 "num_threads")

    def __init__(self, stmt, setup, global_setup="", label=None, sub_label=None,
                 description=None, env=None, num_threads=1):
        self.stmt, self.setup, self.global_setup = stmt, setup, global_setup
        self.label, self.sub_label, self.description = label, sub_label, description
        self.env, self.num_threads = env, num_threads

    def _key(self):
        return tuple(getattr(self, k) for k in self.__slots__)

    def __eq__(self, other):
        return isinstance(other, TaskSpec) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __getstate__(self):
        return self._key()

    def __setstate__(self, state):
        for k, v in zip(self.__slots__, state):
            setattr(self, k, v)

    @property
    def title(self):
        sub = f": {self.sub_label}" if self.sub_label else ""
        if self.label is not None:
            return self.label + sub
        if "\n" not in self.stmt:
            return self.stmt + sub
        return (f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n"
                f"{textwrap.indent(self.stmt, '  ')}")

    def setup_str(self):
        if not self.setup or self.setup == "pass":
            return ""
        if "\n" in self.setup:
            return f"setup:{textwrap.indent(self.setup, '  ')}"
        return f"setup: {self.setup}"

    def summarize(self):
        """The title, description and setup lines that head a Measurement's printed form."""
        parts = [self.title, self.description or "", self.setup_str()]
        return "\n".join(f"{p}\n" if "\n" in p else p for p in parts if p)


class Measurement:
    """The times of ``number_per_run`` runs of a task, one raw time per block of runs.

    ``times`` are per run; ``median``, ``mean`` and ``iqr`` summarise them (linear-interpolation
    quantiles); ``significant_figures`` estimates how many digits of the median the spread of the
    middle half supports; ``has_warnings`` says the IQR is over 10% of the median.
    """

    def __init__(self, number_per_run, raw_times, task_spec, metadata=None):
        self.number_per_run = number_per_run
        self.raw_times = list(raw_times)
        self.task_spec = task_spec
        self.metadata = metadata
        self._sorted = None
        self._warnings = ()

    def __getattr__(self, name):  # the task spec's fields: m.label, m.stmt, ...
        if name in TaskSpec.__slots__:
            return getattr(self.task_spec, name)
        raise AttributeError(f"'Measurement' object has no attribute {name!r}")

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("_sorted", "_warnings")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._sorted, self._warnings = None, ()

    @property
    def times(self):
        return [t / self.number_per_run for t in self.raw_times]

    def _lazy_init(self):
        if self._sorted is not None or not self.raw_times:
            return
        s = self._sorted = tuple(sorted(self.times))
        self._median = _quantile(s, 0.5)
        self._mean = sum(s) / len(s)
        self._p25, self._p75 = _quantile(s, 0.25), _quantile(s, 0.75)
        rel = self.iqr / self._median * 100 if self._median else 0.0
        pre = (f"  WARNING: Interquartile range is {rel:.1f}% of the median measurement.\n"
               + " " * 11)
        if not self.meets_confidence(_IQR_GROSS_WARN_THRESHOLD):
            self._warnings = (pre + "This suggests significant environmental influence.",)
        elif not self.meets_confidence(_IQR_WARN_THRESHOLD):
            self._warnings = (pre + "This could indicate system fluctuation.",)

    @property
    def median(self):
        self._lazy_init()
        return self._median

    @property
    def mean(self):
        self._lazy_init()
        return self._mean

    @property
    def iqr(self):
        self._lazy_init()
        return self._p75 - self._p25

    @property
    def has_warnings(self):
        self._lazy_init()
        return bool(self._warnings)

    @property
    def env(self):
        return "Unspecified env" if self.task_spec.env is None else self.task_spec.env

    @property
    def as_row_name(self):
        return self.sub_label or self.stmt or "[Unknown]"

    @property
    def significant_figures(self):
        self._lazy_init()
        n = len(self._sorted)
        mid = self._sorted[n // 4:math.ceil(3 * n / 4)]
        m = sum(mid) / len(mid)
        std = math.sqrt(sum((x - m) ** 2 for x in mid) / len(mid))
        ci = max(1.96 * std / math.sqrt(len(mid)), 1e-9)
        figures = math.floor(math.log10(self._median / ci)) if self._median > 0 else 1
        return min(max(figures, 1), _MAX_SIGNIFICANT_FIGURES)

    def meets_confidence(self, threshold=_IQR_WARN_THRESHOLD):
        return self.iqr / self.median < threshold if self.median else True

    @staticmethod
    def merge(measurements):
        """Merge replicates of the same task into one Measurement each (``number_per_run`` 1)."""
        groups = {}
        for m in measurements:
            groups.setdefault(m.task_spec, []).extend(m.times)
        return [Measurement(1, times, spec) for spec, times in groups.items()]

    def __repr__(self):
        self._lazy_init()
        n = len(self._sorted)
        unit, scale = select_unit(self._median)
        lines = [object.__repr__(self).replace("fiamma.utils.benchmark._measurement",
                                               "fiamma.utils.benchmark"),
                 self.task_spec.summarize(),
                 f"  {'Median: ' if n > 1 else ''}{self._median / scale:.2f} {unit}"]
        if n >= 4:
            lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} ({self._p25 / scale:.2f} to "
                         f"{self._p75 / scale:.2f})")
        th = self.task_spec.num_threads
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement,' if n > 1 else ','} {th} thread{'s' if th > 1 else ''}")
        lines.extend(self._warnings)
        return "\n".join(lines)
