"""Anomaly detection: record each node's forward stack trace and check every gradient a
backward formula returns for NaN, naming the forward op that produced it.

>>> import fiamma
>>> with fiamma.autograd.detect_anomaly():
...     fiamma.autograd.is_anomaly_enabled()
True
"""

import functools
import warnings

from fiamma.autograd._engine import anomaly

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled", "set_anomaly_enabled"]


def is_anomaly_enabled():
    """Whether anomaly detection is on (``torch.is_anomaly_enabled``)."""
    return anomaly.enabled


def is_anomaly_check_nan_enabled():
    """Whether anomaly detection checks backward results for NaN
    (``torch.is_anomaly_check_nan_enabled``; True unless turned off)."""
    return anomaly.check_nan


def set_anomaly_enabled(enabled, check_nan=True):
    """Turn anomaly detection on or off, and its NaN check (``torch.set_anomaly_enabled``:
    a plain call, the state that ``detect_anomaly`` / ``set_detect_anomaly`` save and
    restore).

    >>> import fiamma
    >>> fiamma.set_anomaly_enabled(True, check_nan=False)
    >>> fiamma.is_anomaly_enabled(), fiamma.is_anomaly_check_nan_enabled()
    (True, False)
    >>> fiamma.set_anomaly_enabled(False)
    >>> fiamma.is_anomaly_enabled(), fiamma.is_anomaly_check_nan_enabled()
    (False, True)
    """
    if not isinstance(enabled, bool) or not isinstance(check_nan, bool):
        raise TypeError("set_anomaly_enabled: expected bools (enabled, check_nan), got "
                        f"{type(enabled).__name__} and {type(check_nan).__name__}")
    anomaly.enabled = enabled
    anomaly.check_nan = check_nan


class detect_anomaly:
    """Context manager / decorator enabling anomaly detection (slow: debugging only)."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)
        self._prev = anomaly.enabled, anomaly.check_nan
        anomaly.enabled = True
        anomaly.check_nan = self.check_nan
        return self

    def __exit__(self, *exc):
        anomaly.enabled, anomaly.check_nan = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


class set_detect_anomaly:
    """``set_detect_anomaly(mode)``: a call, or a context manager restoring the old mode."""

    def __init__(self, mode, check_nan=True):
        self._prev = anomaly.enabled, anomaly.check_nan
        anomaly.enabled = bool(mode)
        anomaly.check_nan = check_nan

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        anomaly.enabled, anomaly.check_nan = self._prev
        return False
