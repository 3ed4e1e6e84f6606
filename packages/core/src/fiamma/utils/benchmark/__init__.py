"""fiamma.utils.benchmark: PyTorch's ``torch.utils.benchmark`` for Python statements.

``Timer`` times a statement the way PyTorch's does (a fixed thread count, 1 by default, set for
the measurement; ``timeit`` after a warm-up; ``blocked_autorange`` choosing a block size whose
timer overhead is negligible, then measuring blocks until ``min_run_time``;
``adaptive_autorange`` until the interquartile range is within a threshold), returning
``Measurement`` objects with PyTorch's statistics (median, mean, IQR, significant figures,
warnings) and printed form; ``Compare`` lays many of them out in PyTorch's table.

Not supported, each raising an error that names it: C++ statements (``language=Language.CPP``,
``"c++"``: fiamma has no C++ frontend to compile them against) and Callgrind instruction counts
(``collect_callgrind``).

>>> import fiamma
>>> from fiamma.utils.benchmark import Timer
>>> m = Timer("x * y", globals={"x": fiamma.ones(8), "y": fiamma.ones(8)}).timeit(10)
>>> m.number_per_run, len(m.times)
(10, 1)
"""

from fiamma.utils.benchmark._compare import Colorize, Compare  # noqa: F401
from fiamma.utils.benchmark._measurement import Measurement, TaskSpec, select_unit  # noqa: F401
from fiamma.utils.benchmark._timer import Language, Timer  # noqa: F401

__all__ = ["Colorize", "Compare", "Language", "Measurement", "TaskSpec", "Timer",
           "select_unit"]
