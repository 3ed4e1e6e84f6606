"""The counter-based generator on every device besides the CPU: the same seed gives the CPU's
numbers (bit for bit; lognormal and Cauchy go through the array module's exp/tan, within an
ulp), for every sampling function, in-place fill, dtype and layout."""

import numpy as np
import pytest
from conftest import assert_same

import fiamma
from fiamma import _dtype as D
from fiamma._backend import codes as C
from fiamma._tensor import new_empty

FLOATS = [fiamma.float32, fiamma.float64, fiamma.float16, fiamma.bfloat16]


def _twice(fn, device, seed=0):
    """fn(device) and fn(cpu), each right after manual_seed(seed)."""
    fiamma.manual_seed(seed)
    got = fn(device)
    fiamma.manual_seed(seed)
    want = fn("cpu")
    return got, want


def _exact(got, want):
    assert got.device.type != "cpu" or want.device.type == "cpu"
    assert_same(got, want, rtol=0, atol=0)


def test_randn_same_seed(device):
    fiamma.manual_seed(0)
    a = fiamma.randn(1000, device=device)
    a2 = fiamma.rand(3, 5, device=device)
    fiamma.manual_seed(0)
    b = fiamma.randn(1000)
    assert a.device.type == device
    _exact(a, b)
    # the generator advanced the same: the next draws agree too
    _exact(a2, fiamma.rand(3, 5))


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("n", [1, 5, 1027])
def test_creation_functions(device, dt, n):
    for fn in [lambda d: fiamma.rand(n, dtype=dt, device=d),
               lambda d: fiamma.randn(n, dtype=dt, device=d),
               lambda d: fiamma.normal(2.0, 3.0, (n,), dtype=dt, device=d),
               lambda d: fiamma.rand_like(fiamma.zeros(n, dtype=dt, device=d))]:
        _exact(*_twice(fn, device))


@pytest.mark.parametrize("dt", [fiamma.int64, fiamma.int32, fiamma.uint8, fiamma.int8,
                                fiamma.bool, fiamma.float32, fiamma.float16, fiamma.bfloat16])
def test_randint_and_random_(device, dt):
    hi = 2 if dt is fiamma.bool else 100
    _exact(*_twice(lambda d: fiamma.randint(0, hi, (301,), dtype=dt, device=d), device))
    _exact(*_twice(lambda d: fiamma.empty(7, 9, dtype=dt, device=d).random_(), device))
    if dt is fiamma.int64:
        _exact(*_twice(lambda d: fiamma.randint(-2 ** 63, 2 ** 63 - 1, (33,), device=d), device))
        _exact(*_twice(lambda d: fiamma.empty(11, dtype=dt, device=d).random_(-5, None),
                       device))


@pytest.mark.parametrize("dt", FLOATS)
def test_inplace_fills(device, dt):
    tol = {"rtol": 0, "atol": 0}
    for fn, close in [
        (lambda t: t.uniform_(-2.5, 4.0), False), (lambda t: t.uniform_(1.0, 1.0 + 1e-3), False),
        (lambda t: t.normal_(0.5, 2.0), False), (lambda t: t.exponential_(1.5), False),
        (lambda t: t.geometric_(0.3), False), (lambda t: t.bernoulli_(0.25), False),
        (lambda t: t.log_normal_(0.2, 0.5), True), (lambda t: t.cauchy_(1.0, 2.0), True),
    ]:
        got, want = _twice(lambda d: fn(fiamma.empty(201, dtype=dt, device=d)), device)
        assert_same(got, want, **({"rtol": 1e-15, "atol": 0} if close else tol))


def test_strided_target_gets_row_major_values(device):
    def fn(d):
        t = fiamma.zeros(6, 8, device=d)[:, ::2].t()
        return t.normal_()
    _exact(*_twice(fn, device))


@pytest.mark.parametrize("dt", [fiamma.int64, fiamma.int8, fiamma.bool, fiamma.float32])
def test_integer_targets_of_double_draws(device, dt):
    _exact(*_twice(lambda d: fiamma.empty(257, dtype=dt, device=d).bernoulli_(0.7), device))
    _exact(*_twice(lambda d: fiamma.empty(257, dtype=dt, device=d).geometric_(1e-30), device))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 1000, 20001])
def test_randperm(device, n):
    got, want = _twice(lambda d: fiamma.randperm(n, device=d), device, seed=n)
    _exact(got, want)
    assert sorted(got.tolist()) == list(range(n))
    _exact(*_twice(lambda d: fiamma.randperm(n, dtype=fiamma.int32, device=d), device))


def test_bernoulli_tensor_probs(device):
    p = fiamma.rand(4, 50)
    _exact(*_twice(lambda d: fiamma.bernoulli(p.to(d)), device))
    _exact(*_twice(lambda d: fiamma.empty(4, 50, device=d).bernoulli_(p.to(d)), device))
    _exact(*_twice(lambda d: p.to(d, fiamma.float64).bernoulli(), device))
    bad = fiamma.tensor([0.5, 1.5], device=device)
    with pytest.raises(RuntimeError, match=r"bernoulli.*p=1.5 at flat index 1"):
        fiamma.bernoulli(bad)


@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("rows,ncat,k", [(1, 4, 4), (3, 7, 5), (5, 300, 40), (2, 1, 1)])
def test_multinomial(device, replacement, rows, ncat, k):
    rng = np.random.default_rng(rows * ncat)
    p = rng.random((rows, ncat))
    p[p < 0.2] = 0.0
    p[:, 0] = 0.5  # every row keeps enough positive categories
    p[:, -1] = 1e-3
    if not replacement and k > ncat:
        k = ncat
    pt = fiamma.tensor(p, dtype=fiamma.float32)
    got, want = _twice(lambda d: fiamma.multinomial(pt.to(d), k, replacement), device)
    _exact(got, want)
    got, want = _twice(lambda d: pt[0].to(d).multinomial(k, replacement), device)
    _exact(got, want)


def test_multinomial_errors(device):
    with pytest.raises(RuntimeError, match=r"inf.*row 1"):
        fiamma.multinomial(fiamma.tensor([[1.0, 2.0], [1.0, float("inf")]], device=device), 1)
    with pytest.raises(RuntimeError, match="sum of probabilities"):
        fiamma.multinomial(fiamma.tensor([0.0, 0.0], device=device), 1)
    with pytest.raises(RuntimeError, match="not enough"):
        fiamma.multinomial(fiamma.tensor([1.0, 0.0, 0.0], device=device), 2)


def test_normal_tensor_forms(device):
    m = fiamma.arange(6.0).reshape(2, 3)
    s = fiamma.full((3,), 0.5)
    _exact(*_twice(lambda d: fiamma.normal(m.to(d), s.to(d)), device))
    _exact(*_twice(lambda d: fiamma.normal(m.to(d)), device))
    with pytest.raises(RuntimeError, match="std >= 0"):
        fiamma.normal(m.to(device), -s.to(device))


def test_generator_and_state(device):
    g = fiamma.Generator().manual_seed(123)
    a = fiamma.randn(33, generator=g, device=device)
    g.manual_seed(123)
    _exact(a, fiamma.randn(33, generator=g))
    state = fiamma.get_rng_state()
    x = fiamma.rand(9, device=device)
    fiamma.set_rng_state(state)
    _exact(x, fiamma.rand(9))


def test_dropout_mask_on_device(device):
    F = pytest.importorskip("fiamma.nn.functional")
    x = fiamma.ones(64, 32)
    fiamma.manual_seed(5)
    got = F.dropout(x.to(device), 0.3, training=True)
    fiamma.manual_seed(5)
    _exact(got, F.dropout(x, 0.3, training=True))


def test_offset_wraps_and_primitives_directly(device):
    """Blocks past 2**64 - 1 wrap to 0 (the counter is 64-bit), as in the C."""
    from fiamma._backend import cpu

    be = fiamma.empty(1, device=device)._storage.backend
    dev = fiamma.device(device)
    for dist, a, b in [(C.RAND_UNIFORM, 0.0, 1.0), (C.RAND_NORMAL, 0.0, 1.0),
                       (C.RAND_EXPONENTIAL, 2.0, 0.0), (C.RAND_UNIFORM, -1.0, 1e-300)]:
        for dt in [D.float32, D.float64, D.float16]:
            c, x = new_empty((99,), dt), new_empty((99,), dt, dev)
            assert cpu.rand_fill(dist, c, 2 ** 64 - 1, 2 ** 64 - 5, a, b) == 0
            assert be.rand_fill(dist, x, 2 ** 64 - 1, 2 ** 64 - 5, a, b) == 0
            _exact(x, c)
    x = new_empty((3,), D.int64, dev)
    assert be.rand_fill(C.RAND_NORMAL, x, 0, 0, 0.0, 1.0) == C.ERR_DTYPE
    assert be.rand_fill(99, x, 0, 0, 0.0, 1.0) == C.ERR_OP
