"""Engine semantics (PyTorch's documented behaviour), using only the ops whose formulas the
engine ships (add, mul, sum, copy_) so these tests do not depend on the formula modules."""

import gc
import threading
import warnings
import weakref

import numpy as np
import pytest

import fiamma
import fiamma.autograd as A
from fiamma.autograd import Function
from fiamma.autograd_hook import declare_op, ops


def leaf(values, dtype=fiamma.float32):
    return fiamma.tensor(values, dtype=dtype, requires_grad=True)


# ---- basics -------------------------------------------------------------------------------------

def test_grad_fn_names_and_next_functions():
    x = leaf([1.0, 2.0])
    y = x * 2
    z = (y + x).sum()
    assert z.grad_fn.name() == "SumBackward0"
    (add_fn, nr), = z.grad_fn.next_functions
    assert add_fn.name() == "AddBackward0" and nr == 0
    names = [n.name() for n, _ in add_fn.next_functions]
    assert names == ["MulBackward0", "AccumulateGrad"]
    acc = add_fn.next_functions[1][0]
    assert acc.variable is x
    assert x.is_leaf and not y.is_leaf and y.requires_grad
    assert x.grad_fn is None


def test_accumulates_across_backward_calls():
    x = leaf([1.0, 2.0, 3.0])
    (x * x).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0, 9.0]
    x.grad = None
    (x + x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_grad_does_not_alias_user_gradient_or_other_leaves():
    x = leaf([1.0, 2.0])
    y = leaf([3.0, 4.0])
    g = fiamma.tensor([1.0, 1.0])
    (x + y).backward(g)
    x.grad.mul_(5)
    assert y.grad.tolist() == [1.0, 1.0] and g.tolist() == [1.0, 1.0]


def test_view_gradients_kept_only_when_nothing_else_holds_them(monkeypatch):
    # a user gradient reaching a leaf through a view (its base is the user's tensor): copied
    x = leaf([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    g = fiamma.ones(3, 2)
    x.t().backward(g)
    g.add_(1)
    assert x.grad.tolist() == [[1.0] * 3] * 2
    # two leaves fed views of one gradient tensor (cat's backward): each gets its own memory
    a, b = leaf([1.0, 2.0]), leaf([3.0])
    fiamma.cat([a, b]).backward(fiamma.tensor([1.0, 2.0, 3.0]))
    a.grad.mul_(10)
    assert b.grad.tolist() == [3.0] and a.grad.tolist() == [10.0, 20.0]
    # linear's weight (used transposed) gets a contiguous gradient equal to g^T x
    rng = np.random.default_rng(0)
    xin = fiamma.tensor(rng.standard_normal((5, 4)), dtype=fiamma.float64)
    w = leaf(rng.standard_normal((3, 4)), dtype=fiamma.float64)
    bias = leaf(rng.standard_normal(3), dtype=fiamma.float64)
    gy = rng.standard_normal((5, 3))
    clones = []
    orig = fiamma.Tensor.clone
    monkeypatch.setattr(fiamma.Tensor, "clone", lambda t, *a, **k: clones.append(t.shape) or
                        orig(t, *a, **k))
    fiamma.addmm(bias, xin, w.t()).backward(fiamma.tensor(gy, dtype=fiamma.float64))
    monkeypatch.undo()
    assert clones == []  # both gradients are kept as computed, not copied
    assert w.grad.is_contiguous() and bias.grad.is_contiguous()
    np.testing.assert_allclose(w.grad.numpy(), gy.T @ xin.numpy(), rtol=1e-10)
    np.testing.assert_allclose(bias.grad.numpy(), gy.sum(0), rtol=1e-10)
    w.grad.zero_()
    assert float(bias.grad.abs().sum()) > 0


def test_broadcasting_is_reduced_to_input_shape():
    x = leaf([[1.0], [2.0]])          # (2, 1)
    y = leaf([10.0, 20.0, 30.0])      # (3,)
    s = leaf(2.0)                     # 0-d
    ((x + y) * s).sum().backward()
    assert x.grad.shape == (2, 1) and x.grad.tolist() == [[6.0], [6.0]]
    assert y.grad.shape == (3,) and y.grad.tolist() == [4.0, 4.0, 4.0]
    assert s.grad.shape == () and s.grad.item() == pytest.approx(3 * 3 + 60 * 2)


def test_dtype_of_gradient_follows_input():
    x = leaf([1.0, 2.0], dtype=fiamma.float32)
    y = leaf([1.0, 2.0], dtype=fiamma.float64)
    (x * y).sum().backward()
    assert x.grad.dtype is fiamma.float32 and y.grad.dtype is fiamma.float64
    assert x.grad.tolist() == [1.0, 2.0]


def test_scalar_operands_and_reflected_ops():
    x = leaf([1.0, 2.0])
    (2.0 * x + 1 + x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 5.0]


def test_implicit_gradient_needs_scalar_and_shape_check():
    x = leaf([1.0, 2.0])
    y = x * 2
    with pytest.raises(RuntimeError, match="implicitly created only for scalar outputs"):
        y.backward()
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        y.backward(fiamma.ones(3))
    with pytest.raises(RuntimeError, match="does not require grad"):
        fiamma.ones(2).sum().backward()


def test_integer_and_bool_results_get_no_node():
    x = leaf([1.0, -2.0])
    assert (x > 0).grad_fn is None and not (x > 0).requires_grad
    assert x.argmax().grad_fn is None


def test_missing_formula_error_names_the_op():
    # an op that core never declared is refused when it is first recorded
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="recorded the op 'frobnicate_undeclared', which"):
        A._E.record("frobnicate_undeclared", fiamma.ones(2), (x,), {})
    # a declared op without a derivative (as the non-differentiable ones) fails at backward
    declare_op("frobnicate", differentiable=False)
    out = fiamma.ones(2)
    A._E.record("frobnicate", out, (x,), {})
    assert out.grad_fn.name() == "FrobnicateBackward0"
    with pytest.raises(RuntimeError, match="derivative for frobnicate is not implemented"):
        out.sum().backward()


def test_requires_grad_rules():
    x = fiamma.ones(2)
    assert x.requires_grad_() is x and x.requires_grad
    y = x * 2
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="floating point"):
        fiamma.ones(2, dtype=fiamma.int64).requires_grad_()
    d = y.detach()
    assert d.grad_fn is None and not d.requires_grad and d.is_leaf
    y.detach_()
    assert y.grad_fn is None and not y.requires_grad


def test_no_grad_and_set_grad_enabled():
    x = leaf([1.0])
    with A.no_grad():
        assert (x * 2).grad_fn is None
        with A.enable_grad():
            assert (x * 2).grad_fn is not None
    A.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        A.set_grad_enabled(True)

    @A.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad
    with A.inference_mode():
        assert not (x * 2).requires_grad


def test_grad_mode_is_thread_local():
    x = leaf([1.0])
    seen = {}

    def worker():
        seen["thread"] = (x * 2).requires_grad

    with A.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        seen["main"] = (x * 2).requires_grad
    assert seen == {"thread": True, "main": False}


# ---- retain_graph / create_graph ----------------------------------------------------------------

def test_backward_twice_needs_retain_graph():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_graph_without_saved_tensors_can_run_twice():
    x = leaf([1.0, 2.0])
    y = (x + 1).sum()
    y.backward()
    y.backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_create_graph_double_backward():
    x = leaf([1.0, 2.0, 3.0], dtype=fiamma.float64)
    y = (x * x * x).sum()
    (g,) = A.grad(y, x, create_graph=True)
    assert g.tolist() == [3.0, 12.0, 27.0] and g.requires_grad
    (gg,) = A.grad(g.sum(), x)
    assert gg.tolist() == [6.0, 12.0, 18.0]


def test_create_graph_backward_populates_differentiable_grad():
    x = leaf([2.0], dtype=fiamma.float64)
    (x * x).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    g = x.grad
    x.grad = None
    g.sum().backward()
    assert x.grad.tolist() == [2.0]


# ---- autograd.grad / backward(inputs=) ----------------------------------------------------------

def test_grad_api():
    x = leaf([1.0, 2.0])
    y = leaf([3.0, 4.0])
    z = leaf([5.0])
    out = (x * y).sum()
    gx, gy = A.grad(out, (x, y), retain_graph=True)
    assert gx.tolist() == [3.0, 4.0] and gy.tolist() == [1.0, 2.0]
    assert x.grad is None and y.grad is None
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        A.grad(out, (x, z), retain_graph=True)
    gx, gz = A.grad(out, (x, z), retain_graph=True, allow_unused=True)
    assert gz is None
    gx, gz = A.grad(out, (x, z), retain_graph=True, materialize_grads=True)
    assert gz.tolist() == [0.0]
    with pytest.raises(RuntimeError, match="does not require grad"):
        A.grad(out, fiamma.ones(2))


def test_grad_wrt_intermediate_and_grad_outputs():
    x = leaf([1.0, 2.0])
    h = x * 3
    out = h * h
    (gh,) = A.grad(out, h, grad_outputs=fiamma.tensor([1.0, 0.5]), retain_graph=True)
    assert gh.tolist() == [6.0, 6.0]
    gx, gh = A.grad(out.sum(), (x, h))
    assert gx.tolist() == [18.0, 36.0] and gh.tolist() == [6.0, 12.0]


def test_backward_inputs_only_accumulates_there():
    x = leaf([1.0])
    y = leaf([2.0])
    (x * y).sum().backward(inputs=[x])
    assert x.grad.tolist() == [2.0] and y.grad is None
    h = x * 2
    (h * y).sum().backward(inputs=[h])
    assert h.grad.tolist() == [2.0] and x.grad.tolist() == [2.0]


# ---- hooks --------------------------------------------------------------------------------------

def test_tensor_hooks_on_leaf_and_nonleaf():
    x = leaf([1.0, 2.0])
    calls = []
    h1 = x.register_hook(lambda g: calls.append(("x", g.tolist())))
    h2 = x.register_hook(lambda g: g * 10)
    y = x * 2
    y.register_hook(lambda g: calls.append(("y", g.tolist())))
    y.register_hook(lambda g: g + 1)
    y.sum().backward()
    assert calls == [("y", [1.0, 1.0]), ("x", [4.0, 4.0])]
    assert x.grad.tolist() == [40.0, 40.0]
    h1.remove()
    h2.remove()
    calls.clear()
    x.grad = None
    (x * 1).sum().backward()
    assert calls == [] and x.grad.tolist() == [1.0, 1.0]


def test_hook_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        fiamma.ones(2).register_hook(lambda g: g)


def test_retain_grad():
    x = leaf([1.0, 2.0])
    y = x * 3
    y.retain_grad()
    assert y.retains_grad and not x.retains_grad
    z = y * y
    z.sum().backward()
    assert y.grad.tolist() == [6.0, 12.0]
    with pytest.warns(UserWarning, match="not a leaf Tensor"):  # as PyTorch
        assert z.grad is None


def test_retain_grad_follows_in_place_ops_to_the_latest_value():
    # PyTorch moves retain_grad to the tensor's newest version: .grad is the gradient of what
    # the tensor holds at the end (a forward hook retaining a BatchNorm output that an
    # in-place ReLU then overwrites sees the ReLU output's gradient, not the masked one)
    x = fiamma.tensor([-1.0, 2.0, -3.0, 4.0], requires_grad=True)
    w = fiamma.tensor([1.0, 2.0, 3.0, 4.0])
    y = x * 1
    y.retain_grad()
    y.relu_()
    (y * w).sum().backward()
    assert y.grad.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert x.grad.tolist() == [0.0, 2.0, 0.0, 4.0]
    # several in-place ops; the gradient is stored once, not once per version
    y = x * 1
    y.retain_grad()
    y.mul_(2)
    y.add_(1)
    (y * w).sum().backward()
    assert y.grad.tolist() == [1.0, 2.0, 3.0, 4.0]
    # the base of a view written in place keeps retaining; the view itself, as in PyTorch,
    # loses it when its base changes afterwards
    y = x * 1
    v = y[:2]
    v.retain_grad()
    y.retain_grad()
    v.mul_(3)
    y.relu_()
    (y * w).sum().backward()
    assert y.grad.tolist() == [1.0, 2.0, 3.0, 4.0] and v.grad is None
    assert y.retains_grad


def test_post_accumulate_grad_hook():
    x = leaf([1.0, 2.0])
    seen = []
    h = x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (x * 2).sum().backward()
    (x * 2).sum().backward()
    assert seen == [[2.0, 2.0], [4.0, 4.0]]
    h.remove()
    (x * 2).sum().backward()
    assert len(seen) == 2
    with pytest.raises(RuntimeError, match="non-leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_node_hooks_and_metadata():
    x = leaf([1.0, 2.0])
    y = x * 2
    seen = []
    y.grad_fn.register_prehook(lambda gout: seen.append(("pre", gout[0].tolist())))
    h = y.grad_fn.register_hook(lambda gin, gout: seen.append(("post", gin[0].tolist())))
    y.grad_fn.metadata["k"] = 1
    y.sum().backward()
    assert seen == [("pre", [1.0, 1.0]), ("post", [2.0, 2.0])]
    assert y.grad_fn.metadata == {"k": 1}
    h.remove()


# ---- Function -----------------------------------------------------------------------------------

class Cube(Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * x * x * k

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        assert ctx.needs_input_grad == (True, False)
        return grad * x * x * (3 * ctx.k), None


def test_function_basic():
    x = leaf([1.0, 2.0], dtype=fiamma.float64)
    y = Cube.apply(x, 2.0)
    assert y.grad_fn.name() == "CubeBackward"
    y.sum().backward()
    assert x.grad.tolist() == [6.0, 24.0]
    assert A.gradcheck(lambda t: Cube.apply(t, 1.5), (x,))


def test_function_without_grad_returns_plain_output():
    x = fiamma.tensor([1.0, 2.0])
    y = Cube.apply(x, 1.0)
    assert y.grad_fn is None and not y.requires_grad


def test_function_setup_context_style_and_saved_output():
    class Exp2(Function):
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0], output)

        @staticmethod
        def backward(ctx, grad):
            x, out = ctx.saved_tensors
            return grad * 2 * x

    x = leaf([3.0])
    y = Exp2.apply(x)
    y.sum().backward()
    assert x.grad.tolist() == [6.0]
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.grad_fn.saved_tensors


def test_function_mark_dirty():
    class AddOneInplace(Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 1

    x = leaf([1.0, 2.0])
    y = x * 2
    z = AddOneInplace.apply(y)
    assert z is y and y.grad_fn.name() == "AddOneInplaceBackward"
    (y * y).sum().backward()
    assert x.grad.tolist() == [12.0, 20.0]
    with pytest.raises(RuntimeError, match="leaf Variable"):
        AddOneInplace.apply(x)


def test_function_non_differentiable_and_materialize():
    class Split(Function):
        @staticmethod
        def forward(ctx, x):
            idx = (x > 0).to(fiamma.float32)
            ctx.mark_non_differentiable(idx)
            return x * 2, idx, x * 3

        @staticmethod
        def backward(ctx, ga, gidx, gb):
            assert gidx is not None and gb is not None  # materialized
            return ga * 2 + gb * 3

    x = leaf([1.0, -1.0])
    a, idx, b = Split.apply(x)
    assert not idx.requires_grad and a.requires_grad and b.requires_grad
    a.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]

    class NoMat(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 1, x * 1

        @staticmethod
        def backward(ctx, g1, g2):
            assert g2 is None
            return g1

    x.grad = None
    p, q = NoMat.apply(x)
    p.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_once_differentiable():
    class Sq(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @A.once_differentiable
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2 * x

    x = leaf([3.0])
    (g,) = A.grad(Sq.apply(x), x, create_graph=True)
    assert g.tolist() == [6.0] and not g.requires_grad


# ---- in-place ops and version counters ----------------------------------------------------------

def test_modified_saved_tensor_raises_with_versions():
    x = leaf([1.0, 2.0])
    a = x * 1
    b = a * a
    a.add_(1)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation: .*output 0 of "
                                           r"AddBackward0.*is at version 1; expected version 0"):
        b.sum().backward()


def test_inplace_on_leaf_requiring_grad_raises():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in "
                                           "an in-place operation"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        x += 1
    with A.no_grad():
        x.add_(1)  # allowed without grad mode
    assert x.tolist() == [2.0, 3.0]


def test_inplace_on_view_of_leaf_raises():
    x = leaf([1.0, 2.0, 3.0])
    v = x[0:2]
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        v.mul_(2)


def test_inplace_gradients():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.add_(1)
    y.mul_(y)          # y = (2x + 1)^2, the formula saw the old y
    assert y.grad_fn.name() == "MulBackward0"
    y.sum().backward()
    assert x.grad.tolist() == [12.0, 20.0]   # 4 (2x + 1)


def test_inplace_with_grad_flowing_into_tensor_without_grad():
    w = leaf([2.0, 3.0])
    buf = fiamma.zeros(2)
    buf.add_(w)
    buf.mul_(w)
    assert buf.requires_grad and buf.grad_fn is not None
    buf.sum().backward()
    assert w.grad.tolist() == [4.0, 6.0]


def test_inplace_on_view_rewrites_base_history():
    x = leaf([1.0, 2.0, 3.0, 4.0])
    base = x * 1
    v = base[1:3]
    v.mul_(10)
    assert base.grad_fn.name() == "CopySlices"
    assert base.tolist() == [1.0, 20.0, 30.0, 4.0]
    (base * base).sum().backward()
    assert x.grad.tolist() == [2.0, 400.0, 600.0, 8.0]


def test_copy_into_view_of_base():
    w = leaf([5.0, 6.0])
    x = leaf([1.0, 1.0, 1.0])
    base = x * 1
    base[0:2].copy_(w * 2)
    (base * fiamma.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert w.grad.tolist() == [2.0, 4.0]
    assert x.grad.tolist() == [0.0, 0.0, 3.0]


def test_integer_inplace_into_float_result_raises():
    w = leaf([1.5])
    t = fiamma.tensor([1])
    with pytest.raises(RuntimeError, match="can't be cast"):
        t.add_(w)


# ---- anomaly mode -------------------------------------------------------------------------------

def test_detect_anomaly_names_forward_op():
    a = leaf([1.0])
    b = leaf([float("inf")])
    with pytest.warns(UserWarning, match="Anomaly Detection"):
        with A.detect_anomaly():
            assert A.is_anomaly_enabled()
            out = (a * b) * 0.0
            with pytest.raises(RuntimeError, match=r"MulBackward0' returned nan values.*'mul'"
                               ) as info:
                out.sum().backward()
    assert "test_engine.py" in str(info.value)  # the forward traceback
    assert not A.is_anomaly_enabled()


# ---- memory: graphs are freed -------------------------------------------------------------------

def test_graph_freed_when_outputs_die():
    gc.disable()
    try:
        x = leaf([1.0, 2.0])
        y = x * x
        z = y * 2
        refs = [weakref.ref(z.grad_fn), weakref.ref(y.grad_fn)]
        del y, z
        assert all(r() is None for r in refs)
    finally:
        gc.enable()


def test_saved_tensors_freed_after_backward():
    gc.disable()
    try:
        x = leaf([1.0, 2.0])
        h = x * 3
        out = (h * h).sum()
        ref = weakref.ref(h)
        del h
        assert ref() is not None  # kept alive by the MulBackward0 that saved it
        out.backward()
        assert ref() is None
    finally:
        gc.enable()


def test_saved_output_makes_no_cycle():
    class Id(Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 1
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g

    gc.disable()
    try:
        x = leaf([1.0])
        y = Id.apply(x)
        ref = weakref.ref(y.grad_fn)
        del y
        assert ref() is None
    finally:
        gc.enable()


def test_memory_flat_over_training_like_iterations():
    import tracemalloc

    w = leaf([0.5] * 64)
    b = leaf([0.1] * 64)
    data = fiamma.ones(8, 64)

    def step():
        loss = ((data * w + b) * (data * w + b)).sum()
        loss.backward()
        with A.no_grad():
            w.sub_(w.grad * 1e-3)
            b.sub_(b.grad * 1e-3)
        w.grad = None
        b.grad = None

    for _ in range(50):
        step()
    gc.collect()
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    for _ in range(1000):
        step()
    gc.collect()
    end = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert end - start < 64 * 1024
    if hasattr(fiamma, "cpu_memory_stats"):
        before = fiamma.cpu_memory_stats()
        for _ in range(200):
            step()
        after = fiamma.cpu_memory_stats()
        key = next((k for k in ("in_use", "allocated_bytes", "bytes_in_use") if k in before), None)
        if key is not None:
            assert after[key] - before[key] < 1 << 20


def test_other_views_see_inplace_changes_of_base():
    x = leaf([1.0, 2.0, 3.0])
    base = x * 1
    v = base[0:2]
    base.mul_(3)                 # v now holds 3 * x[0:2]
    (v * 1).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 0.0]


def test_inplace_on_transposed_view_of_non_contiguous_base():
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    base = (x * 1).t()           # a non-contiguous view of the root x * 1
    row = base[0]                # column 0 of x * 1
    row.mul_(2)
    (base * base).sum().backward()
    assert x.grad.tolist() == [[8.0, 4.0], [24.0, 8.0]]


def test_double_backward_through_copyslices():
    x = leaf([1.0, 2.0], dtype=fiamma.float64)
    base = x * 1
    v = base[0:1]
    v.mul_(3)
    y = (base * base).sum()
    (g,) = A.grad(y, x, create_graph=True)
    assert g.tolist() == [18.0, 4.0]
    (gg,) = A.grad(g.sum(), x)
    assert gg.tolist() == [18.0, 2.0]


def test_requires_grad_slot_set_before_autograd_import():
    import subprocess
    import sys

    code = ("import sys, fiamma\n"
            "x = fiamma.ones(3)\n"
            "x.requires_grad = True\n"
            "assert 'fiamma.autograd' not in sys.modules\n"
            "(x * 2).sum().backward()\n"
            "print(x.grad.tolist())\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[2.0, 2.0, 2.0]"


def test_leaf_hooks_apply_to_autograd_grad():
    x = leaf([1.0, 2.0])
    x.register_hook(lambda g: g * 2)
    (g,) = A.grad((x * 3).sum(), x)
    assert g.tolist() == [6.0, 6.0] and x.grad is None


# ---- the formula registry contract ---------------------------------------------------------------

def test_registry_contract_tuple_outputs_and_saved_output():
    from fiamma.autograd._formulas import derivative, lookup, registered

    seen = {}

    # an op recorded by another distribution: declared in core's table, then given a formula
    @derivative(declare_op("test_split2"), save="both")
    def _split2(ctx, grad):
        ga, gb = grad
        seen["grad"] = (ga is None, gb is None)
        seen["op"] = ctx.op
        seen["kwargs"] = ctx.kwargs
        seen["shapes"] = ctx.input_shapes
        seen["dtypes"] = ctx.input_dtypes
        seen["needs"] = ctx.needs_input_grad
        out_a, out_b = ctx.output
        seen["out"] = (out_a.tolist(), out_b.tolist())
        x, k = ctx.inputs
        return (ga * k if ga is not None else gb * (k + 1)), None

    assert "test_split2" in registered() and lookup("test_split2")[1] == "both"
    x = leaf([1.0, 2.0])
    with A.no_grad():
        a, b = x * 2, x * 3
    A._E.record("test_split2", (a, b), (x, 2.0), {"flag": True})
    assert a.grad_fn is b.grad_fn and a.grad_fn.name() == "TestSplit2Backward0"
    b.sum().backward()
    assert seen["grad"] == (True, False)
    assert seen["op"] == "test_split2" and seen["kwargs"] == {"flag": True}
    assert seen["shapes"] == ((2,), None) and seen["dtypes"] == (fiamma.float32, None)
    assert seen["needs"] == (True, False)
    assert seen["out"] == ([2.0, 4.0], [3.0, 6.0])
    assert x.grad.tolist() == [3.0, 3.0]


def test_registry_rejects_bad_arguments():
    from fiamma.autograd._formulas import derivative, sum_to_shape

    with pytest.raises(ValueError, match="save must be one of"):
        derivative(ops.mul, save="everything")
    with pytest.raises(TypeError):
        derivative()
    g = fiamma.ones(2, 3, 4)
    assert sum_to_shape(g, (3, 1)).tolist() == [[8.0], [8.0], [8.0]]
    assert sum_to_shape(g, ()).item() == 24.0


def test_function_double_backward_and_identity_output():
    class Sq(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2 * x

    x = leaf([3.0], dtype=fiamma.float64)
    (g,) = A.grad(Sq.apply(x).sum(), x, create_graph=True)
    assert g.tolist() == [6.0] and g.requires_grad
    (gg,) = A.grad(g.sum(), x)
    assert gg.tolist() == [2.0]

    class Ident(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 5

    y = Ident.apply(x)
    assert y is not x and y.grad_fn.name() == "IdentBackward" and x.is_leaf
    x.grad = None
    y.sum().backward()
    assert x.grad.tolist() == [5.0]


def test_function_version_check_on_saved_input():
    class Sq(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2 * x

    x = leaf([3.0])
    h = x * 1
    y = Sq.apply(h)
    h.add_(1)
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0"):
        y.sum().backward()


def test_saved_tensors_hooks():
    from fiamma.autograd.graph import saved_tensors_hooks

    packed, unpacked = [], []

    def pack(t):
        packed.append(tuple(t.shape))
        return ("box", t.clone())

    def unpack(p):
        unpacked.append(p[0])
        return p[1]

    x = leaf([1.0, 2.0])
    with saved_tensors_hooks(pack, unpack):
        y = (x * x).sum()
        z = (x + 1).sum()          # add saves nothing: not packed
    assert packed == [(2,), (2,)]
    y.backward()
    z.backward()
    assert unpacked == ["box", "box"] and x.grad.tolist() == [3.0, 5.0]
    assert (x * x).grad_fn._versions is not None  # outside the context: saved as usual


def test_saved_tensors_hooks_cover_saved_outputs():
    """exp saves its output, max(dim) saves (values, indices): those go through the hooks too,
    so an output modified in place after the forward does not matter once packed."""
    from fiamma.autograd.graph import saved_tensors_hooks

    packed = []

    def pack(t):
        packed.append(tuple(t.shape))
        return t.clone()

    x = leaf([0.5, 1.0, 2.0])
    with saved_tensors_hooks(pack, lambda t: t):
        y = x.exp()
    assert packed == [(3,)]
    assert y.grad_fn._out is not None and y.grad_fn._versions is None
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, 1.0, 2.0]), rtol=1e-6)
    # without hooks the same in-place change is caught by the version check
    x.grad = None
    y = x.exp()
    with fiamma.no_grad():
        y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    x.grad = None
    with saved_tensors_hooks(pack, lambda t: t):
        y = x.exp()
    with fiamma.no_grad():
        y.mul_(2)               # the packed clone is what backward uses
    y.sum().backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, 1.0, 2.0]), rtol=1e-6)
    y.grad_fn._release()
    with pytest.raises(RuntimeError, match="retain_graph"):
        y.grad_fn.output


def test_fill_and_zero_cut_the_history():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.zero_()
    z = x * 1
    z.fill_(fiamma.tensor(3.0) * x.sum())
    (y + z).sum().backward()        # y no longer depends on x; z = 3 * sum(x) twice
    assert x.grad.tolist() == [6.0, 6.0]
    with pytest.raises(RuntimeError, match="leaf Variable"):
        x.zero_()


def test_grad_is_never_shared_with_tensors_the_user_holds():
    x = leaf([1.0, 2.0])
    kept = []

    def hook(g):
        kept.append(g * 1)
        return kept[-1]

    x.register_hook(hook)
    (x * 2).sum().backward()
    x.grad.add_(100)
    assert kept[0].tolist() == [2.0, 2.0] and x.grad.tolist() == [102.0, 102.0]
    y = leaf([1.0, 2.0])
    h = y * 1
    h.retain_grad()
    (h * 3).sum().backward()
    y.grad.add_(1)
    assert h.grad.tolist() == [3.0, 3.0] and y.grad.tolist() == [4.0, 4.0]


def test_hook_runs_once_when_intermediate_is_captured_and_passed_through():
    x = leaf([1.0, 2.0])
    h = x * 2
    calls = []
    h.register_hook(lambda g: calls.append(1) or g * 10)
    out = (h * 1).sum()
    gh, gx = A.grad(out, (h, x))
    assert calls == [1]
    assert gh.tolist() == [10.0, 10.0] and gx.tolist() == [20.0, 20.0]


def test_inplace_on_view_of_tensor_without_grad_gives_base_a_history():
    w = leaf([5.0, 6.0])
    out = fiamma.zeros(2, 3)
    out[0][1:].copy_(w)            # a view of a view of a tensor that needs no grad
    out[1].fill_(w.sum())
    assert out.requires_grad and out.grad_fn.name() == "CopySlices"
    (out * fiamma.tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])).sum().backward()
    assert out.tolist() == [[0.0, 5.0, 6.0], [11.0, 11.0, 11.0]]
    assert w.grad.tolist() == [5.0, 6.0]


def test_anomaly_mode_shows_forward_trace_of_failing_node():
    x = leaf([1.0, 2.0])
    with pytest.warns(UserWarning):
        with A.detect_anomaly():
            out = fiamma.ones(2)
            declare_op("frobnicate", differentiable=False)
            A._E.record("frobnicate", out, (x,), {})
            with pytest.warns(UserWarning, match="Error detected in FrobnicateBackward0"):
                with pytest.raises(RuntimeError, match="not implemented"):
                    out.sum().backward()


def test_backward_in_threads_on_separate_graphs():
    results = {}

    def worker(k):
        x = leaf([float(k)] * 4)
        for _ in range(50):
            y = (x * x * k + x).sum()
            y.backward()
        results[k] = x.grad.tolist()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(1, 5):
        assert results[k] == [50.0 * (2 * k * k + 1)] * 4


_INPLACE_WRITERS = [
    ("copy_", lambda x: x.copy_(fiamma.zeros(3))),
    ("setitem", lambda x: x.__setitem__(0, 5.0)),
    ("fill_", lambda x: x.fill_(7.0)),
    ("fill_", lambda x: x.zero_()),
    ("add_", lambda x: x.add_(1)),
    ("masked_fill_", lambda x: x.masked_fill_(fiamma.tensor([True, False, True]), 9.0)),
    ("index_fill_", lambda x: x.index_fill_(0, fiamma.tensor([0]), 9.0)),
    ("setitem", lambda x: x[1:].__setitem__(0, 5.0)),
    ("uniform_", lambda x: x.uniform_()),
    ("normal_", lambda x: x.normal_()),
    ("bernoulli_", lambda x: x.bernoulli_()),
    ("random_", lambda x: x.random_(0, 5)),
    ("exponential_", lambda x: x.exponential_()),
    ("scatter_", lambda x: x.scatter_(0, fiamma.tensor([0]), fiamma.tensor([9.0]))),
    ("scatter_add_", lambda x: x.scatter_add_(0, fiamma.tensor([0]), fiamma.tensor([9.0]))),
    ("index_put_", lambda x: x.index_put_((fiamma.tensor([0]),), fiamma.tensor(3.0))),
    ("tril_", lambda x: x.view(1, 3).tril_()),
    ("put_", lambda x: x.put_(fiamma.tensor([0]), fiamma.tensor([9.0]))),
    ("addmv_", lambda x: x.addmv_(fiamma.ones(3, 2), fiamma.ones(2))),
]


@pytest.mark.parametrize("op,write", _INPLACE_WRITERS)
def test_inplace_on_leaf_refused_before_writing(op, write):
    """PyTorch's leaf error is raised before the write: the tensor keeps its values."""
    x = fiamma.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=f"{op}: a (view of a )?leaf Variable that requires "
                                           "grad is being used in an in-place operation"):
        write(x)
    assert x.tolist() == [1.0, 2.0, 3.0] and x.grad_fn is None
    with fiamma.no_grad():  # allowed there (initialisers, optimizers)
        write(x)
    assert x.requires_grad and x.grad_fn is None


def test_hooks_registered_after_recording_leave_the_inline_step():
    # execute runs plain one-output nodes inline; a hook of any kind registered on a node
    # after it was recorded must send it through Node._apply
    x = fiamma.ones(3, requires_grad=True)
    y = fiamma.ones(3, requires_grad=True)
    z = x + y
    w = z * 2.0
    seen = []
    z.grad_fn.register_hook(lambda gi, go: seen.append("post"))
    w.grad_fn.register_prehook(lambda go: seen.append("pre"))
    z.register_hook(lambda g: seen.append("tensor") or g * 3)
    z.retain_grad()
    w.sum().backward()
    assert sorted(seen) == ["post", "pre", "tensor"]
    np.testing.assert_array_equal(z.grad.numpy(), np.full(3, 6.0))
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 6.0))
    np.testing.assert_array_equal(y.grad.numpy(), np.full(3, 6.0))


def test_top_level_anomaly_switches_share_detect_anomalys_state():
    """fiamma.is_anomaly_enabled / is_anomaly_check_nan_enabled / set_anomaly_enabled (torch's
    top-level names) read and write the state detect_anomaly uses."""
    assert fiamma.is_anomaly_enabled() is False and fiamma.is_anomaly_check_nan_enabled()
    try:
        fiamma.set_anomaly_enabled(True, check_nan=False)
        assert fiamma.autograd.is_anomaly_enabled() is True
        assert fiamma.is_anomaly_check_nan_enabled() is False
        # check_nan off: a NaN gradient passes through without an error
        x = fiamma.tensor([-1.0], requires_grad=True)
        x.sqrt().sum().backward()
        fiamma.set_anomaly_enabled(True)
        y = fiamma.tensor([-1.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="nan"):
            y.sqrt().sum().backward()
    finally:
        fiamma.set_anomaly_enabled(False)
    assert fiamma.is_anomaly_enabled() is False and fiamma.is_anomaly_check_nan_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with fiamma.autograd.detect_anomaly(check_nan=False):
            assert fiamma.is_anomaly_enabled() and not fiamma.is_anomaly_check_nan_enabled()
    assert not fiamma.is_anomaly_enabled()
    with pytest.raises(TypeError, match="set_anomaly_enabled"):
        fiamma.set_anomaly_enabled(1)
