"""PyTorch's ``__torch_dispatch__``: ATen overloads, dispatch modes, wrapper subclasses
(fiamma._python_dispatch, fiamma._aten, fiamma.utils._python_dispatch)."""

import pytest

import fiamma
from fiamma.utils._python_dispatch import (
    TorchDispatchMode,
    _get_current_dispatch_mode,
    _get_current_dispatch_mode_stack,
    is_traceable_wrapper_subclass,
    return_and_correct_aliasing,
    transform_subclass,
)
from fiamma.utils._pytree import tree_map

aten = fiamma.ops.aten


class Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


class LoggingTensor(fiamma.Tensor):
    """The docs' wrapper: the data lives in ``elem``; every op unwraps, runs, rewraps."""

    __torch_function__ = fiamma.overrides.disabled_torch_function_impl
    log = []

    @staticmethod
    def __new__(cls, elem, requires_grad=False):
        r = fiamma.Tensor._make_wrapper_subclass(
            cls, elem.shape, strides=elem.stride(), dtype=elem.dtype, device=elem.device,
            requires_grad=requires_grad)
        r.elem = elem
        return r

    def __repr__(self):
        return super().__repr__(tensor_contents=repr(self.elem))

    def __tensor_flatten__(self):
        return ["elem"], None

    @staticmethod
    def __tensor_unflatten__(inner, ctx, size, stride):
        return LoggingTensor(inner["elem"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(e):
            return e.elem if isinstance(e, cls) else e

        def wrap(e):
            return cls(e) if isinstance(e, fiamma.Tensor) and not isinstance(e, cls) else e

        out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
        cls.log.append(str(func))
        return return_and_correct_aliasing(func, args, kwargs, tree_map(wrap, out))


def _logged(fn):
    LoggingTensor.log.clear()
    r = fn()
    return r, list(LoggingTensor.log)


# ---- the overloads ------------------------------------------------------------------------------

def test_overloads_print_and_key_as_pytorch():
    add = aten.add.Tensor
    assert str(add) == "aten.add.Tensor" and add.name() == "aten::add.Tensor"
    assert repr(add) == "<OpOverload(op='aten.add', overload='Tensor')>"
    assert aten.mm.default.name() == "aten::mm" and str(aten.mm) == "aten.mm"
    assert add.overloadpacket is aten.add and aten.add.Tensor is add
    assert {add: 1}[aten.add.Tensor] == 1 and add != aten.add.Scalar
    s = add._schema
    assert s.name == "aten::add" and s.overload_name == "Tensor"
    assert [a.name for a in s.arguments] == ["self", "other", "alpha"]
    assert aten.add_.Tensor._schema.arguments[0].alias_info.is_write
    assert "Tensor" in aten.add.overloads() and "Scalar" in aten.add.overloads()


def test_overloads_compute_on_plain_tensors():
    a, b = fiamma.tensor([1.0, 2.0]), fiamma.tensor([3.0, 5.0])
    assert aten.add.Tensor(a, b, alpha=2).tolist() == [7.0, 12.0]
    assert aten.mm.default(a.view(1, 2), b.view(2, 1)).tolist() == [[13.0]]
    assert aten.sum.dim_IntList(a.view(1, 2), [1]).tolist() == [3.0]
    assert aten.view.default(a, [2, 1]).shape == (2, 1)
    assert aten.mm(a.view(1, 2), b.view(2, 1)).item() == 13.0  # a packet with one overload


def test_unknown_aten_op_names_itself():
    with pytest.raises(AttributeError, match="no operator 'frobnicate'"):
        aten.frobnicate
    with pytest.raises(AttributeError, match="no overload 'Bogus'"):
        aten.add.Bogus


# ---- modes --------------------------------------------------------------------------------------

def test_mode_sees_aten_ops_and_factories():
    with Recorder() as r:
        a = fiamma.ones(2, 3)
        y = (a @ fiamma.ones(3, 1)).relu()
        a.sum(1).mean()
        a[0], a[:, 1:], a.T
        2 - a, a / 2, a > 0
        a.max(1)
    assert r.ops == [
        "aten.ones.default", "aten.ones.default", "aten.mm.default", "aten.relu.default",
        "aten.sum.dim_IntList", "aten.mean.default", "aten.select.int", "aten.slice.Tensor",
        "aten.permute.default", "aten.rsub.Scalar", "aten.div.Tensor", "aten.gt.Scalar",
        "aten.max.dim"]
    assert y.tolist() == [[3.0], [3.0]]
    assert _get_current_dispatch_mode() is None


def test_mode_arguments_are_pytorchs():
    seen = []

    class Args(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append((str(func), [type(a).__name__ for a in args], dict(kwargs or {})))
            return func(*args, **(kwargs or {}))

    x = fiamma.ones(2, 3)
    with Args():
        x.sum(1)
        x.view(-1)
        x.to(fiamma.float64)
    assert seen == [("aten.sum.dim_IntList", ["Tensor", "list"], {}),
                    ("aten.view.default", ["Tensor", "list"], {}),
                    ("aten._to_copy.default", ["Tensor"], {"dtype": fiamma.float64})]


def test_nested_modes_innermost_first_and_popped_in_handler():
    order = []

    class Tag(TorchDispatchMode):
        def __init__(self, tag):
            super().__init__()
            self.tag = tag

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            order.append((self.tag, str(func), _get_current_dispatch_mode() is not self))
            return func(*args, **(kwargs or {}))

    x = fiamma.ones(2)
    with Tag("outer") as outer, Tag("inner") as inner:
        assert _get_current_dispatch_mode_stack() == [outer, inner]
        x.neg()
    assert order == [("inner", "aten.neg.default", True), ("outer", "aten.neg.default", True)]
    assert _get_current_dispatch_mode_stack() == []


def test_mode_exit_on_exception_and_plain_functions_back():
    with pytest.raises(ValueError):
        with Recorder():
            raise ValueError("boom")
    assert _get_current_dispatch_mode() is None
    assert (fiamma.ones(2) + 1).tolist() == [2.0, 2.0]


def test_mode_can_replace_results():
    class Zero(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            return fiamma.zeros_like(out) if func is aten.exp.default else out

    with Zero():
        y = fiamma.ones(3).exp()
    assert y.tolist() == [0.0, 0.0, 0.0]


def test_mode_sees_backward_ops():
    pytest.importorskip("fiamma.autograd")
    w = fiamma.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    x = fiamma.ones(3, 2)
    with Recorder() as r:
        (x @ w).relu().sum().backward()
    assert r.ops[:4] == ["aten.mm.default", "aten.relu.default", "aten.detach.default",
                         "aten.sum.default"]
    assert "aten.threshold_backward.default" in r.ops and r.ops.count("aten.mm.default") >= 2
    assert w.grad.tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_unmapped_function_under_mode_warns_and_runs():
    with Recorder() as r, pytest.warns(UserWarning, match="fiamma.logcumsumexp has no ATen op"):
        y = fiamma.logcumsumexp(fiamma.zeros(2), 0)
    assert y.tolist() == pytest.approx([0.0, 0.6931472]) and r.ops == ["aten.zeros.default"]


# ---- wrapper subclasses -------------------------------------------------------------------------

def test_make_wrapper_subclass_geometry_and_no_data():
    t = LoggingTensor(fiamma.arange(6.0).view(2, 3).t())
    assert type(t) is LoggingTensor and t.shape == (3, 2) and t.stride() == (1, 3)
    assert t.dtype == fiamma.float32 and t.device == fiamma.device("cpu") and t.is_cpu
    assert not t.requires_grad and t.grad_fn is None
    with pytest.raises(TypeError, match="subclass of fiamma.Tensor"):
        fiamma.Tensor._make_wrapper_subclass(int, (2,))
    w = fiamma.Tensor._make_wrapper_subclass(LoggingTensor, (2, 2), dtype=fiamma.float64)
    assert w.dtype == fiamma.float64 and w.stride() == (2, 1)


def test_wrapper_ops_values_and_log():
    a = fiamma.tensor([[1.0, -2.0], [3.0, 4.0]])
    b = fiamma.tensor([[0.5, 1.0], [-1.0, 2.0]])
    la, lb = LoggingTensor(a), LoggingTensor(b)
    cases = [
        (lambda: la + lb, a + b, ["aten.add.Tensor"]),
        (lambda: la * 2, a * 2, ["aten.mul.Tensor"]),
        (lambda: la @ lb, a @ b, ["aten.mm.default"]),
        (lambda: la.t(), a.t(), ["aten.t.default"]),
        (lambda: la.reshape(4), a.reshape(4), ["aten.view.default"]),
        (lambda: la.sum(), a.sum(), ["aten.sum.default"]),
        (lambda: la.mean(0), a.mean(0), ["aten.mean.dim"]),
        (lambda: la.relu(), a.relu(), ["aten.relu.default"]),
        (lambda: la[1], a[1], ["aten.select.int"]),
        (lambda: fiamma.where(la > 0, la, lb), fiamma.where(a > 0, a, b),
         ["aten.gt.Scalar", "aten.where.self"]),
        (lambda: fiamma.cat([la, lb]), fiamma.cat([a, b]), ["aten.cat.default"]),
    ]
    for fn, want, ops in cases:
        got, log = _logged(fn)
        assert type(got) is LoggingTensor
        assert got.elem.tolist() == want.tolist() and got.shape == want.shape
        assert log == ops


def test_wrapper_inplace_and_views_alias_correctly():
    y = LoggingTensor(fiamma.arange(6.0).view(2, 3))
    z, log = _logged(lambda: y.add_(1))
    assert z is y and y.elem.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert log == ["aten.add_.Tensor"]
    v = y.view(3, 2)
    assert v._base is y


def test_wrapper_item_and_bool():
    t = LoggingTensor(fiamma.tensor(2.5))
    v, log = _logged(lambda: float(t))
    assert v == 2.5 and log == ["aten._local_scalar_dense.default"]


def test_wrapper_repr_with_contents():
    assert repr(LoggingTensor(fiamma.tensor([1.0, 2.0]))) == \
        "LoggingTensor(tensor([1., 2.]))"


def test_unsupported_function_names_itself():
    t = LoggingTensor(fiamma.ones(3))
    with pytest.raises(NotImplementedError, match=r"fiamma\.logcumsumexp.*LoggingTensor"):
        fiamma.logcumsumexp(t, 0)


def test_flatten_unflatten():
    t = LoggingTensor(fiamma.tensor([1.0, 2.0]))
    assert is_traceable_wrapper_subclass(t) and not is_traceable_wrapper_subclass(fiamma.ones(1))
    t2 = transform_subclass(t, lambda name, inner: inner * 3)
    assert type(t2) is LoggingTensor and t2.elem.tolist() == [3.0, 6.0]


def test_wrapper_autograd_records_on_the_subclass():
    pytest.importorskip("fiamma.autograd")
    w0 = fiamma.tensor([[1.0, -1.0], [2.0, 0.5]])
    x0 = fiamma.tensor([[1.0, 2.0], [3.0, -4.0]])
    w = LoggingTensor(w0, requires_grad=True)
    x = LoggingTensor(x0)
    LoggingTensor.log.clear()
    loss = (x @ w).relu().sum()
    assert loss.grad_fn is not None and type(loss) is LoggingTensor
    loss.backward()
    assert type(w.grad) is LoggingTensor and w.is_leaf
    assert "aten.threshold_backward.default" in LoggingTensor.log  # backward dispatched too
    wr = w0.clone().requires_grad_(True)
    (x0 @ wr).relu().sum().backward()
    assert w.grad.elem.tolist() == wr.grad.tolist()


# ---- quantised-like and diagonal wrappers -------------------------------------------------------

class ScaleTensor(fiamma.Tensor):
    """A quantised-like wrapper: int8 values times one scale; ops dequantize."""

    __torch_function__ = fiamma.overrides.disabled_torch_function_impl

    @staticmethod
    def __new__(cls, q, scale):
        r = fiamma.Tensor._make_wrapper_subclass(cls, q.shape, dtype=fiamma.float32,
                                                 device=q.device)
        r.q, r.scale = q, scale
        return r

    @classmethod
    def quantize(cls, x, scale):
        return cls((x / scale).round().clamp(-128, 127).to(fiamma.int8), scale)

    def dequantize(self):
        return self.q.to(fiamma.float32) * self.scale

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func is aten.detach.default:
            return cls(args[0].q, args[0].scale)
        if func is aten.mul.Tensor and not isinstance(args[1], fiamma.Tensor):
            return cls(args[0].q, args[0].scale * args[1])  # rescale without touching q
        plain = tree_map(lambda e: e.dequantize() if isinstance(e, cls) else e, args)
        return func(*plain, **(kwargs or {}))


def test_scale_tensor():
    x = fiamma.tensor([[0.5, -1.0], [1.5, 2.0]])
    s = ScaleTensor.quantize(x, 0.5)
    assert s.q.dtype == fiamma.int8 and s.q.tolist() == [[1, -2], [3, 4]]
    y = s * 3.0
    assert type(y) is ScaleTensor and y.q is s.q and y.scale == 1.5
    w = fiamma.tensor([[1.0], [1.0]])
    out = s @ w  # dequantized: a plain result
    assert type(out) is fiamma.Tensor and out.tolist() == [[-0.5], [3.5]]
    assert type(s.detach()) is ScaleTensor


class DiagTensor(fiamma.Tensor):
    """A square matrix stored as its diagonal: mm with a dense matrix scales its rows."""

    __torch_function__ = fiamma.overrides.disabled_torch_function_impl

    @staticmethod
    def __new__(cls, diag):
        n = diag.shape[0]
        r = fiamma.Tensor._make_wrapper_subclass(cls, (n, n), dtype=diag.dtype,
                                                 device=diag.device)
        r.diag = diag
        return r

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        a = args[0]
        if func is aten.mm.default and isinstance(a, cls) and not isinstance(args[1], cls):
            return a.diag.unsqueeze(1) * args[1]
        if func is aten.add.Tensor and all(isinstance(t, cls) for t in args[:2]):
            return cls(a.diag + args[1].diag)
        if func in (aten.t.default, aten.detach.default):
            return cls(a.diag)
        dense = tree_map(lambda e: fiamma.diag(e.diag) if isinstance(e, cls) else e, args)
        return func(*dense, **(kwargs or {}))


def test_diag_tensor():
    d = DiagTensor(fiamma.tensor([1.0, 2.0, 3.0]))
    m = fiamma.arange(6.0).view(3, 2)
    assert (d @ m).tolist() == [[0.0, 1.0], [4.0, 6.0], [12.0, 15.0]]
    s = d + d
    assert type(s) is DiagTensor and s.diag.tolist() == [2.0, 4.0, 6.0]
    assert type(d.t()) is DiagTensor
    assert d.sum().item() == 6.0  # through the dense fallback


# ---- plain tensors ------------------------------------------------------------------------------

def test_plain_tensor_methods_stay_direct():
    # a dispatch class exists (defined above): Tensor's own methods keep their code; only
    # the namespaces' functions are retargeted (as for __torch_function__ classes)
    import fiamma._torch_function as TF

    assert TF._TD_ON[0] and TF._level() in (1, 2)
    a = fiamma.ones(2)
    assert (a + a).tolist() == [2.0, 2.0] and type(a + a) is fiamma.Tensor


def test_disabled_dispatch_impl():
    assert "disabled_torch_dispatch_impl" in repr(fiamma.Tensor.__torch_dispatch__)
    y = fiamma.Tensor.__torch_dispatch__(fiamma.add, (), (fiamma.ones(1), 1))
    assert y.tolist() == [2.0]


# ---- parity: the op names a mode sees ----------------------------------------------------------

_EXPRS = [
    lambda L, a, b: a + b, lambda L, a, b: a - 1, lambda L, a, b: 2 * a, lambda L, a, b: a / b,
    lambda L, a, b: 1 - a, lambda L, a, b: a ** 2, lambda L, a, b: a @ b.t(),
    lambda L, a, b: a.sum(), lambda L, a, b: a.sum(0, keepdim=True), lambda L, a, b: a.mean(1),
    lambda L, a, b: a.amax(1), lambda L, a, b: a.max(), lambda L, a, b: a.argmax(1),
    lambda L, a, b: a.exp().log().sqrt().tanh().sigmoid(), lambda L, a, b: a.relu(),
    lambda L, a, b: a.view(6), lambda L, a, b: a.reshape(3, 2), lambda L, a, b: a.t(),
    lambda L, a, b: a.transpose(0, 1), lambda L, a, b: a.permute(1, 0),
    lambda L, a, b: a.unsqueeze(0).squeeze(0), lambda L, a, b: a[0].expand(4, 3),
    lambda L, a, b: a[:, 1:], lambda L, a, b: a[1, 2], lambda L, a, b: a.clone().detach(),
    lambda L, a, b: a.clone().add_(b).mul_(2).zero_(), lambda L, a, b: a.to(L.float64),
    lambda L, a, b: L.where(a > 0, a, b), lambda L, a, b: L.cat([a, b], 1),
    lambda L, a, b: L.stack([a, b]), lambda L, a, b: L.ones_like(a),
    lambda L, a, b: L.zeros(2, 3), lambda L, a, b: L.full((2,), 1.5),
    lambda L, a, b: a.clamp(0, 1), lambda L, a, b: a.eq(b), lambda L, a, b: a.abs().neg(),
    lambda L, a, b: L.matmul(a.unsqueeze(0).expand(2, 2, 3), b.t()),
    lambda L, a, b: a.addcmul(a, b, value=2), lambda L, a, b: L.addmm(a[:, :2], a, b.t()),
    lambda L, a, b: L.matmul(a.unsqueeze(0).expand(2, 2, 3).contiguous(), b.t()),
    lambda L, a, b: L.matmul(a[0], b.t()), lambda L, a, b: L.matmul(a.mT.unsqueeze(0), a),
    lambda L, a, b: L.matmul(a.unsqueeze(0).expand(2, 2, 3), b[0]),
]


@pytest.mark.parity
def test_mode_op_names_match_pytorch():
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode as TorchMode

    class TorchRecorder(TorchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    data_a = [[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]]
    data_b = [[2.0, 1.0, -3.0], [1.5, -0.5, 2.0]]
    for i, expr in enumerate(_EXPRS):
        ta, tb = torch.tensor(data_a), torch.tensor(data_b)
        fa, fb = fiamma.tensor(data_a), fiamma.tensor(data_b)
        with TorchRecorder() as tr:
            want = expr(torch, ta, tb)
        with Recorder() as fr:
            got = expr(fiamma, fa, fb)
        assert fr.ops == tr.ops, (i, fr.ops, tr.ops)
        np = pytest.importorskip("numpy")
        np.testing.assert_allclose(np.array(got.tolist(), dtype=float),
                                   np.array(want.tolist(), dtype=float), rtol=1e-6, err_msg=i)


# ---- normalisation, pooling, scans, norms, FFTs -------------------------------------------------

def _nonten(v, L):
    if isinstance(v, (list, tuple)):
        return [_nonten(x, L) for x in v]
    if isinstance(v, L.Tensor):
        return "T"
    if isinstance(v, (L.dtype, L.device)):
        return str(v).replace("torch.", "").replace("fiamma.", "")
    return v


class _ArgRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append((str(func), _nonten(list(args), fiamma),
                         {k: _nonten(v, fiamma) for k, v in (kwargs or {}).items()}))
        return func(*args, **(kwargs or {}))


def _nn_exprs(L):
    F = L.nn.functional
    return [
        lambda x, s, w: F.batch_norm(x, L.zeros(3), L.ones(3), w, w * 2, training=True),
        lambda x, s, w: F.batch_norm(x, L.zeros(3), L.ones(3), training=False),
        lambda x, s, w: F.batch_norm(x, None, None, training=True, momentum=0.2, eps=1e-3),
        lambda x, s, w: F.layer_norm(s, (4,)),
        lambda x, s, w: F.layer_norm(s, [5, 4], None, None, 1e-3),
        lambda x, s, w: F.group_norm(x, 3, w, w),
        lambda x, s, w: F.group_norm(x, 1),
        lambda x, s, w: F.max_pool2d(x, 2),
        lambda x, s, w: F.max_pool2d(x, 2, 2),
        lambda x, s, w: F.max_pool2d(x, 3, 2, 1, 1, True),
        lambda x, s, w: F.max_pool2d(x, 2, return_indices=True)[1],
        lambda x, s, w: F.avg_pool2d(x, 2),
        lambda x, s, w: F.avg_pool2d(x, 3, 2, 1, True, False, 2),
        lambda x, s, w: F.avg_pool2d(x, 3, 1, 1),
        lambda x, s, w: F.adaptive_avg_pool2d(x, 1),
        lambda x, s, w: F.adaptive_avg_pool2d(x, (3, 2)),
        lambda x, s, w: F.adaptive_avg_pool2d(x, (None, 2)),
        lambda x, s, w: F.max_pool1d(s, 2), lambda x, s, w: F.avg_pool1d(s, 2),
        lambda x, s, w: F.max_pool1d(s, 3, 2, 1, return_indices=True)[1],
        lambda x, s, w: F.avg_pool1d(s, 3, 2, 1, False, False),
        lambda x, s, w: F.adaptive_avg_pool1d(s, 3), lambda x, s, w: F.adaptive_avg_pool1d(s, 1),
        lambda x, s, w: L.cumsum(s, 1), lambda x, s, w: s.cumsum(dim=-1),
        lambda x, s, w: s.cumsum(1, dtype=L.float64), lambda x, s, w: L.cumprod(s, 2),
        lambda x, s, w: F.softmax(s, -1), lambda x, s, w: L.softmax(s, 1),
        lambda x, s, w: s.log_softmax(1),
        lambda x, s, w: L.linalg.vector_norm(s), lambda x, s, w: s.norm(),
        lambda x, s, w: L.linalg.vector_norm(s, 2, dim=1, keepdim=True),
        lambda x, s, w: L.linalg.vector_norm(s, 1), lambda x, s, w: s.norm(dim=1),
        lambda x, s, w: s.norm(p=2, dim=(1, 2), keepdim=True), lambda x, s, w: s.norm(1),
        lambda x, s, w: L.linalg.norm(s[0]),
        lambda x, s, w: L.linalg.inv(s[:, :4]), lambda x, s, w: L.linalg.inv(s[0, :4]),
        lambda x, s, w: L.linalg.cholesky(s[0].mT @ s[0]),
        lambda x, s, w: L.linalg.cholesky(s[0].mT @ s[0], upper=True),
        lambda x, s, w: L.linalg.qr(s[0])[1].abs(),
        lambda x, s, w: L.linalg.qr(s[0], mode="complete")[1].abs(),
        lambda x, s, w: L.linalg.eigh(s[0] @ s[0].mT)[0],
        lambda x, s, w: L.linalg.eigvalsh(s[0] @ s[0].mT, UPLO="U"),
        lambda x, s, w: L.linalg.svd(s[0])[1], lambda x, s, w: L.linalg.svdvals(s),
        lambda x, s, w: L.linalg.svd(s[0], full_matrices=False)[1],
        lambda x, s, w: L.fft.rfft(s).abs(), lambda x, s, w: L.fft.rfft(s, norm="ortho").abs(),
        lambda x, s, w: L.fft.fft(s).abs(), lambda x, s, w: L.fft.ifft(L.fft.fft(s)).abs(),
        lambda x, s, w: L.fft.irfft(L.fft.rfft(s, dim=1), n=5, dim=1),
        lambda x, s, w: L.fft.irfft(L.fft.rfft(s), norm="forward"),
    ]


@pytest.mark.parity
def test_nn_op_sequences_and_arguments_match_pytorch():
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    pytest.importorskip("fiamma.nn")
    from torch.utils._python_dispatch import TorchDispatchMode as TorchMode

    class TorchArgRecorder(TorchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kw = {k: _nonten(v, torch) for k, v in (kwargs or {}).items()
                  if k not in ("pin_memory", "layout")}
            self.ops.append((str(func), _nonten(list(args), torch), kw))
            return func(*args, **(kwargs or {}))

    rng = np.random.default_rng(0)
    x0, s0, w0 = rng.standard_normal((2, 3, 7, 6)), rng.standard_normal((2, 5, 4)), \
        rng.standard_normal(3)
    for i, (te, fe) in enumerate(zip(_nn_exprs(torch), _nn_exprs(fiamma))):
        targs = [torch.tensor(a, dtype=torch.float32) for a in (x0, s0, w0)]
        fargs = [fiamma.tensor(a, dtype=fiamma.float32) for a in (x0, s0, w0)]
        with TorchArgRecorder() as tr:
            want = te(*targs)
        with _ArgRecorder() as fr:
            got = fe(*fargs)
        fops = [(n, a, {k: v for k, v in kw.items() if k not in ("pin_memory", "layout")})
                for n, a, kw in fr.ops]
        assert fops == tr.ops, (i, fops, tr.ops)
        np.testing.assert_allclose(np.array(got.tolist(), dtype=float),
                                   np.array(want.tolist(), dtype=float), rtol=1e-4,
                                   atol=1e-5, err_msg=str(i))


def _wrapped_grads(fn, inputs, params):
    """``fn`` on LoggingTensor wrappers (params requiring grad) and on plain tensors: the
    results, the wrappers' gradients, the plain gradients and the wrapper log."""
    LoggingTensor.log.clear()
    wp = [LoggingTensor(p.clone(), requires_grad=True) for p in params]
    y = fn([LoggingTensor(x) for x in inputs], wp)
    g = fiamma.linspace(-1.0, 1.0, y.numel()).view(y.shape)
    (y * LoggingTensor(g)).sum().backward()
    log = list(LoggingTensor.log)
    pp = [p.clone().requires_grad_(True) for p in params]
    y0 = fn(inputs, pp)
    (y0 * g).sum().backward()
    return y, wp, y0, pp, log


_WRAPPED = [
    ("native_layer_norm", lambda x, w: fiamma.nn.functional.layer_norm(x[1], (4,), w[0], w[1])),
    ("native_group_norm", lambda x, w: fiamma.nn.functional.group_norm(x[0], 2, w[0], w[1])),
    ("native_batch_norm", lambda x, w: fiamma.nn.functional.batch_norm(
        x[0], None, None, w[0], w[1], training=True)),
    ("native_batch_norm", lambda x, w: fiamma.nn.functional.batch_norm(
        x[0], fiamma.full((4,), 0.5), fiamma.full((4,), 2.0), w[0], w[1], training=False)),
    ("max_pool2d_with_indices", lambda x, w: fiamma.nn.functional.max_pool2d(
        x[0] * w[2], 2, return_indices=True)[0]),
    ("max_pool2d_with_indices", lambda x, w: fiamma.nn.functional.max_pool2d(
        x[0] * w[2], 3, 2, 1)),
    ("avg_pool2d", lambda x, w: fiamma.nn.functional.avg_pool2d(x[0] * w[2], 3, 2, 1)),
    ("_adaptive_avg_pool2d", lambda x, w: fiamma.nn.functional.adaptive_avg_pool2d(
        x[0] * w[2], (4, 3))),
    ("max_pool2d_with_indices", lambda x, w: fiamma.nn.functional.max_pool1d(
        x[1] * w[2], 2, 1)),
    ("avg_pool2d", lambda x, w: fiamma.nn.functional.avg_pool1d(x[1] * w[2], 2)),
    ("cumsum", lambda x, w: (x[1] * w[2]).cumsum(1)),
    ("cumprod", lambda x, w: fiamma.cumprod(x[1] * w[2], 2)),
    ("linalg_vector_norm", lambda x, w: fiamma.linalg.vector_norm(x[1] * w[2], dim=1)),
    ("linalg_vector_norm", lambda x, w: (x[1] * w[2]).norm()),
]


@pytest.mark.parametrize("op,fn", _WRAPPED)
def test_wrapper_forward_and_backward_through_nn_ops(op, fn):
    pytest.importorskip("fiamma.autograd")
    pytest.importorskip("fiamma.nn")
    fiamma.manual_seed(0)
    inputs = [fiamma.randn(2, 4, 6, 6), fiamma.randn(2, 5, 4)]
    params = [fiamma.randn(4), fiamma.randn(4), fiamma.tensor(1.5)]
    y, wp, y0, pp, log = _wrapped_grads(fn, inputs, params)
    assert type(y) is LoggingTensor and y.shape == y0.shape
    assert y.elem.flatten().tolist() == pytest.approx(y0.flatten().tolist(), rel=1e-5,
                                                      abs=1e-6)
    assert f"aten.{op}.default" in log
    if op.startswith(("native_", "max_pool2d", "avg_pool2d", "_adaptive")):
        assert f"aten.{op}_backward.default" in log, log
    for a, b in zip(wp, pp):
        if b.grad is None:
            assert a.grad is None
            continue
        assert type(a.grad) is LoggingTensor
        assert a.grad.elem.flatten().tolist() == pytest.approx(b.grad.flatten().tolist(),
                                                               rel=1e-4, abs=1e-5)


def test_wrapper_batch_norm_updates_running_stats_and_returns_saved_stats():
    pytest.importorskip("fiamma.autograd")  # the saved statistics come from its record
    pytest.importorskip("fiamma.nn")
    x = fiamma.tensor([[1.0, 2.0], [3.0, 6.0]])
    rm, rv = fiamma.zeros(2), fiamma.ones(2)
    y = fiamma.nn.functional.batch_norm(LoggingTensor(x), rm, rv, training=True)
    assert type(y) is LoggingTensor
    assert rm.tolist() == pytest.approx([0.2, 0.4]) and rv.tolist() == pytest.approx([1.1, 1.7])
    out, mean, invstd = aten.native_batch_norm.default(x, None, None, None, None, True, 0.1,
                                                       1e-5)
    assert mean.tolist() == pytest.approx([2.0, 4.0])
    assert invstd.tolist() == pytest.approx([1.0 / (1.0 + 1e-5) ** 0.5, 0.5 / (1 + 2.5e-6) ** 0.5])
    assert out.flatten().tolist() == pytest.approx(y.elem.flatten().tolist(), abs=1e-6)


def test_batch_norm_keeps_functional_checks_under_a_mode():
    pytest.importorskip("fiamma.nn")
    with Recorder() as r, pytest.raises(ValueError, match="more than 1 value per channel"):
        fiamma.nn.functional.batch_norm(fiamma.ones(1, 3), None, None, training=True)
    assert r.ops == ["aten.ones.default"]


def test_wrapper_fft_forward_and_gradients_name_themselves():
    s = fiamma.tensor([[1.0, 2.0, 0.0, -1.0]])
    got, log = _logged(lambda: fiamma.fft.irfft(fiamma.fft.rfft(LoggingTensor(s))))
    assert log == ["aten._fft_r2c.default", "aten._fft_c2r.default"]
    assert got.elem.flatten().tolist() == pytest.approx(s.flatten().tolist(), abs=1e-6)
    pytest.importorskip("fiamma.autograd")
    # gradients: the autograd record is taken on meta stand-ins (shape-only transforms)
    w = LoggingTensor(s, requires_grad=True)
    LoggingTensor.log.clear()
    fiamma.fft.irfft(fiamma.fft.rfft(w) * 2.0).pow(2).sum().backward()
    ref = s.clone().requires_grad_(True)
    fiamma.fft.irfft(fiamma.fft.rfft(ref) * 2.0).pow(2).sum().backward()
    assert type(w.grad) is LoggingTensor
    assert w.grad.elem.flatten().tolist() == pytest.approx(ref.grad.flatten().tolist(), abs=1e-6)
    assert "aten._fft_r2c.default" in LoggingTensor.log


def test_wrapper_linalg_forward_and_gradients_name_themselves():
    A = fiamma.tensor([[2.0, 1.0], [1.0, 3.0]])
    got, log = _logged(lambda: fiamma.linalg.inv(LoggingTensor(A)))
    assert log == ["aten.linalg_inv_ex.default", "aten._linalg_check_errors.default"]
    assert got.elem.flatten().tolist() == pytest.approx([0.6, -0.2, -0.2, 0.4])
    got, log = _logged(lambda: fiamma.linalg.eigvalsh(LoggingTensor(A)))
    assert log == ["aten._linalg_eigh.default"] and type(got) is LoggingTensor
    assert got.elem.tolist() == pytest.approx([(5 - 5 ** 0.5) / 2, (5 + 5 ** 0.5) / 2])
    pytest.importorskip("fiamma.autograd")
    L = fiamma.linalg
    b = fiamma.tensor([[1.0, -2.0], [0.5, 3.0]])
    for fn in (L.cholesky, L.inv, lambda a: L.eigh(a)[1], lambda a: L.svd(a)[0],
               lambda a: L.qr(a)[1], L.det, lambda a: L.slogdet(a)[1] * a, lambda a: L.solve(a, b),
               lambda a: L.solve_triangular(a, b, upper=True), lambda a: L.lu(a)[2],
               lambda a: L.lu_solve(*L.lu_factor(a), b), lambda a: a.tril(-1) + a.triu(1),
               lambda a: fiamma.fft.ifft2(fiamma.fft.rfftn(a, s=(2, 2)), s=(2, 2)).imag):
        w = LoggingTensor(A, requires_grad=True)
        (fn(w) * fiamma.tensor([[1.0, 2.0], [-1.0, 0.5]])).sum().backward()
        ref = A.clone().requires_grad_(True)
        (fn(ref) * fiamma.tensor([[1.0, 2.0], [-1.0, 0.5]])).sum().backward()
        assert type(w.grad) is LoggingTensor
        assert w.grad.elem.flatten().tolist() == pytest.approx(ref.grad.flatten().tolist(),
                                                               abs=1e-5)


def test_unmapped_norm_forms_name_themselves():
    t = LoggingTensor(fiamma.ones(2, 2))
    with pytest.raises(NotImplementedError, match="linalg.norm with ord="):
        fiamma.linalg.norm(t, ord="nuc")
    with pytest.raises(NotImplementedError, match="max pool"):
        fiamma.max_pool_backward(LoggingTensor(fiamma.ones(1, 2)), fiamma.zeros(1, 2,
                                 dtype=fiamma.int64), (4,))


def _programs(L):
    F = L.nn.functional

    def cnn(ws, x, y, rm, rv):
        h = F.conv2d(x, ws[0], ws[1], padding=1)
        h = F.batch_norm(h, rm, rv, ws[2], ws[3], training=True)
        h = F.max_pool2d(F.relu(h), 2)
        h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        return F.cross_entropy(F.linear(h, ws[4], ws[5]), y)

    def block(ws, x):
        h = F.layer_norm(x, (6,), ws[0], ws[1])
        x = x + F.softmax(h @ h.transpose(1, 2) / 2.0, -1) @ h
        h = F.layer_norm(x, (6,), ws[2], ws[3])
        return (x + F.linear(F.gelu(F.linear(h, ws[4])), ws[5], ws[6])).mean()

    return cnn, block


@pytest.mark.parity
def test_cnn_and_transformer_block_forward_ops_match_pytorch():
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    pytest.importorskip("fiamma.autograd")
    pytest.importorskip("fiamma.nn")
    from torch.utils._python_dispatch import TorchDispatchMode as TorchMode

    class TorchRecorder(TorchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    rng = np.random.default_rng(0)

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    cnn_w = [arr(6, 3, 3, 3), arr(6), arr(6), arr(6), arr(3, 6), arr(3)]
    blk_w = [arr(6), arr(6), arr(6), arr(6), arr(12, 6), arr(6, 12), arr(6)]
    x_cnn, x_blk = arr(4, 3, 8, 8), arr(2, 5, 6)
    res = {}
    for L, R in ((torch, TorchRecorder), (fiamma, Recorder)):
        cnn, block = _programs(L)
        xc, yc, xb = L.tensor(x_cnn), L.tensor([0, 1, 2, 1]), L.tensor(x_blk)
        rm, rv = L.zeros(6), L.ones(6)
        for name, W, run in (("cnn", cnn_w, lambda ws: cnn(ws, xc, yc, rm, rv)),
                             ("block", blk_w, lambda ws: block(ws, xb))):
            ws = [L.tensor(w).requires_grad_() for w in W]
            with R() as r:
                loss = run(ws)
                n = len(r.ops)
                loss.backward()
            res[L.__name__, name] = (r.ops[:n], loss.item(), [w.grad.tolist() for w in ws])
    for name in ("cnn", "block"):
        t, f = res["torch", name], res["fiamma", name]
        assert f[0] == t[0], (name, f[0], t[0])
        assert f[1] == pytest.approx(t[1], rel=1e-5)
        for gf, gt in zip(f[2], t[2]):
            np.testing.assert_allclose(np.array(gf), np.array(gt), rtol=1e-4, atol=1e-5)


def test_non_wrapper_subclass_with_real_data():
    from fiamma.utils._mode_utils import no_dispatch

    seen = []

    class Tagged(fiamma.Tensor):
        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            seen.append(str(func))
            with no_dispatch():
                out = func(*args, **(kwargs or {}))
            return tree_map(lambda e: e.as_subclass(cls) if type(e) is fiamma.Tensor else e,
                            out)

    x = fiamma.Tensor._make_subclass(Tagged, fiamma.tensor([1.0, -2.0]))
    y = (x * 3).abs()
    assert type(y) is Tagged and y.tolist() == [3.0, 6.0]
    assert seen == ["aten.mul.Tensor", "aten.abs.default"]


def test_data_of_a_subclass_is_its_detach():
    pytest.importorskip("fiamma.autograd")
    w = LoggingTensor(fiamma.ones(2), requires_grad=True)
    d, log = _logged(lambda: w.data)
    assert type(d) is LoggingTensor and not d.requires_grad and log == ["aten.detach.default"]


def test_torch_ops_isinstance_names():
    import fiamma._ops as torch_ops  # what torch._ops maps to under fiamma.run

    assert isinstance(aten.add.Tensor, torch_ops.OpOverload)
    assert isinstance(aten.add, torch_ops.OpOverloadPacket)
    assert not isinstance(fiamma.add, torch_ops.OpOverload)
    assert torch_ops.OpOverload.__name__ == "OpOverload"


def test_flop_counter_is_a_dispatch_mode_and_counts_through_wrappers():
    from fiamma.utils.flop_counter import FlopCounterMode

    a = LoggingTensor(fiamma.ones(4, 3))
    with FlopCounterMode(display=False) as fc, Recorder() as r:
        a @ fiamma.ones(3, 5)
    assert isinstance(fc, TorchDispatchMode)
    assert fc.get_total_flops() == 120 and r.ops == ["aten.ones.default", "aten.mm.default"]


def test_inplace_with_grad_on_a_subclass_names_itself():
    pytest.importorskip("fiamma.autograd")
    w = LoggingTensor(fiamma.ones(2), requires_grad=True)
    with pytest.raises(NotImplementedError, match="in-place op with gradients"):
        (w * 1).relu_()
