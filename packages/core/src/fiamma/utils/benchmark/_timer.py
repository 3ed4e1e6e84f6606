"""Timer: PyTorch's ``torch.utils.benchmark.Timer`` for Python statements."""

import enum
import timeit

from fiamma.utils.benchmark._measurement import Measurement, TaskSpec

__all__ = ["Language", "Timer"]


class Language(enum.Enum):
    PYTHON = 0
    CPP = 1


class _num_threads:
    """Run a block with fiamma's intra-op thread count set to ``n``."""

    def __init__(self, n):
        self.n = n

    def __enter__(self):
        import fiamma

        self.prev = fiamma.get_num_threads()
        if self.n != self.prev:
            fiamma.set_num_threads(self.n)

    def __exit__(self, *exc):
        import fiamma

        if fiamma.get_num_threads() != self.prev:
            fiamma.set_num_threads(self.prev)


class Timer:
    """Time ``stmt`` after ``setup`` (both Python source), run with ``globals`` on
    ``num_threads`` threads (1 by default, as PyTorch, so results do not depend on the machine's
    core count). ``label``, ``sub_label``, ``description`` and ``env`` name the result in its
    printed form and in ``Compare``'s table.

    >>> import fiamma
    >>> t = Timer("x.sum()", globals={"x": fiamma.ones(100)}, label="sum")
    >>> m = t.blocked_autorange(min_run_time=0.01)
    >>> m.median > 0 and m.label == "sum"
    True
    """

    def __init__(self, stmt="pass", setup="pass", global_setup="", timer=timeit.default_timer,
                 globals=None, label=None, sub_label=None, description=None, env=None,
                 num_threads=1, language=Language.PYTHON):
        if not isinstance(stmt, str):
            raise ValueError("Timer: stmt must be a string (Python source)")
        if language in (Language.CPP, "cpp", "c++"):
            raise ValueError("Timer: language=Language.CPP (C++ statements) is not supported: "
                             "fiamma has no C++ frontend to compile them against; time the "
                             "Python statement instead")
        if language not in (Language.PYTHON, "py", "python"):
            raise ValueError(f"Timer: invalid language {language!r}")
        if global_setup:
            raise ValueError("Timer: global_setup is C++ only (language=Language.CPP)")
        if not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"Timer: num_threads must be a positive int, got {num_threads!r}")
        import textwrap

        stmt = textwrap.dedent(stmt).strip() or "pass"
        setup = textwrap.dedent(setup).strip() or "pass"
        self._globals = dict(globals or {})
        if "torch" not in self._globals:  # PyTorch puts torch in every Timer's namespace
            import fiamma

            self._globals["torch"] = fiamma
        self._timer = timeit.Timer(stmt=stmt, setup=setup, timer=timer, globals=self._globals)
        self._task_spec = TaskSpec(stmt, setup, global_setup, label, sub_label, description,
                                   env, num_threads)

    def _timeit(self, number):
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number=1000000):
        """One measurement of ``number`` runs, after a warm-up of ``number // 100`` (at least 2)."""
        with _num_threads(self._task_spec.num_threads):
            self._timeit(max(int(number // 100), 2))
            return Measurement(number, [self._timeit(number)], self._task_spec)

    def repeat(self, repeat=-1, number=-1):
        raise NotImplementedError("Timer.repeat: use blocked_autorange or adaptive_autorange "
                                  "(PyTorch's Timer does not implement repeat either)")

    def autorange(self, callback=None):
        raise NotImplementedError("Timer.autorange: use blocked_autorange or adaptive_autorange "
                                  "(PyTorch's Timer does not implement autorange either)")

    def _estimate_block_size(self, min_run_time):
        with _num_threads(self._task_spec.num_threads):
            overheads = sorted(self._timeit(0) for _ in range(5))
            overhead = overheads[2]
            number = 1
            while True:
                taken = self._timeit(number)
                if overhead / taken <= 1e-4 and taken >= min_run_time / 1000:
                    break
                if taken > min_run_time or number * 10 > 2147483647:
                    break
                number *= 10
        return number

    def _loop(self, number, stop, min_run_time, max_run_time=None, callback=None):
        total, times, can_stop = 0.0, [], False
        with _num_threads(self._task_spec.num_threads):
            while total < min_run_time or not can_stop:
                spent = self._timeit(number)
                times.append(spent)
                total += spent
                if callback:
                    callback(number, spent)
                can_stop = stop(times)
                if max_run_time and total > max_run_time:
                    break
        return times

    def blocked_autorange(self, callback=None, min_run_time=0.2):
        """Measure blocks of runs until ``min_run_time`` seconds have been spent; the block size
        is chosen so the timer's own overhead is negligible (it also warms up)."""
        number = self._estimate_block_size(min_run_time)
        times = self._loop(number, lambda times: True, min_run_time, callback=callback)
        return Measurement(number, times, self._task_spec)

    def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0,
                           callback=None):
        """Measure blocks until the IQR is under ``threshold`` of the median (at least 4 blocks
        and ``min_run_time`` seconds; at most ``max_run_time``)."""
        number = self._estimate_block_size(min_run_time=0.05)

        def stop(times):
            return len(times) > 3 and Measurement(number, times, self._task_spec) \
                .meets_confidence(threshold)

        times = self._loop(number, stop, min_run_time, max_run_time, callback)
        return Measurement(number, times, self._task_spec)

    def collect_callgrind(self, number=100, *, repeats=None, collect_baseline=True,
                          retain_out_file=False):
        raise NotImplementedError("Timer.collect_callgrind: Callgrind instruction counts are "
                                  "not supported by fiamma.utils.benchmark (time with "
                                  "blocked_autorange instead)")
