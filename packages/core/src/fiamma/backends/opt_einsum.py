"""``fiamma.backends.opt_einsum``: PyTorch's switch for contraction-order optimisation in
``einsum``. fiamma's ``einsum`` picks its own pairwise contraction order for three or more
operands (the greedy smallest-intermediate rule, whether or not the ``opt_einsum`` package is
installed); ``enabled = False`` makes it contract left to right, as PyTorch does without
opt_einsum. ``strategy`` is kept for programs that read or set it ("auto", "greedy" or
"optimal"); fiamma's order is the greedy one for all three.

>>> import fiamma
>>> fiamma.backends.opt_einsum.enabled, fiamma.backends.opt_einsum.strategy
(True, 'auto')
"""

import importlib.util

enabled = True
strategy = "auto"

_STRATEGIES = ("auto", "greedy", "optimal")


def is_available():
    """Whether the ``opt_einsum`` package is importable (PyTorch's meaning)."""
    return importlib.util.find_spec("opt_einsum") is not None


def get_opt_einsum():
    """The ``opt_einsum`` module when it is installed, else None."""
    if not is_available():
        return None
    import opt_einsum

    return opt_einsum
