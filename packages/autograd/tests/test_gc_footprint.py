"""The graph's footprint in the cyclic GC: every tracked object a node keeps alive is promoted
to the oldest generation during a long forward pass and brings the next full collection (a
traversal of the whole heap) closer, so recording keeps it to the node itself (its edges live in
its slots)."""

import gc
import os

import numpy as np
import pytest

import fiamma


def _tracked_per_op(build, n=400):
    gc.collect()
    before = len(gc.get_objects())
    keep = build(n)
    gc.collect()
    per_op = (len(gc.get_objects()) - before) / n
    del keep
    return per_op


def test_add_chain_keeps_one_tracked_object_per_op():
    x = fiamma.ones(4, requires_grad=True)
    y = fiamma.ones(4, requires_grad=True)

    def chain(n):
        z = x
        for _ in range(n):
            z = z + y
        return z

    assert _tracked_per_op(chain) < 1.1  # the node


def test_unary_chain_keeps_one_tracked_object_per_op():
    x = fiamma.ones(4, requires_grad=True)

    def chain(n):
        z = x
        for _ in range(n):
            z = z.neg()
        return z

    assert _tracked_per_op(chain) < 1.1


def test_shared_dtype_tuples_are_per_combination():
    a = fiamma.ones(3, requires_grad=True)
    b = fiamma.ones(3, dtype=fiamma.float64, requires_grad=True)
    n1, n2, n3 = (a + a).grad_fn, (a * a).grad_fn, (a + b).grad_fn
    assert n1._dtypes is n2._dtypes
    assert n1._dtypes == (fiamma.float32, fiamma.float32)
    assert n3._dtypes == (fiamma.float32, fiamma.float64)
    assert (a.neg()).grad_fn._dtypes == (fiamma.float32,)
    c = fiamma.cat([a, b.float(), a])
    assert c.grad_fn is not None
    # mixed-dtype gradients still come back in each input's dtype
    (a + b).sum().backward()
    assert a.grad.dtype == fiamma.float32 and b.grad.dtype == fiamma.float64
    np.testing.assert_array_equal(b.grad.numpy(), np.ones(3))


def test_nodes_share_one_read_only_empty_kwargs():
    x = fiamma.ones(4, requires_grad=True)
    y = fiamma.ones(4, requires_grad=True)
    z = x + y
    m = x[None] * y  # broadcasting: the general binary path
    assert z.grad_fn.kwargs == {}
    assert z.grad_fn.kwargs is (z * y).grad_fn.kwargs is m.grad_fn.kwargs
    with pytest.raises(TypeError, match="read-only"):
        z.grad_fn.kwargs["alpha"] = 2
    assert (x.add(y, alpha=2)).grad_fn.kwargs == {"alpha": 2}


@pytest.mark.skipif(os.environ.get("FIAMMA_CPU_BACKEND", "") == "xp",
                    reason="counts the CPU operator fast path's allocations (the array-module "
                    "backend keeps objects of its own per op)")
def test_add_chain_advances_the_young_generation_little():
    # every GC-type allocation still alive advances the young generation's counter (a
    # collection every 700); recording an add allocates the node alone (its edges and input
    # shapes live in its slots, and it shares a read-only empty kwargs)
    x = fiamma.ones(4, requires_grad=True)
    y = fiamma.ones(4, requires_grad=True)
    z = x + y
    gc.collect()
    gc.disable()
    try:
        c0 = gc.get_count()[0]
        for _ in range(300):
            z = z + y
        per_op = (gc.get_count()[0] - c0) / 300
    finally:
        gc.enable()
    assert per_op < 1.1
    z.sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), np.full(4, 301.0))


def test_edges_in_slots_read_as_next_functions():
    a = fiamma.ones(3, requires_grad=True)
    b = fiamma.ones(3)
    c = fiamma.ones(3, requires_grad=True)
    two = (a * b).grad_fn
    assert [n is None for n, _ in two.next_functions] == [False, True]
    assert two.needs_input_grad == (True, False)
    one = a.exp().grad_fn
    assert len(one.next_functions) == 1 and one.needs_input_grad == (True,)
    three = fiamma.addcmul(a, b, c).grad_fn
    assert three.needs_input_grad == (True, False, True)
    assert three.next_functions[2][0].variable is c
    (fiamma.addcmul(a, b, c) * 2).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full(3, 2.0))
    np.testing.assert_array_equal(c.grad.numpy(), np.full(3, 2.0))
