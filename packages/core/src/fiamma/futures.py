"""``fiamma.futures`` (PyTorch's ``torch.futures``): a :class:`Future` holds the result of an
asynchronous operation: a collective's ``Work.get_future()``, a DDP communication hook's return
value, or one that the program completes itself with :meth:`Future.set_result`.

A future bound to an operation (``Work.get_future()``) completes in the thread that first waits
for it or polls it (:meth:`~Future.wait`, :meth:`~Future.value`, :meth:`~Future.done`): MPI makes
progress only when a thread drives it, so there is no background thread completing futures.
Callbacks added with :meth:`~Future.then` and :meth:`~Future.add_done_callback` run once, in
the thread that completes the future (at once if it is already completed).

>>> import fiamma
>>> fut = fiamma.futures.Future()
>>> doubled = fut.then(lambda f: f.value() * 2)
>>> fut.set_result(fiamma.tensor([1.0, 2.0]))
>>> doubled.wait().tolist()
[2.0, 4.0]
"""

from __future__ import annotations

import threading
import types
import warnings

__all__ = ["Future", "collect_all", "wait_all"]


class Future:
    """The eventual result of an asynchronous operation (``torch.futures.Future``).

    ``devices`` is accepted for PyTorch's signature (CUDA futures record streams there; fiamma's
    CUDA collectives order their streams themselves) and otherwise unused."""

    __class_getitem__ = classmethod(types.GenericAlias)   # ``Future[Tensor]`` in annotations

    def __init__(self, *, devices=None):
        self._cond = threading.Condition()
        self._done = False
        self._value = None
        self._exception = None
        self._callbacks = []
        self._drive = None   # () -> None: completes this future in the calling thread
        self._ready = None   # () -> bool: whether _drive would return without blocking
        self._devices = devices

    # ---- state ----

    def done(self):
        """True once the future holds a value or an error (polling may complete it)."""
        if not self._done and self._ready is not None and self._ready():
            self._run_drive()
        return self._done

    def wait(self):
        """Block until completed; return the value, or raise the error it was completed with."""
        if not self._done:
            self._run_drive()
            with self._cond:
                while not self._done:
                    self._cond.wait()
        if self._exception is not None:
            raise self._exception
        return self._value

    def value(self):
        """The value (raising the future's error). A future bound to an operation is waited
        for; a future that the program completes must have been completed first."""
        if not self._done:
            if self._drive is None:
                raise RuntimeError("Future.value: the Future is not completed yet; call wait() "
                                   "or read value() inside a then() callback")
            self.wait()
        if self._exception is not None:
            raise self._exception
        return self._value

    def set_result(self, result):
        """Complete the future with ``result`` (once) and run its callbacks."""
        if not self._complete(result, None):
            raise RuntimeError("Future.set_result: the Future is already completed")

    def set_exception(self, result):
        """Complete the future with the error ``result`` (an exception), raised by wait()."""
        if not isinstance(result, BaseException):
            raise TypeError(f"Future.set_exception: expected an exception, got "
                            f"{type(result).__name__}")
        if not self._complete(None, result):
            raise RuntimeError("Future.set_exception: the Future is already completed")

    # ---- callbacks ----

    def then(self, callback):
        """A new future completed with ``callback(self)`` once this one completes (with the
        error ``callback`` raises, if it raises)."""
        if not callable(callback):
            raise TypeError(f"Future.then: callback must be callable, got "
                            f"{type(callback).__name__}")
        child = Future(devices=self._devices)
        child._drive = self._wait_quietly
        child._ready = self.done

        def run(parent):
            try:
                v = callback(parent)
            except BaseException as e:  # noqa: BLE001  (handed to the child future)
                child._complete(None, e)
                return
            child._complete(v, None)

        self._on_done(run)
        return child

    def add_done_callback(self, callback):
        """Run ``callback(self)`` once the future completes (at once if it has). An error the
        callback raises is reported as a warning: it has no future to go to."""
        if not callable(callback):
            raise TypeError(f"Future.add_done_callback: callback must be callable, got "
                            f"{type(callback).__name__}")

        def run(fut):
            try:
                callback(fut)
            except Exception as e:  # noqa: BLE001
                warnings.warn(f"Future.add_done_callback: the callback raised {e!r}",
                              RuntimeWarning, stacklevel=2)

        self._on_done(run)

    # ---- internals ----

    def _on_done(self, fn):
        with self._cond:
            if not self._done:
                self._callbacks.append(fn)
                return
        fn(self)

    def _complete(self, value, exc):
        with self._cond:
            if self._done:
                return False
            self._value, self._exception, self._done = value, exc, True
            self._drive = self._ready = None
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        for fn in callbacks:
            fn(self)
        return True

    def _run_drive(self):
        d = self._drive
        if d is not None:
            d()

    def _wait_quietly(self):
        try:
            self.wait()
        except BaseException:  # noqa: BLE001  (the error is the future's; its waiters see it)
            pass

    @classmethod
    def _of_work(cls, work):
        """A future completed with ``work.result()`` (or its error) when ``work`` completes."""
        fut = cls()

        def drive():
            try:
                work.wait()
                value = work.result() if hasattr(work, "result") else []
            except BaseException as e:  # noqa: BLE001
                fut._complete(None, e)
                return
            fut._complete(value, None)

        fut._drive = drive
        fut._ready = work.is_completed
        return fut

    def __repr__(self):
        if not self._done:
            return "Future(pending)"
        if self._exception is not None:
            return f"Future(error={self._exception!r})"
        return f"Future(value={self._value!r})"


def collect_all(futures):
    """A future completed with the list ``futures`` once every one of them has completed
    (``torch.futures.collect_all``); their errors stay in them."""
    futures = list(futures)
    for f in futures:
        if not isinstance(f, Future):
            raise TypeError(f"collect_all: expected a list of Future, got an element of type "
                            f"{type(f).__name__}")
    out = Future()
    left = [len(futures)]
    lock = threading.Lock()

    def one(_):
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            out._complete(futures, None)

    def drive():
        for f in futures:
            f._wait_quietly()

    out._drive = drive
    out._ready = lambda: all(f.done() for f in futures)
    if not futures:
        out._complete([], None)
    for f in futures:
        f._on_done(one)
    return out


def wait_all(futures):
    """Wait for every future in turn and return their values; the first error is raised at once
    (``torch.futures.wait_all``)."""
    out = []
    for f in futures:
        if not isinstance(f, Future):
            raise TypeError(f"wait_all: expected a list of Future, got an element of type "
                            f"{type(f).__name__}")
        out.append(f.wait())
    return out
