"""A context manager that sets module-level flags and restores them (``cudnn.flags(...)``)."""

import contextlib


@contextlib.contextmanager
def set_flags(module, **values):
    saved = {k: getattr(module, k) for k in values}
    for k, v in values.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(module, k, v)
