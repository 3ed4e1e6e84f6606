"""Reading ``.grad`` of a non-leaf tensor that does not retain its gradient warns as PyTorch
does (UserWarning, attributed to the reading line, so once per line under Python's default
filter); leaves, retained non-leaves and internal bookkeeping do not warn."""

import inspect
import warnings

import pytest

import fiamma

MSG = "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed"


def _reads(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("default")
        fn()
    return [x for x in w if MSG in str(x.message)]


def test_non_leaf_read_warns_once_per_line():
    x = fiamma.ones(3, requires_grad=True)
    y = x * 2

    def loop():
        for _ in range(5):
            assert y.grad is None  # one line: one warning

    w = _reads(loop)
    assert len(w) == 1 and w[0].category is UserWarning
    assert w[0].filename == __file__
    assert w[0].lineno == inspect.getsourcelines(loop)[1] + 2
    assert "use .retain_grad() on the non-leaf Tensor" in str(w[0].message)

    def two_lines():
        y.grad
        x[0].grad  # a view of a leaf is not a leaf either

    assert len(_reads(two_lines)) == 2


def test_silent_reads():
    x = fiamma.ones(3, requires_grad=True)
    plain = fiamma.ones(3)
    y = x * 2
    z = x * 3
    z.retain_grad()

    def reads():
        assert x.grad is None and plain.grad is None
        assert z.grad is None  # retains its gradient: None until backward, no warning
        (y.sum() + z.sum()).backward(inputs=[x, y, z])  # non-leaf inputs accumulate
        assert x.grad.tolist() == [5.0] * 3 and z.grad.tolist() == [1.0] * 3
        assert y.grad.tolist() == [1.0] * 3  # has a gradient now: no warning
        with fiamma.no_grad():
            w = x * 2
        assert w.grad is None  # made under no_grad: a leaf

    assert _reads(reads) == []


def test_error_filter_raises_at_the_read():
    y = fiamma.ones(2, requires_grad=True) * 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="not a leaf"):
            y.grad
    y.grad = fiamma.zeros(2)  # assignment and deletion are plain
    assert y.grad.tolist() == [0.0, 0.0]
    del y.grad
    with pytest.warns(UserWarning, match="not a leaf"):
        assert y.grad is None


@pytest.mark.parity
def test_same_message_as_torch():
    torch = pytest.importorskip("torch")
    t = torch.ones(2, requires_grad=True) * 2
    with warnings.catch_warnings(record=True) as tw:
        warnings.simplefilter("always")
        t.grad
    f = fiamma.ones(2, requires_grad=True) * 2
    w = _reads(lambda: f.grad)
    theirs = str(tw[0].message)
    assert str(w[0].message) == theirs[:theirs.index(" (Triggered internally")]
