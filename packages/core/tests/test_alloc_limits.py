"""Sizes beyond what a tensor can hold: every creation function and every op that allocates a
result refuses a negative size, a size, element count or byte count beyond int64, with an error
that names the op, the shape and the limit (never a bare OverflowError from the allocator), and
runs out of memory with a MemoryError that names the same."""

import re

import pytest

import fiamma

H = 2**62  # fits int64; H elements of 4 bytes do not
# an allocation the allocator is refused whatever the machine's overcommit policy:
# 2**62 bytes is beyond every 64-bit CPU's address space
OOM_BOOLS = 2**62

pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")

CREATION = {
    "empty": lambda *s, **kw: fiamma.empty(*s, **kw),
    "zeros": lambda *s, **kw: fiamma.zeros(*s, **kw),
    "ones": lambda *s, **kw: fiamma.ones(*s, **kw),
    "full": lambda *s, **kw: fiamma.full(s, 1.5, **kw),
    "rand": lambda *s, **kw: fiamma.rand(*s, **kw),
    "randn": lambda *s, **kw: fiamma.randn(*s, **kw),
    "randint": lambda *s, **kw: fiamma.randint(0, 5, s, **kw),
    "empty_strided": lambda *s, **kw: fiamma.empty_strided(s, (1,) * len(s), **kw),
    "normal": lambda *s, **kw: fiamma.normal(0.0, 1.0, size=s, **kw),
}


def _raises(op, *words, exc=RuntimeError):
    return pytest.raises(exc, match=re.escape(op) + ": .*" + ".*".join(map(re.escape, words)))


@pytest.mark.parametrize("op", sorted(CREATION))
def test_creation_refuses_sizes_beyond_the_limits(op):
    make = CREATION[op]
    with _raises(op, "negative dimension -1", "[3, -1]"):
        make(3, -1)
    # an element count beyond int64
    with _raises(op, f"[{H}, {H}]", "elements", "2**63 - 1"):
        make(H, H)
    # a size beyond int64 (even where another size is 0)
    with _raises(op, f"size {2**64}", "2**63 - 1"):
        make(0, 2**64)
    # an element count that fits but a byte count that does not
    with _raises(op, f"[{2**61}]", "float64", "bytes", "2**63 - 1"):
        make(2**61, dtype=fiamma.float64)


@pytest.mark.parametrize("op", ["empty", "zeros", "ones"])
def test_creation_out_of_memory_names_the_op(op):
    with _raises(op, "cannot allocate", f"[{OOM_BOOLS}]", "bool", exc=MemoryError):
        CREATION[op](OOM_BOOLS, dtype=fiamma.bool)


def test_other_creation_functions():
    with _raises("eye", f"[{H}, {H}]", "2**63 - 1"):
        fiamma.eye(H)
    with _raises("arange", f"[{H}]", "int64", "bytes"):
        fiamma.arange(0, H)
    with _raises("linspace", f"[{H}]", "bytes"):
        fiamma.linspace(0, 1, H)
    with _raises("randperm", f"[{H}]", "bytes"):
        fiamma.randperm(H)
    big = fiamma.zeros(1).expand(H)
    for name in ("empty_like", "zeros_like", "ones_like", "rand_like", "randn_like"):
        with _raises(name, f"[{H}]", "float32", "bytes"):
            getattr(fiamma, name)(big)
    with _raises("full_like", f"[{H}]", "bytes"):
        fiamma.full_like(big, 2.0)


# ops on a view of 2**62 elements over one float: each must refuse to allocate its result
RESULT_OPS = {
    "contiguous": lambda e: e.contiguous(),
    "clone": lambda e: e.clone(),
    "add": lambda e: e + 1,
    "mul": lambda e: e * e,
    "exp": lambda e: e.exp(),
    "sigmoid": lambda e: fiamma.sigmoid(e),
    "neg": lambda e: -e,
    "to": lambda e: e.to(fiamma.float64),
    "double": lambda e: e.double(),
    "flip": lambda e: e.flip(0),
    "roll": lambda e: e.roll(1),
    "cumsum": lambda e: e.cumsum(0),
    "sort": lambda e: e.sort(),
    "index_select": lambda e: e.index_select(0, fiamma.zeros(1, dtype=fiamma.int64).expand(H)),
    "repeat": lambda e: e.repeat(2),
    "tile": lambda e: e.tile((2,)),
    "cat": lambda e: fiamma.cat([e, e]),
    "stack": lambda e: fiamma.stack([e, e]),
}


@pytest.mark.parametrize("op", sorted(RESULT_OPS))
def test_ops_refuse_results_beyond_the_limits(op):
    e = fiamma.zeros(1).expand(H)
    with _raises(op, "2**63 - 1"):
        RESULT_OPS[op](e)


def test_the_reported_cases():
    with _raises("empty", f"[{H}, {H}]", "2**63 - 1"):
        fiamma.empty(H, H)
    with _raises("contiguous", f"[{H}]", "float32", f"{H * 4} bytes", "2**63 - 1"):
        fiamma.zeros(1).expand(H).contiguous()
    with _raises("repeat", f"[{H}]", "float32", "2**63 - 1"):
        fiamma.zeros(1).repeat(H)
    with _raises("repeat", "negative dimension -2"):
        fiamma.zeros(1).repeat(-2)
    with _raises("repeat", f"size {2**63}"):
        fiamma.zeros(2, 2).repeat(H, H)


def test_views_beyond_the_limits():
    one = fiamma.zeros(1)
    assert one.expand(H).shape == (H,)  # a view of 2**62 elements is fine, as in PyTorch
    with _raises("expand", f"size {2**64}"):
        one.expand(2**64)
    with _raises("expand", "elements", "2**63 - 1"):
        one.expand(H, H)
    with _raises("expand", f"size {2**64}"):
        one.expand(0, 2**64)
    with _raises("as_strided", "elements", "2**63 - 1"):
        one.as_strided((H, H), (0, 0))
    with _raises("reshape", "invalid"):
        one.reshape(H, H)
    with _raises("view", "invalid"):
        one.view(2**64)
    with _raises("matmul", "bytes"):
        fiamma.zeros(1, 1).expand(2**31, 1) @ fiamma.zeros(1, 1).expand(1, 2**31)


def test_error_names_the_function_the_user_called():
    nn = pytest.importorskip("fiamma.nn")
    with _raises("pad", "2**63 - 1"):
        nn.functional.pad(fiamma.zeros(2), (H, H))
    with _raises("one_hot", f"[1, {H}]", "int64", "bytes"):
        nn.functional.one_hot(fiamma.tensor([0]), H)
