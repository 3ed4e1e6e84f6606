"""fiamma.library: custom_op, Library define/impl, fake implementations, gradient formulas,
schema parsing and inference, opcheck, fiamma.ops namespaces (and parity with PyTorch)."""

import itertools
import typing
from typing import Optional, Sequence

import numpy as np
import pytest

import fiamma
import fiamma.library as L
from fiamma.library import Library, custom_op, infer_schema, opcheck

T = fiamma.Tensor
_ids = itertools.count()


def _ns():
    """A fresh namespace per test (the registry is process-wide)."""
    return f"tlib{next(_ids)}"


@pytest.fixture
def lib():
    ns = _ns()
    library = Library(ns, "DEF")
    yield library
    library._destroy()


# ---- schemas ----------------------------------------------------------------------------------

def test_infer_schema_types_defaults_and_mutation():
    def many(a: T, b: Optional[T], c: list[T], d: int, e: float, f: bool, g: str,
             h: Sequence[int], i: Optional[int] = None, j: Sequence[float] = None,
             k: fiamma.dtype = fiamma.float32, m: typing.Union[int, float, bool] = 3,
             n: list[Optional[T]] = None, o: str = "hi", p: Optional[Sequence[int]] = None,
             q: bool = True, r: float = 1e-5, s: int = -2,
             t: Optional[T] = None) -> tuple[T, list[T], int, float, bool]:
        pass
    assert infer_schema(many, mutates_args={"a", "c"}) == (
        "(Tensor(a0!) a, Tensor? b, Tensor(a2!)[] c, SymInt d, float e, bool f, str g, "
        "SymInt[] h, SymInt? i=None, float[] j=None, ScalarType k=float32, Scalar m=3, "
        "Tensor?[] n=None, str o=\"hi\", SymInt[]? p=None, bool q=True, float r=1e-05, "
        "SymInt s=-2, Tensor? t=None) -> (Tensor, Tensor[], SymInt, float, bool)")

    def kw(a: T, *, s: float = 1.0) -> list[T]:
        pass
    assert infer_schema(kw, mutates_args={"a"}, op_name="zz") == \
        "zz(Tensor(a0!) a, *, float s=1.0) -> Tensor[]"
    assert infer_schema(kw, mutates_args="unknown") == "(Tensor(a0!) a, *, float s=1.0) -> Tensor[]"


@pytest.mark.parametrize("fn_src, match", [
    ("def f(x): pass", "Parameter x must have a type annotation"),
    ("def f(x: T): pass", "No return type annotation"),
    ("def f(*x: T) -> T: pass", "positional-only args, varargs"),
    ("def f(x: dict) -> T: pass", "Parameter x has unsupported type"),
    ("def f(x: T, n: int) -> T: pass", "only Tensors or collections of Tensors can be mutated"),
    ("def f(x: T, j: Sequence[float] = (1.0,)) -> T: pass", "unsupported default value type"),
    ("def f(x: T) -> dict: pass", "Return has unsupported type"),
])
def test_infer_schema_errors(fn_src, match):
    ns = {"T": T, "Sequence": Sequence}
    exec(fn_src, ns)
    mutates = {"n"} if "n: int" in fn_src else ()
    with pytest.raises(ValueError, match=match):
        infer_schema(ns["f"], mutates_args=mutates)


def test_parse_schema_round_trip_and_attributes():
    text = ('ns::bar.out(Tensor(a!) x, Tensor[] ys, Tensor? z, int[2] k=1, Scalar s=2, '
            'str mode="mean", *, float eps=1e-05) -> (Tensor(a!) x, Tensor b)')
    s = L.parse_schema(text)
    assert str(s) == text
    assert (s.name, s.overload_name, s.is_mutable) == ("ns::bar", "out", True)
    x, ys, z, k, sc, mode, eps = s.arguments
    assert x.alias_info.is_write and not ys.is_write
    assert (ys.type, z.type, k.type, k.default_value) == ("Tensor[]", "Tensor?", "int[]", [1, 1])
    assert (sc.default_value, mode.default_value, eps.kwarg_only) == (2, "mean", True)
    assert [r.name for r in s.returns] == ["x", "b"]
    assert str(L.parse_schema("f(Tensor x) -> ()")) == "f(Tensor x) -> ()"


@pytest.mark.parametrize("bad", ["bad(Tensor x -> Tensor", "bad(Tensor x)",
                                 "bad(Tensr x) -> Tensor", "bad(Tensor x, Tensor x) -> Tensor",
                                 "bad(Tensor) -> Tensor",
                                 "bad(int(a!) x) -> Tensor"])
def test_parse_schema_errors(bad):
    with pytest.raises(RuntimeError, match="schema"):
        L.parse_schema(bad)


# ---- custom_op --------------------------------------------------------------------------------

def test_custom_op_call_ops_namespace_and_overloads():
    ns = _ns()

    @custom_op(f"{ns}::foo", mutates_args=())
    def foo(x: T, n: int, scale: float = 2.0) -> T:
        return x * scale + n
    assert repr(foo) == f"<CustomOpDef({ns}::foo)>"
    assert foo._schema == "(Tensor x, SymInt n, float scale=2.0) -> Tensor"
    assert foo(fiamma.ones(2), 1).tolist() == [3.0, 3.0]
    packet = getattr(fiamma.ops, ns).foo
    assert packet.default is foo._opoverload and packet.overloads() == ["default"]
    assert packet(fiamma.ones(1), 1, scale=3.0).tolist() == [4.0]
    assert packet.default(fiamma.ones(1), n=0).tolist() == [2.0]
    assert str(packet.default._schema) == \
        f"{ns}::foo(Tensor x, SymInt n, float scale=2.0) -> Tensor"
    assert packet.default.name() == f"{ns}::foo" and packet.default.__name__ == "foo.default"
    assert repr(packet) == f"<OpOverloadPacket(op='{ns}.foo')>"
    assert repr(packet.default) == f"<OpOverload(op='{ns}.foo', overload='default')>"
    with pytest.raises(AttributeError, match="no operator 'nothere'"):
        getattr(fiamma.ops, ns).nothere  # noqa: B018
    with pytest.raises(AttributeError, match="no namespace"):
        fiamma.ops.no_such_namespace_xyz  # noqa: B018
    # also as a plain call, with a function
    bar = custom_op(f"{ns}::bar", lambda x: x + 1, mutates_args=(), schema="(Tensor x) -> Tensor")
    assert bar(fiamma.zeros(1)).tolist() == [1.0]


def test_custom_op_argument_checks():
    ns = _ns()

    @custom_op(f"{ns}::r2", mutates_args=())
    def r2(a: T) -> tuple[T, T]:
        return a + 1, a + 2
    with pytest.raises(RuntimeError, match=r"takes 1 positional argument\(s\) but 2"):
        r2(fiamma.ones(1), 3)
    with pytest.raises(RuntimeError, match="Unknown keyword argument 'b'"):
        r2(fiamma.ones(1), b=1)
    with pytest.raises(RuntimeError, match="Expected a value of type 'Tensor' for argument 'a'"):
        r2(2.0)
    with pytest.raises(RuntimeError, match="missing value for argument 'a'"):
        r2()
    assert [t.tolist() for t in r2(a=fiamma.ones(1))] == [[2.0], [3.0]]


@pytest.mark.parametrize("name", ["foo", "a::b::c", "::foo", "my lib::foo"])
def test_custom_op_bad_names(name):
    with pytest.raises(ValueError, match="namespace"):
        custom_op(name, lambda x: x, mutates_args=(), schema="(Tensor x) -> Tensor")


def test_custom_op_needs_mutates_args_and_rejects_aliasing_outputs():
    ns = _ns()
    with pytest.raises(TypeError, match="mutates_args"):
        custom_op(f"{ns}::a", lambda x: x)  # noqa

    @custom_op(f"{ns}::same", mutates_args=())
    def same(x: T) -> T:
        return x

    @custom_op(f"{ns}::view", mutates_args=())
    def view(x: T) -> T:
        return x.view(-1)
    for op in (same, view):
        with pytest.raises(RuntimeError, match="may not alias any inputs"):
            op(fiamma.ones(2, 2))
    with pytest.raises(ValueError, match="mutates_args"):
        custom_op(f"{ns}::m", lambda x, o: None, mutates_args=(),
                  schema="(Tensor x, Tensor(a!) o) -> ()")


def test_mutating_op_writes_in_place_and_returns_none():
    ns = _ns()

    @custom_op(f"{ns}::npsin", mutates_args={"out"}, device_types="cpu")
    def npsin(x: T, out: T) -> None:
        np.sin(x.numpy(), out=out.numpy())
    assert npsin._schema == "(Tensor x, Tensor(a1!) out) -> ()"
    x, out = fiamma.tensor([0.0, 1.0]), fiamma.zeros(2)
    assert npsin(x, out) is None
    assert np.allclose(out.numpy(), np.sin([0.0, 1.0]))
    assert getattr(fiamma.ops, ns).npsin.default._schema.is_mutable


def test_register_kernel_per_device_and_meta():
    ns = _ns()

    @custom_op(f"{ns}::k", mutates_args=(), device_types="cpu")
    def k(x: T) -> T:
        return x + 1
    with pytest.raises(NotImplementedError, match="no fake impl or Meta kernel"):
        k(fiamma.ones(2, device="meta"))

    @k.register_fake
    def _(x):
        return fiamma.empty_like(x)
    m = k(fiamma.ones(2, 3, device="meta"))
    assert m.device.type == "meta" and tuple(m.shape) == (2, 3)
    k.register_kernel("cpu", lambda x: x + 10)
    assert k(fiamma.zeros(1)).tolist() == [10.0]
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        k.register_kernel("tpu", lambda x: x)

    @custom_op(f"{ns}::only_cuda", mutates_args=(), device_types="cuda")
    def only_cuda(x: T) -> T:
        return x.clone()
    with pytest.raises(NotImplementedError, match="Could not run .* 'CPU' backend"):
        only_cuda(fiamma.ones(1))


def test_fake_impl_get_ctx_new_dynamic_size():
    ns = _ns()

    @custom_op(f"{ns}::nz", mutates_args=())
    def nz(x: T) -> T:
        return fiamma.nonzero(x)

    @nz.register_fake
    def _(x):
        n = L.get_ctx().new_dynamic_size()
        return x.new_empty(n, x.dim(), dtype=fiamma.int64)
    assert L.get_ctx() is None
    with pytest.raises(RuntimeError, match="data-dependent shape"):
        nz(fiamma.ones(3, device="meta"))
    res = opcheck(nz, (fiamma.tensor([0.0, 1.0, 2.0]),), test_utils=("test_schema",
                                                                      "test_faketensor"))
    assert res == {"test_schema": "SUCCESS", "test_faketensor": "SUCCESS"}


# ---- gradients --------------------------------------------------------------------------------

def test_register_autograd_gradient_needs_input_grad_and_errors():
    pytest.importorskip("fiamma.autograd")
    ns = _ns()

    @custom_op(f"{ns}::scale", mutates_args=())
    def scale(x: T, w: T, k: float) -> T:
        return x * w * k
    x = fiamma.tensor([1.0, 2.0], requires_grad=True)
    w = fiamma.tensor([3.0, 4.0])
    y = scale(x, w, 2.0)
    assert y.requires_grad
    with pytest.raises(RuntimeError, match="no autograd formula was registered"):
        y.sum().backward()
    seen = []

    def setup_context(ctx, inputs, output):
        xx, ww, kk = inputs
        ctx.save_for_backward(xx, ww)
        ctx.k = kk

    def backward(ctx, g):
        seen.append(ctx.needs_input_grad)
        xx, ww = ctx.saved_tensors
        return g * ww * ctx.k, g * xx * ctx.k, None
    scale.register_autograd(backward, setup_context=setup_context)
    scale(x, w, 2.0).sum().backward()
    assert x.grad.tolist() == [6.0, 8.0] and seen == [(True, False, False)]
    with fiamma.no_grad():
        assert not scale(x, w, 1.0).requires_grad
    scale.register_autograd(lambda ctx, g: g)  # one gradient for three inputs
    with pytest.raises(RuntimeError, match="returned 1 gradient"):
        scale(x, w, 2.0).sum().backward()
    with pytest.raises(TypeError, match="backward to be a function"):
        scale.register_autograd(None)


def test_register_autograd_list_input_and_gradcheck():
    A = pytest.importorskip("fiamma.autograd")
    ns = _ns()

    @custom_op(f"{ns}::cat2", mutates_args=())
    def cat2(xs: list[T], w: Optional[T] = None) -> T:
        out = fiamma.cat(xs)
        return out * w if w is not None else out.clone()

    def setup_context(ctx, inputs, output):
        ctx.sizes = [t.shape[0] for t in inputs[0]]
        ctx.save_for_backward(inputs[1])

    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        gw = None
        if w is not None:
            g = g * w
        n = ctx.sizes[0]
        return [g[:n], g[n:]], gw
    cat2.register_autograd(backward, setup_context=setup_context)
    a = fiamma.rand(2, dtype=fiamma.float64, requires_grad=True)
    b = fiamma.rand(3, dtype=fiamma.float64, requires_grad=True)
    w = fiamma.rand(5, dtype=fiamma.float64)
    assert A.gradcheck(lambda p, q: cat2([p, q], w), (a, b))
    assert A.gradcheck(lambda p, q: cat2([p, q]), (a, b))


def test_backward_may_call_another_custom_op():
    pytest.importorskip("fiamma.autograd")
    ns = _ns()

    @custom_op(f"{ns}::double", mutates_args=())
    def double(x: T) -> T:
        return x * 2
    double.register_autograd(lambda ctx, g: double(g))
    x = fiamma.ones(3, requires_grad=True)
    double(double(x)).sum().backward()
    assert x.grad.tolist() == [4.0, 4.0, 4.0]


# ---- Library ----------------------------------------------------------------------------------

def test_library_define_impl_cpu_meta_and_defaults(lib):
    ns = lib.ns
    assert lib.define("axpy(Tensor x, Tensor y, float alpha=1.0, *, bool neg=False) -> Tensor") \
        == "axpy"
    op = getattr(fiamma.ops, ns).axpy
    with pytest.raises(NotImplementedError, match="Could not run"):
        op(fiamma.ones(1), fiamma.ones(1))
    lib.impl("axpy", lambda x, y, alpha=1.0, *, neg=False: (-1 if neg else 1) * (alpha * x + y),
             "CPU")
    assert op(fiamma.ones(2), fiamma.ones(2), 2.0, neg=True).tolist() == [-3.0, -3.0]
    with pytest.raises(NotImplementedError, match="no fake impl or Meta kernel"):
        op(fiamma.ones(1, device="meta"), fiamma.ones(1, device="meta"))
    lib.impl("axpy", lambda x, y, alpha=1.0, *, neg=False: fiamma.empty_like(x), "Meta")
    assert tuple(op(fiamma.ones(4, device="meta"), fiamma.ones(4, device="meta")).shape) == (4,)
    with pytest.raises(RuntimeError, match="same name and overload name"):
        lib.define("axpy(Tensor x) -> Tensor")
    with pytest.raises(RuntimeError, match="Only a single TORCH_LIBRARY"):
        Library(ns, "DEF")
    with pytest.raises(ValueError, match="Unsupported kind: XYZ"):
        Library(ns, "XYZ")
    with pytest.raises(ValueError, match="unknown dispatch key"):
        lib.impl("axpy", lambda x: x, "TPU")
    assert lib.define("axpy.scalar(Tensor x, float y) -> Tensor") == "axpy.scalar"
    assert sorted(op.overloads()) == ["default", "scalar"]
    frag = Library(ns, "FRAGMENT")
    frag.define("more(Tensor x) -> Tensor")
    frag.impl("more", lambda x: x + 1)  # CompositeImplicitAutograd
    assert getattr(fiamma.ops, ns).more(fiamma.zeros(1)).tolist() == [1.0]
    frag._destroy()
    with pytest.raises(AttributeError):
        getattr(fiamma.ops, ns).more  # noqa: B018


def test_library_autograd_kernel_with_function(lib):
    A = pytest.importorskip("fiamma.autograd")
    lib.define("cube(Tensor x) -> Tensor")

    def cube_cpu(x):
        return fiamma.from_numpy(x.detach().numpy() ** 3)

    class Cube(A.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return cube_cpu(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g
    lib.impl("cube", cube_cpu, "CPU")
    lib.impl("cube", Cube.apply, "Autograd")
    op = getattr(fiamma.ops, lib.ns).cube
    x = fiamma.tensor([1.0, 2.0], dtype=fiamma.float64, requires_grad=True)
    op(x).sum().backward()
    assert x.grad.tolist() == [3.0, 12.0]
    assert A.gradcheck(op, (x,))
    # a CPU kernel only: the op is not differentiable as PyTorch's opcheck reports
    lib.define("cube2(Tensor x) -> Tensor")
    lib.impl("cube2", cube_cpu, "CPU")
    res = opcheck(getattr(fiamma.ops, lib.ns).cube2, (x,), raise_exception=False,
                  test_utils="test_autograd_registration")
    assert isinstance(res["test_autograd_registration"], AssertionError)


def test_module_level_define_impl_register_functions():
    A = pytest.importorskip("fiamma.autograd")
    ns = _ns()
    L.define(f"{ns}::sq", "(Tensor x) -> Tensor")
    L.impl(f"{ns}::sq", "cpu", lambda x: x * x)
    L.register_fake(f"{ns}::sq", lambda x: fiamma.empty_like(x))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def backward(ctx, g):
        return 2 * ctx.saved_tensors[0] * g
    L.register_autograd(f"{ns}::sq", backward, setup_context=setup_context)
    op = getattr(fiamma.ops, ns).sq
    x = fiamma.tensor([1.0, -3.0], dtype=fiamma.float64, requires_grad=True)
    assert A.gradcheck(op, (x,))
    assert tuple(op(fiamma.ones(5, device="meta")).shape) == (5,)

    @L.register_kernel(op, "cpu")
    def _(x):
        return x * x * 1.0
    assert opcheck(op, (x,)) == {k: "SUCCESS" for k in L._opcheck.DEFAULT_TEST_UTILS}
    with pytest.raises(ValueError, match="is not defined"):
        L.register_fake(f"{ns}::nope", lambda x: x)
    with pytest.raises(ValueError, match="namespace::op_name"):
        L.define("nonamespace", "(Tensor x) -> Tensor")


# ---- opcheck ----------------------------------------------------------------------------------

def test_opcheck_results_and_failures():
    pytest.importorskip("fiamma.autograd")
    ns = _ns()

    @custom_op(f"{ns}::c", mutates_args=())
    def c(x: T) -> T:
        return x.clone()
    with pytest.raises(L._opcheck.OpCheckError, match="test_faketensor failed with There was no "
                                                      "fake impl"):
        opcheck(c, (fiamma.randn(3),))
    c.register_fake(lambda x: x.new_empty(x.shape[0] + 1))
    res = opcheck(c, (fiamma.randn(3),), raise_exception=False)
    assert res["test_schema"] == "SUCCESS"
    msg = str(res["test_faketensor"])
    assert "Shapes" in msg and "are not equal" in msg
    c.register_fake(lambda x: fiamma.empty_like(x))
    assert opcheck(c, (fiamma.randn(3),), test_utils="test_schema") == {"test_schema": "SUCCESS"}
    with pytest.raises(L._opcheck.OpCheckError, match="test_aot_dispatch_dynamic failed with "
                                                      "Trying to backward"):
        opcheck(c, (fiamma.randn(3, requires_grad=True),))
    with pytest.raises(ValueError, match="expected test_utils to be subset"):
        opcheck(c, (fiamma.randn(3),), test_utils=("test_schema", "bogus"))

    @custom_op(f"{ns}::m", mutates_args=())
    def m(a: T, b: T) -> None:
        b.add_(a)
    res = opcheck(m, (fiamma.randn(3), fiamma.randn(3)), raise_exception=False)
    assert str(res["test_schema"]) == "Argument b is not defined as mutable but was mutated"
    assert res["test_faketensor"] == "SUCCESS"  # nothing returned: no fake impl needed


# ---- tracing ----------------------------------------------------------------------------------

def test_fx_records_one_node_and_compile_backend_runs_it():
    fx = pytest.importorskip("fiamma.fx")
    ns = _ns()

    @custom_op(f"{ns}::foo", mutates_args=())
    def foo(x: T, n: int) -> T:
        return fiamma.from_numpy(x.numpy() * 2 + n)  # NumPy inside: a trace cannot follow it

    @custom_op(f"{ns}::put", mutates_args={"out"})
    def put(x: T, out: T) -> None:
        out.copy_(x)

    def f(x, o):
        put(x, o)
        return foo(x, 1) + 1
    gm = fx.symbolic_trace(f)
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert [n.target for n in calls][:2] == [getattr(fiamma.ops, ns).put.default,
                                             getattr(fiamma.ops, ns).foo.default]
    assert f"fiamma.ops.{ns}.foo.default(x, 1)" in gm.code
    gm.graph.eliminate_dead_code()  # the mutating call has no users but stays
    assert any(n.target is getattr(fiamma.ops, ns).put.default for n in gm.graph.nodes)
    o = fiamma.zeros(2)
    assert gm(fiamma.ones(2), o).tolist() == [4.0, 4.0] and o.tolist() == [1.0, 1.0]
    graphs = []

    def backend(g, example):
        graphs.append(g)
        return g
    cf = fiamma.compile(f, backend=backend)
    assert cf(fiamma.ones(3), fiamma.zeros(3)).tolist() == [4.0] * 3 and len(graphs) == 1


# ---- parity with PyTorch ----------------------------------------------------------------------

_SIGS = [
    "def f(x: T, n: int, scale: float = 2.0) -> T: pass",
    "def f(x: T, out: T) -> None: pass",
    "def f(xs: list[T], w: Optional[T] = None, *, k: Sequence[int] = None) -> tuple[T, T]: pass",
    "def f(x: T, flag: bool = True, mode: str = 'a', s: Union[int, float, bool] = 1) -> list[T]: "
    "pass",
    "def f(x: Optional[T], d: Optional[int] = None, e: float = -1.5) -> int: pass",
]


@pytest.mark.parity
@pytest.mark.parametrize("src", _SIGS)
def test_infer_schema_matches_pytorch(src):
    torch = pytest.importorskip("torch")

    def build(tensor_type):
        ns = {"T": tensor_type, "Optional": Optional, "Sequence": Sequence,
              "Union": typing.Union}
        exec(src, ns)
        return ns["f"]
    mut = {"out"} if "out" in src else ()
    assert infer_schema(build(fiamma.Tensor), mutates_args=mut) == \
        torch.library.infer_schema(build(torch.Tensor), mutates_args=mut)


@pytest.mark.parity
def test_custom_op_gradients_and_opcheck_match_pytorch():
    torch = pytest.importorskip("torch")
    pytest.importorskip("fiamma.autograd")
    results = []
    for lib_mod, tensor_type in ((fiamma, fiamma.Tensor), (torch, torch.Tensor)):
        ns = f"par{next(_ids)}"
        Tt = tensor_type

        def kernel(x: Tt, w: Tt, k: float) -> Tt:  # noqa: F821
            return x * w * k
        kernel.__annotations__ = {"x": Tt, "w": Tt, "k": float, "return": Tt}
        op = lib_mod.library.custom_op(f"{ns}::s", kernel, mutates_args=())
        op.register_fake(lambda x, w, k, m=lib_mod: m.empty_like(x))

        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0], inputs[1])
            ctx.k = inputs[2]

        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g * w * ctx.k, g * x * ctx.k, None
        op.register_autograd(backward, setup_context=setup_context)
        x = lib_mod.tensor([1.0, 2.0, 3.0], dtype=lib_mod.float64, requires_grad=True)
        w = lib_mod.tensor([0.5, -1.0, 2.0], dtype=lib_mod.float64, requires_grad=True)
        op(x, w, 3.0).pow(2).sum().backward()
        res = lib_mod.library.opcheck(op, (x.detach().requires_grad_(), w.detach(), 2.0))
        results.append((x.grad.tolist(), w.grad.tolist(), res))
    assert results[0] == results[1]


def test_jit_trace_records_the_operator_as_one_node_and_saves():
    jit = pytest.importorskip("fiamma.jit")
    import io
    ns = _ns()

    @custom_op(f"{ns}::np3", mutates_args=())
    def np3(x: T, k: float) -> T:
        return fiamma.from_numpy(x.numpy() * k)  # NumPy inside: a trace would bake it in

    @custom_op(f"{ns}::put", mutates_args={"o"})
    def put(x: T, o: T) -> None:
        o.copy_(x)

    def f(x):
        o = fiamma.zeros(3)
        put(x * 2, o)
        return np3(x, 3.0) + o
    tm = jit.trace(f, fiamma.ones(3))
    assert f"{ns}::np3.default" in str(tm.graph) and f"{ns}::put.default" in str(tm.graph)
    x = fiamma.tensor([1.0, 2.0, 3.0])
    assert tm(x).tolist() == f(x).tolist() == [5.0, 10.0, 15.0]
    buf = io.BytesIO()
    jit.save(tm, buf)
    buf.seek(0)
    assert jit.load(buf)(x).tolist() == [5.0, 10.0, 15.0]


def test_autograd_kernel_calls_the_backend_kernel_below_autograd(lib):
    A = pytest.importorskip("fiamma.autograd")
    from fiamma._torch_c import module as torch_c
    lib.define("half(Tensor x) -> Tensor")
    op = getattr(fiamma.ops, lib.ns).half

    class Half(A.Function):
        @staticmethod
        def forward(ctx, x):
            with torch_c._AutoDispatchBelowAutograd():  # else: this kernel again, forever
                return op(x)

        @staticmethod
        def backward(ctx, g):
            return g / 2
    lib.impl("half", lambda x: x * 0.5, "CPU")
    lib.impl("half", Half.apply, "Autograd")
    x = fiamma.ones(2, requires_grad=True)
    y = op(x)
    assert type(y.grad_fn).__name__ == "HalfBackward"
    y.sum().backward()
    assert x.grad.tolist() == [0.5, 0.5]


def test_keyword_only_inputs_reach_setup_context_separately():
    pytest.importorskip("fiamma.autograd")
    ns = _ns()

    @custom_op(f"{ns}::kw", mutates_args=())
    def kw(x: T, *, s: float = 2.0) -> T:
        return x * s

    def setup_old(ctx, inputs, output):
        ctx.s = 1.0

    def setup(ctx, inputs, keyword_only_inputs, output):
        assert len(inputs) == 1
        ctx.s = keyword_only_inputs["s"]

    def backward(ctx, g):
        assert ctx.needs_input_grad == (True,)
        return g * ctx.s
    kw.register_autograd(backward, setup_context=setup_old)
    x = fiamma.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match="keyword_only_inputs"):  # as PyTorch
        kw(x, s=3.0)
    kw.register_autograd(backward, setup_context=setup)
    kw(x, s=3.0).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_operators_pickle_and_copy_as_themselves():
    import copy
    import pickle
    ns = _ns()
    op = custom_op(f"{ns}::p", lambda x: x + 1, mutates_args=(), schema="(Tensor x) -> Tensor")
    ovl = getattr(fiamma.ops, ns).p.default
    assert pickle.loads(pickle.dumps(ovl)) is ovl
    assert pickle.loads(pickle.dumps(ovl.overloadpacket)) is ovl.overloadpacket
    assert copy.deepcopy(ovl) is ovl and copy.copy(ovl.overloadpacket) is ovl.overloadpacket
    assert op._opoverload is ovl


def test_builtin_aten_ops_cannot_be_overridden():
    lib = Library("aten", "IMPL")
    with pytest.raises(NotImplementedError, match="built-in operators are Python functions"):
        lib.impl("add.Tensor", lambda a, b: a, "CPU")
    with pytest.raises(ValueError, match="reserved"):
        Library("aten", "DEF")


def test_a_collected_library_takes_its_registrations_with_it():
    import gc
    ns = _ns()

    def make():
        lib = Library(ns, "DEF")
        lib.define("f(Tensor x) -> Tensor")
        lib.impl("f", lambda x: x + 1, "CPU")
        return getattr(fiamma.ops, ns).f(fiamma.zeros(1)).tolist()
    assert make() == [1.0]
    gc.collect()
    with pytest.raises(AttributeError):
        getattr(fiamma.ops, ns).f  # noqa: B018
    keep = Library(ns, "DEF")  # the namespace is free again
    keep.define("g(Tensor x) -> Tensor")
    assert getattr(fiamma.ops, ns).g.overloads() == ["default"]
    keep._destroy()


def test_implementation_returning_the_wrong_type_raises():
    ns = _ns()
    op = custom_op(f"{ns}::w", lambda x: 3, mutates_args=(), schema="(Tensor x) -> Tensor")
    with pytest.raises(RuntimeError, match="returns Tensor but the implementation returned int"):
        op(fiamma.ones(1))
    op2 = custom_op(f"{ns}::n", lambda x: None, mutates_args=(), schema="(Tensor x) -> Tensor")
    with pytest.raises(RuntimeError, match="returned NoneType"):
        op2(fiamma.ones(1))


def test_a_written_argument_moves_its_version_counter():
    ns = _ns()

    @custom_op(f"{ns}::npfill", mutates_args={"out"})
    def npfill(out: T, v: float) -> None:
        out.numpy()[...] = v  # written behind fiamma's back: the op moves the counter
    t = fiamma.zeros(3)
    before = t._version
    npfill(t, 2.0)
    assert t._version > before and t.tolist() == [2.0, 2.0, 2.0]
