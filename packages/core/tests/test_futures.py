"""fiamma.futures (torch.futures): completion, then() chains, errors, callbacks, completion from
another thread, futures bound to pending work, collect_all / wait_all."""

import threading
import warnings

import pytest

import fiamma
from fiamma.futures import Future, collect_all, wait_all


def test_set_result_then_chain_and_value():
    f = Future()
    assert not f.done() and repr(f) == "Future(pending)"
    g = f.then(lambda x: x.value() + 1).then(lambda x: x.value() * 10)
    with pytest.raises(RuntimeError, match="not completed yet"):
        f.value()
    f.set_result(fiamma.tensor([1.0, 2.0]))
    assert f.done() and g.done()
    assert g.wait().tolist() == [20.0, 30.0] and g.value().tolist() == [20.0, 30.0]
    with pytest.raises(RuntimeError, match="already completed"):
        f.set_result(1)
    # then() on a completed future runs at once
    assert f.then(lambda x: "late").wait() == "late"


def test_errors_propagate_through_then():
    f = Future()
    g = f.then(lambda x: x.value() + 1)
    h = f.then(lambda x: 1 / 0)
    f.set_exception(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        f.wait()
    with pytest.raises(ValueError, match="boom"):
        g.wait()
    with pytest.raises(ZeroDivisionError):  # (the callback runs on an error too)
        h.value()
    ok = Future()
    bad = ok.then(lambda x: 1 / 0)
    ok.set_result(1)
    with pytest.raises(ZeroDivisionError):
        bad.wait()
    with pytest.raises(TypeError, match="expected an exception, got int"):
        Future().set_exception(3)
    with pytest.raises(TypeError, match="callback must be callable"):
        Future().then(None)


def test_add_done_callback_order_and_errors():
    f, calls = Future(), []
    f.add_done_callback(lambda x: calls.append(("a", x.value())))
    f.add_done_callback(lambda x: 1 / 0)
    f.add_done_callback(lambda x: calls.append(("b", x.value())))
    with pytest.warns(RuntimeWarning, match="the callback raised ZeroDivisionError"):
        f.set_result(5)
    assert calls == [("a", 5), ("b", 5)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f.add_done_callback(lambda x: calls.append(("c", x.value())))
    assert calls[-1] == ("c", 5)


def test_completed_from_another_thread():
    f = Future()
    g = f.then(lambda x: x.value() * 2)
    t = threading.Timer(0.05, lambda: f.set_result(21))
    t.start()
    assert g.wait() == 42
    t.join()


class _Pending:
    """A stand-in for a collective's Work: completes when waited for."""

    def __init__(self, value, fail=False):
        self.value, self.fail, self.waited = value, fail, 0

    def wait(self, timeout=None):
        self.waited += 1
        if self.fail:
            raise TimeoutError("collective timed out")
        return True

    def is_completed(self):
        return self.waited > 0

    def result(self):
        return [self.value]


def test_future_bound_to_work_is_driven_by_its_waiters():
    w = _Pending(7)
    f = Future._of_work(w)
    chained = f.then(lambda x: x.value()[0] + 1)
    assert not chained.done() and w.waited == 0   # polling does not block
    assert chained.wait() == 8 and w.waited == 1 and f.value() == [7]
    w2 = _Pending(0, fail=True)
    f2 = Future._of_work(w2)
    with pytest.raises(TimeoutError, match="timed out"):
        f2.then(lambda x: x.value()).wait()
    # value() on a bound future waits for it
    assert Future._of_work(_Pending(3)).value() == [3]


def test_collect_all_and_wait_all():
    a, b = Future(), Future._of_work(_Pending(2))
    both = collect_all([a, b])
    assert not both.done()
    a.set_result(1)
    futs = both.wait()
    assert futs == [a, b] and [f.value() for f in futs] == [1, [2]]
    assert collect_all([]).wait() == []
    assert wait_all([a, b]) == [1, [2]]
    bad = Future()
    bad.set_exception(RuntimeError("rank 1 failed"))
    with pytest.raises(RuntimeError, match="rank 1 failed"):
        wait_all([a, bad])
    assert collect_all([a, bad]).wait()[1] is bad   # errors stay in the futures
    with pytest.raises(TypeError, match="expected a list of Future"):
        collect_all([a, 3])
    assert fiamma.futures.Future is Future


def test_future_is_subscriptable_in_annotations():
    # libraries annotate with torch.futures.Future[Tensor] (evaluated at definition time)
    alias = Future[fiamma.Tensor]
    assert alias.__origin__ is Future and alias.__args__ == (fiamma.Tensor,)
