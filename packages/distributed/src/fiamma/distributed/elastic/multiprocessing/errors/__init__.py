"""``@record`` (``torch.distributed.elastic.multiprocessing.errors.record``): a rank's uncaught
exception is written, with its traceback, to the JSON file named by ``TORCHELASTIC_ERROR_FILE``
(torchelastic's layout), which :mod:`fiamma.distributed.run` sets for every rank and reads to
say which rank failed first and why; then the exception propagates as usual.

>>> from fiamma.distributed.elastic.multiprocessing.errors import record
>>> @record
... def main():
...     return 3
>>> main()
3
"""

from __future__ import annotations

import functools
import json
import os
import time
import traceback
import warnings

__all__ = ["record", "ChildFailedError", "ErrorHandler", "get_error_handler"]


class ChildFailedError(Exception):
    """Raised by a launcher when one of its ranks failed: ``failures`` maps ranks to what
    each one's error file (or exit) said."""

    def __init__(self, name, failures):
        self.name = name
        self.failures = dict(failures)
        lines = [f"{name} FAILED"] + [f"  rank {r}: {f}" for r, f in sorted(self.failures.items())]
        super().__init__("\n".join(lines))


class ErrorHandler:
    """Writes a rank's exception to ``TORCHELASTIC_ERROR_FILE`` (torchelastic's JSON)."""

    def _error_file_path(self):
        return os.environ.get("TORCHELASTIC_ERROR_FILE")

    def initialize(self):
        """Set up before the wrapped function runs (nothing needed here)."""

    def record_exception(self, e):
        path = self._error_file_path()
        if not path:
            return
        record = {"message": {"message": f"{type(e).__name__}: {e}", "extraInfo": {
            "py_callstack": traceback.format_exc(), "timestamp": str(int(time.time()))}}}
        try:
            with open(path, "w") as f:
                json.dump(record, f)
        except OSError as err:
            warnings.warn(f"record: could not write the error file {path}: {err}",
                          RuntimeWarning, stacklevel=2)


_HANDLER = ErrorHandler()


def get_error_handler():
    return _HANDLER


def record(fn=None, error_handler=None):
    """Decorate a rank's entry point: an uncaught exception is recorded (see the module) and
    re-raised; ``SystemExit`` with status 0 or None returns None, others propagate."""
    handler = error_handler or get_error_handler()

    def wrap(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            handler.initialize()
            try:
                return f(*args, **kwargs)
            except SystemExit as se:
                if se.code in (0, None):
                    return None
                raise
            except Exception as e:
                handler.record_exception(e)
                raise
        return wrapper

    return wrap(fn) if fn is not None else wrap
