"""fiamma.utils.benchmark: PyTorch's Timer / Measurement / Compare for Python statements."""

import math
import pickle

import numpy as np
import pytest

import fiamma
from fiamma.utils import benchmark
from fiamma.utils.benchmark._measurement import Measurement, TaskSpec, select_unit


def _m(times, number=10, **kw):
    spec = TaskSpec("x * y", "pass", **kw)
    return Measurement(number, [t * number for t in times], spec)


def test_statistics_match_numpy():
    times = [3e-6, 1e-6, 2e-6, 7e-6, 4e-6, 2.5e-6]
    m = _m(times)
    assert m.times == pytest.approx(times)
    assert m.median == pytest.approx(np.quantile(times, 0.5))
    assert m.mean == pytest.approx(np.mean(times))
    assert m.iqr == pytest.approx(np.quantile(times, 0.75) - np.quantile(times, 0.25))
    assert m.has_warnings and not m.meets_confidence(0.25)
    steady = _m([1e-6 + i * 1e-10 for i in range(20)])
    assert not steady.has_warnings and steady.meets_confidence()
    assert 1 <= steady.significant_figures <= 4


def test_select_unit():
    assert select_unit(3e-9) == ("ns", 1e-9)
    assert select_unit(2.5e-6) == ("us", 1e-6)
    assert select_unit(0.02) == ("ms", 1e-3)
    assert select_unit(3.0) == ("s", 1)


def test_repr_format():
    one = _m([2e-6], label="Batched dot", sub_label="mul", description="D", num_threads=1)
    lines = repr(one).splitlines()
    assert lines[1:] == ["Batched dot: mul", "D", "  2.00 us",
                         "  1 measurement, 10 runs , 1 thread"]
    many = _m([1e-6, 1e-6, 1e-6, 1e-6, 1e-6], num_threads=4)
    text = repr(many)
    assert "x * y" in text and "  Median: 1.00 us" in text and "  IQR:    0.00 us" in text
    assert "5 measurements, 10 runs per measurement, 4 threads" in text


def test_timer_timeit_and_autorange():
    x = fiamma.ones(64)
    t = benchmark.Timer("x * x", globals={"x": x}, label="mul")
    m = t.timeit(20)
    assert m.number_per_run == 20 and len(m.raw_times) == 1 and m.times[0] > 0
    calls = []
    b = t.blocked_autorange(callback=lambda n, s: calls.append(n), min_run_time=0.02)
    assert sum(b.raw_times) >= 0.02 and len(calls) == len(b.raw_times)
    a = t.adaptive_autorange(min_run_time=0.01, max_run_time=1.0)
    assert len(a.times) >= 4 or sum(a.raw_times) > 1.0
    # setup runs once per measurement; torch (fiamma) is in the namespace as PyTorch's is
    s = benchmark.Timer("y.sum()", setup="y = torch.ones(3)").timeit(5)
    assert s.task_spec.setup == "y = torch.ones(3)"


def test_timer_threads_restored():
    before = fiamma.get_num_threads()
    benchmark.Timer("pass", num_threads=2).timeit(3)
    assert fiamma.get_num_threads() == before


def test_measurement_pickles():
    m = _m([1e-6, 2e-6, 3e-6, 4e-6], label="L")
    r = pickle.loads(pickle.dumps(m))
    assert r.median == m.median and r.label == "L" and r.task_spec == m.task_spec


def test_compare_table_layout():
    rs = [_m([2e-6], label="Batched dot", sub_label="[1, 1]", description="mul/sum"),
          _m([3e-6], label="Batched dot", sub_label="[1, 1]", description="bmm"),
          _m([5e-6], label="Batched dot", sub_label="[1, 1]", description="bmm", num_threads=4)]
    text = str(benchmark.Compare(rs))
    lines = text.splitlines()
    assert lines[0].startswith("[") and " Batched dot " in lines[0] and lines[0].endswith("]")
    assert "mul/sum" in lines[1] and "bmm" in lines[1]
    assert lines[2].startswith("1 threads: ---")
    assert "[1, 1]" in lines[3] and "2.0" in lines[3] and "3.0" in lines[3]
    assert lines[4].startswith("4 threads: ---")
    assert "5.0" in lines[5]
    assert "Times are in microseconds (us)." in text
    assert len({len(line) for line in lines[:6]}) == 1  # one width for the whole table
    c = benchmark.Compare(rs)
    c.trim_significant_figures()
    c.colorize()
    assert "\033[" in str(c)


def test_unsupported_paths_name_themselves():
    with pytest.raises(ValueError, match="Language.CPP .* not supported"):
        benchmark.Timer("x * y;", language=benchmark.Language.CPP)
    with pytest.raises(NotImplementedError, match="collect_callgrind"):
        benchmark.Timer("pass").collect_callgrind()
    with pytest.raises(ValueError, match="num_threads"):
        benchmark.Timer("pass", num_threads=0)
    assert math.isfinite(benchmark.Timer("pass").timeit(2).median)
