"""PyTorch's __torch_function__ protocol: subclasses, tensor-likes, modes, the overrides API."""

import functools
import pickle

import pytest

import fiamma
import fiamma.overrides as overrides
from fiamma import _torch_c, _torch_function as TF


class Sub(fiamma.Tensor):
    pass


class Logging(fiamma.Tensor):
    log = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        Logging.log.append(func.__name__)
        return super().__torch_function__(func, types, args, kwargs)


def sub(*shape):
    return fiamma.ones(*shape).as_subclass(Sub)


# ---- the default handler keeps the subclass ----------------------------------------------------

def test_results_keep_the_subclass():
    x = sub(2, 3)
    y = fiamma.ones(3)
    for r in (x + 1, 1 + x, 2 - x, x * y, y * x, y + x, x @ fiamma.ones(3), x[0], x.T, x.sum(0),
              x.reshape(6), fiamma.add(x, 1), fiamma.cat([x, x]), x.data, abs(x), -x):
        assert type(r) is Sub, r
    assert type(x.shape) is fiamma.Size and type(x.dtype) is fiamma.dtype
    parts = fiamma.split(x, 1)
    assert type(parts) is tuple and all(type(p) is Sub for p in parts)
    mx = x.max(1)
    assert type(mx).__name__ == "max" and type(mx.values) is Sub and type(mx.indices) is Sub
    assert x.tolist() == [[1.0] * 3] * 2 and float(x.sum()) == 6.0 and len(x) == 2
    # PyTorch 2.13 dispatches the new_* constructors too
    assert type(x.new_zeros(2)) is Sub and type(x.new_tensor([1.0])) is Sub


def test_in_place_returns_the_same_object():
    x = sub(2)
    assert x.add_(1) is x and type(x) is Sub and x.tolist() == [2.0, 2.0]
    x += 1
    assert type(x) is Sub and x.tolist() == [3.0, 3.0]


def test_repr_shows_the_class_name():
    assert repr(sub(2)).startswith("Sub([1., 1.]")
    assert repr(fiamma.ones(2)).startswith("tensor(")


def test_handler_sees_public_functions_and_methods():
    Logging.log.clear()
    x = fiamma.ones(2, 3).as_subclass(Logging)
    y = (x + 1) * 2
    z = y.sum(0)
    w = fiamma.cat([x, y])
    x[0]
    assert Logging.log == ["add", "mul", "sum", "cat", "__getitem__"]
    assert all(type(t) is Logging for t in (y, z, w))


def test_handled_functions_dict_and_not_implemented():
    handled = {}

    class Diag(fiamma.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func in handled:
                return handled[func](*args, **(kwargs or {}))
            return NotImplemented

    handled[fiamma.mean] = lambda x: "mean!"
    handled[fiamma.Tensor.__getitem__] = lambda x, i: ("item", i)
    d = fiamma.ones(3).as_subclass(Diag)
    assert fiamma.mean(d) == "mean!"
    assert d[1] == ("item", 1)
    with pytest.raises(TypeError, match="Multiple dispatch failed for 'torch.sum'"):
        fiamma.sum(d)
    with pytest.raises(TypeError, match="unsupported operand"):
        d - 1  # an operator: NotImplemented everywhere is Python's TypeError


def test_a_tensor_like_class_is_dispatched():
    handled = {}

    class Scalar:
        def __init__(self, n, value):
            self.n, self.value = n, value

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func not in handled or not all(issubclass(t, (fiamma.Tensor, Scalar))
                                              for t in types):
                return NotImplemented
            return handled[func](*args, **(kwargs or {}))

    def implements(fn):
        def deco(f):
            functools.update_wrapper(f, fn)
            handled[fn] = f
            return f
        return deco

    @implements(fiamma.mean)
    def mean(s):
        return s.value / s.n

    @implements(fiamma.add)
    def add(a, b):
        a = a.value * fiamma.eye(a.n) if isinstance(a, Scalar) else a
        b = b.value * fiamma.eye(b.n) if isinstance(b, Scalar) else b
        return fiamma.add(a, b)

    s = Scalar(2, 3.0)
    overrides.enable_torch_function()  # (python -m fiamma.run sees the class statement)
    assert fiamma.mean(s) == 1.5
    assert fiamma.add(s, fiamma.ones(2, 2)).tolist() == [[4.0, 1.0], [1.0, 4.0]]
    with pytest.raises(TypeError, match="torch.sum"):
        fiamma.sum(s)


def test_nn_functional_dispatches():
    F = pytest.importorskip("fiamma.nn.functional")
    Logging.log.clear()
    x = fiamma.ones(2, 3).as_subclass(Logging)
    out = F.linear(x, fiamma.ones(4, 3))
    assert type(out) is Logging and Logging.log == ["linear"]
    assert type(F.relu(x)) is Logging


def test_disable_subclass_dispatch():
    x = sub(2)
    with _torch_c.module.DisableTorchFunctionSubclass():
        assert type(x + 1) is fiamma.Tensor
        assert not _torch_c.module._is_torch_function_enabled()
    assert type(x + 1) is Sub
    with _torch_c.module.DisableTorchFunction():
        assert type(fiamma.add(x, 1)) is fiamma.Tensor


def test_subclass_overriding_a_method_keeps_it():
    class Own(fiamma.Tensor):
        def sum(self, *args, **kwargs):
            return "own sum"

    x = fiamma.ones(2).as_subclass(Own)
    assert x.sum() == "own sum" and type(x + 1) is Own


def test_subclass_of_subclass_and_mixed_types():
    class Child(Sub):
        pass

    c = fiamma.ones(2).as_subclass(Child)
    assert type(c + sub(2)) is Child and type(sub(2) + c) is Child


def test_make_subclass_and_as_subclass():
    t = fiamma.Tensor._make_subclass(Sub, fiamma.ones(2), False)
    assert type(t) is Sub and not t.requires_grad
    with pytest.raises(TypeError, match="_make_subclass"):
        fiamma.Tensor._make_subclass(int, fiamma.ones(2))


# ---- modes ---------------------------------------------------------------------------------------

class Recorder(overrides.TorchFunctionMode):
    def __init__(self, tag, log):
        super().__init__()
        self.tag, self.log = tag, log

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.log.append((self.tag, func.__name__))
        return func(*args, **(kwargs or {}))


def test_mode_sees_functions_methods_and_operators():
    log = []
    a = fiamma.ones(2)
    with Recorder("m", log):
        b = a + 1
        c = a.mul(2)
        d = fiamma.zeros(2)
        e = a[0]
        fiamma.tensor([1.0, 2.0])  # a data function: modes see it, its list is not scanned
    assert [n for _, n in log] == ["add", "mul", "zeros", "__getitem__", "tensor"]
    assert b.tolist() == [2.0, 2.0] and c.tolist() == [2.0, 2.0] and d.tolist() == [0.0, 0.0]
    assert e.item() == 1.0
    log.clear()
    a + 1  # outside: nothing recorded
    assert log == []


def test_modes_nest_innermost_first_and_are_popped_inside():
    log = []
    with Recorder("outer", log):
        with Recorder("inner", log):
            fiamma.add(fiamma.ones(1), 1)
    assert log == [("inner", "ones"), ("outer", "ones"), ("inner", "add"), ("outer", "add")]


def test_mode_can_replace_results_and_not_implemented_raises():
    class Zeroing(overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is fiamma.add:
                return "replaced"
            return func(*args, **(kwargs or {}))

    with Zeroing():
        assert fiamma.add(fiamma.ones(1), 1) == "replaced"

    class Refuse(overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return NotImplemented

    x = fiamma.ones(1)
    with pytest.raises(TypeError, match="all __torch_function__ handlers returned"):
        with Refuse():
            fiamma.neg(x)


def test_mode_sees_subclass_types_and_subclass_handler_runs_after():
    log = []
    Logging.log.clear()
    x = fiamma.ones(2).as_subclass(Logging)
    with Recorder("m", log):
        y = x + 1
    assert log == [("m", "add")] and Logging.log == ["add"] and type(y) is Logging


def test_functions_are_restored_after_the_last_mode_exits():
    before = fiamma.neg.__code__
    with Recorder("m", []):
        assert fiamma.Tensor.neg.__code__ is not before or TF._active["sticky"]
    assert TF._active["modes"] == 0
    if not TF._active["sticky"]:
        assert fiamma.neg.__code__ is before


# ---- Parameter and autograd --------------------------------------------------------------------

def test_parameter_opts_out():
    nn = pytest.importorskip("fiamma.nn")
    p = nn.Parameter(fiamma.ones(2))
    assert nn.Parameter.__torch_function__ is _torch_c.module._disabled_torch_function_impl
    for r in (p * 2, p.detach(), p[0], p.data):
        assert type(r) is fiamma.Tensor

    class MyParam(nn.Parameter):
        pass

    assert type(MyParam(fiamma.ones(2)) + 1) is fiamma.Tensor
    assert repr(p).startswith("Parameter containing:\ntensor(")


def test_parameter_subclass_with_its_own_handler():
    nn = pytest.importorskip("fiamma.nn")
    seen = []

    class Tracked(nn.Parameter):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func.__name__)
            with _torch_c.module.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))

    t = Tracked(fiamma.ones(2))
    r = t * 3
    assert seen == ["mul"] and type(r) is fiamma.Tensor and r.tolist() == [3.0, 3.0]


def test_autograd_through_a_subclass():
    pytest.importorskip("fiamma.autograd")
    x = fiamma.tensor([1.0, 2.0], requires_grad=True)
    s = x.as_subclass(Sub)
    assert s.requires_grad and not s.is_leaf
    y = (s * s).sum()
    assert type(y) is Sub
    y.backward()
    assert x.grad.tolist() == [2.0, 4.0] and type(x.grad) is fiamma.Tensor


def test_pickle_of_a_subclass_instance_still_works():
    x = sub(2)
    y = pickle.loads(pickle.dumps(x))
    assert y.tolist() == [1.0, 1.0]


# ---- the overrides API ---------------------------------------------------------------------------

def test_has_and_handle_torch_function():
    x = sub(2)
    assert overrides.has_torch_function((x,)) and overrides.has_torch_function_unary(x)
    assert overrides.has_torch_function_variadic(fiamma.ones(1), x)
    assert not overrides.has_torch_function((fiamma.ones(1), 1.0))

    def my_op(a):
        if overrides.has_torch_function_unary(a):
            return overrides.handle_torch_function(my_op, (a,), a)
        return a * 10

    Logging.log.clear()
    lt = fiamma.ones(1).as_subclass(Logging)
    assert type(my_op(lt)) is Logging and Logging.log[0] == "my_op"
    with Recorder("m", []) as m:
        assert overrides.has_torch_function((fiamma.ones(1),))
        my_op(fiamma.ones(1))
    assert ("m", "my_op") in m.log


def test_wrap_torch_function():
    @overrides.wrap_torch_function(lambda a: (a,))
    def twice(a):
        return a * 2

    assert twice(fiamma.ones(1)).tolist() == [2.0]
    Logging.log.clear()
    assert type(twice(fiamma.ones(1).as_subclass(Logging))) is Logging
    assert Logging.log[0] == "twice"


def test_names_and_tables():
    assert overrides.resolve_name(fiamma.add) == "torch.add"
    assert overrides.resolve_name(fiamma.Tensor.__getitem__) == "torch.Tensor.__getitem__"
    assert overrides.is_tensor_method_or_property(fiamma.Tensor.reshape)
    assert overrides.is_tensor_method_or_property(fiamma.Tensor.shape.__get__)
    assert not overrides.is_tensor_method_or_property(len)
    ignored = overrides.get_ignored_functions()
    assert fiamma.is_tensor in ignored and fiamma.add not in ignored
    table = overrides.get_overridable_functions()
    assert fiamma.add in table[fiamma] and fiamma.Tensor.reshape in table[fiamma.Tensor]
    dummies = overrides.get_testing_overrides()
    assert dummies[fiamma.add](fiamma.ones(1), 1) == -1
    with overrides.enable_reentrant_dispatch():
        pass
    assert overrides.is_tensor_like(sub(1)) and not overrides.is_tensor_like([1])


def test_mode_stack_helpers():
    m = Recorder("m", [])
    assert overrides._get_current_function_mode() is None
    with m:
        assert overrides._get_current_function_mode() is m
        assert overrides._len_torch_function_stack() == 1
        with overrides._pop_mode_temporarily() as popped:
            assert popped is m and overrides._len_torch_function_stack() == 0
        assert _torch_c.module._is_torch_function_mode_enabled()
    assert not _torch_c.module._is_torch_function_mode_enabled()


def test_retargeted_functions_keep_name_signature_and_errors():
    import inspect

    overrides.enable_torch_function()
    assert fiamma.add.__name__ == "add"
    params = list(inspect.signature(fiamma.clamp).parameters)
    assert params[:3] == ["input", "min", "max"]
    with pytest.raises(TypeError):
        fiamma.reshape(fiamma.ones(2))  # a missing argument still fails as the function


def test_binary_operator_type_errors_let_python_try_the_other_operand():
    class Right:
        def __rmul__(self, other):
            return "Right.__rmul__"

    x = sub(2)
    assert x * Right() == "Right.__rmul__"
    with pytest.raises(TypeError, match="unsupported operand"):
        x + object()
