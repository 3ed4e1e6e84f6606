import io
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from models import MLP, RNNLM, CausalSelfAttention, SmallCNN, randn, transformer_encoder

import fiamma
import fiamma.jit
import fiamma.nn as nn


def _same(a, b, tol=1e-5):
    a, b = a.detach().numpy(), b.detach().numpy()
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol * (np.abs(b).max() + 1e-30))


@pytest.mark.parametrize("make,shape,shape2", [
    (SmallCNN, (2, 1, 8, 8), (5, 1, 8, 8)),
    (MLP, (3, 64), (7, 64)),
    (CausalSelfAttention, (2, 6, 16), (3, 6, 16)),
    (transformer_encoder, (2, 5, 16), (4, 5, 16)),
])
def test_trace_equals_eager_and_follows_batch(make, shape, shape2):
    m = make().eval()
    tm = fiamma.jit.trace(m, randn(*shape))
    for s in (shape, shape2):
        x = randn(*s, seed=1)
        with fiamma.no_grad():
            _same(tm(x), m(x))


def test_trace_rnn_lms():
    for kind in ("LSTM", "GRU", "RNN"):
        m = RNNLM(kind).eval()
        ids = fiamma.randint(0, 50, (7, 3))
        tm = fiamma.jit.trace(m, ids)
        ids2 = fiamma.randint(0, 50, (9, 3))
        with fiamma.no_grad():
            _same(tm(ids2), m(ids2))


def test_trace_function_and_listing():
    def f(x, y):
        return (x @ y).relu().sum(1, keepdim=True) * 2 + x[:, :1]

    x, y = randn(3, 4), randn(4, 4, seed=2)
    tm = fiamma.jit.trace(f, (x, y))
    _same(tm(x, y), f(x, y))
    text = repr(tm.graph)
    assert "mm" in text or "matmul" in text
    assert tm.code.startswith("def forward(self, input_0, input_1):")
    assert "return" in tm.code


def test_parameters_are_named_initializers():
    m = SmallCNN().eval()
    tm = fiamma.jit.trace(m, randn(1, 1, 8, 8))
    assert {"c1.weight", "c1.bias", "fc2.weight", "bn.running_mean"} <= set(tm.state_dict())


def test_inplace_ops_are_functionalised():
    def f(x):
        y = x * 2
        y.add_(1).relu_()
        return y

    x = randn(4, 4)
    tm = fiamma.jit.trace(f, x)
    x2 = randn(4, 4, seed=3)
    _same(tm(x2), f(x2))


def test_inplace_through_a_view_then_reading_the_base_raises():
    def f(x):
        y = x * 1
        y[:, 0].mul_(0)
        return y

    with pytest.raises(fiamma.jit.TracingError, match="in-place"):
        fiamma.jit.trace(f, randn(3, 3), check_trace=False)


def test_tracer_warning_on_item_and_control_flow():
    def f(x):
        if x.sum() > 0:
            return x * x.max().item()
        return -x

    with pytest.warns(fiamma.jit.TracerWarning):
        fiamma.jit.trace(f, randn(3))


def test_no_warning_for_plain_model():
    with warnings.catch_warnings():
        warnings.simplefilter("error", fiamma.jit.TracerWarning)
        fiamma.jit.trace(MLP().eval(), randn(2, 64))


def test_training_mode_batch_norm_uses_batch_statistics():
    m = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4)).train()
    tm = fiamma.jit.trace(m, randn(2, 1, 8, 8), check_trace=False)
    x = randn(3, 1, 8, 8, seed=4)
    with fiamma.no_grad():
        _same(tm(x), m(x))


def test_tracing_leaves_no_requires_grad_behind():
    m = SmallCNN().eval()
    x = randn(2, 1, 8, 8)
    fiamma.jit.trace(m, x)
    assert not x.requires_grad
    assert all(not b.requires_grad for b in m.buffers())
    assert all(p.requires_grad for p in m.parameters())


def test_script_runs_eagerly_and_save_asks_for_a_call(tmp_path):
    m = MLP()
    sm = fiamma.jit.script(m)
    assert isinstance(sm, MLP) and isinstance(sm, fiamma.jit.ScriptModule)

    @fiamma.jit.script
    def f(x, k: int):
        return x * k + 1

    assert f(fiamma.tensor([1.0, 2.0]), 3).tolist() == [4.0, 7.0]
    with pytest.raises(RuntimeError, match="has not been called yet"):
        fiamma.jit.save(sm, str(tmp_path / "m.fjit"))
    with pytest.raises(TypeError, match="function or a module"):
        fiamma.jit.script(3)


def test_save_load_in_a_fresh_process(tmp_path):
    m = SmallCNN().eval()
    x = randn(3, 1, 8, 8)
    path = tmp_path / "cnn.fjit"
    fiamma.jit.trace(m, x).save(str(path))
    with fiamma.no_grad():
        want = m(x).numpy()
    np.save(tmp_path / "x.npy", x.numpy())
    code = (
        "import sys, numpy as np, fiamma, fiamma.jit\n"
        f"tm = fiamma.jit.load({str(path)!r})\n"
        f"y = tm(fiamma.from_numpy(np.load({str(tmp_path / 'x.npy')!r})))\n"
        "bad = [m for m in sys.modules if m.startswith(('models', 'test_'))]\n"
        "assert not bad, bad\n"
        f"np.save({str(tmp_path / 'y.npy')!r}, y.numpy())\n")
    env = dict(os.environ)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path, env=env)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-6, atol=1e-6)


def test_load_rejects_unknown_ops():
    tm = fiamma.jit.trace(lambda x: x.exp(), randn(2))
    tm.graph.nodes[0].op = "os_system"
    buf = io.BytesIO()
    tm.save(buf)
    buf.seek(0)
    with pytest.raises(RuntimeError, match="os_system"):
        fiamma.jit.load(buf)


def test_load_rejects_garbage():
    with pytest.raises(RuntimeError, match="not a traced-module"):
        fiamma.jit.load(io.BytesIO(b"nope"))


def test_rnn_with_packed_sequence_is_refused():
    m = nn.LSTM(3, 4)

    class W(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x):
            p = nn.utils.rnn.pack_padded_sequence(x, [2, 1])
            return self.m(p)[1][0]

    with pytest.raises((fiamma.jit.TracingError, TypeError)):
        fiamma.jit.trace(W(), randn(2, 2, 3))


def test_nested_inputs_are_flattened():
    m = nn.LSTM(3, 4).eval()
    x, h, c = randn(5, 2, 3), randn(1, 2, 4, seed=1), randn(1, 2, 4, seed=2)
    tm = fiamma.jit.trace(m, (x, (h, c)))
    assert len(tm.graph.inputs) == 3
    got, (gh, gc) = tm(x, (h, c))
    with fiamma.no_grad():
        want, (wh, wc) = m(x, (h, c))
    _same(got, want)
    _same(gc, wc)


def test_torchscript_helpers_for_model_code():
    seen = []

    def f(x):
        seen.append(fiamma.jit.is_tracing())
        return x + 1

    fiamma.jit.trace(f, randn(2), check_trace=False)
    assert seen == [True] and not fiamma.jit.is_tracing()
    assert fiamma.jit.is_scripting() is False

    @fiamma.jit.ignore
    def g(x):
        return x

    assert g(3) == 3 and fiamma.jit.unused(g) is g
    assert fiamma.jit.annotate(list, []) == []


def test_runner_reuses_only_dead_buffers():
    def f(x):
        y = x * 2
        z = y.relu()          # y is read again below: not overwritten
        w = (z + 1).sigmoid()  # z + 1 dies at sigmoid: may be reused
        return w + y, x.relu()  # x is an input: never overwritten

    x = randn(4, 5)
    keep = x.numpy().copy()
    tm = fiamma.jit.trace(f, x)
    got = tm(x)
    want = f(x)
    for g, w in zip(got, want):
        _same(g, w)
    assert np.array_equal(x.numpy(), keep)


def test_trace_save_and_export_on_the_reference_device(tmp_path):
    """The xp reference device (the array-module backend over NumPy): tensors stay there."""
    xp = pytest.importorskip("fiamma._backend.xp")
    xp.reference()
    m = MLP().to("xp").eval()
    x = randn(3, 64).to("xp")
    tm = fiamma.jit.trace(m, x)
    assert tm(x).device.type == "xp"
    with fiamma.no_grad():
        _same(tm(x).cpu(), m(x).cpu())
    tm.save(str(tmp_path / "m.fjit"))
    t2 = fiamma.jit.load(str(tmp_path / "m.fjit"), map_location="xp")
    _same(t2(x).cpu(), tm(x).cpu())
    onnx = pytest.importorskip("onnx")
    fonnx = pytest.importorskip("fiamma.onnx")
    model = fonnx.export(m, x, None)
    assert isinstance(model.model_proto, onnx.ModelProto)


def test_traced_module_state_dict_round_trip():
    m = SmallCNN().eval()
    x = randn(2, 1, 8, 8)
    tm = fiamma.jit.trace(m, x)
    m2 = SmallCNN().eval()
    tm2 = fiamma.jit.trace(m2, x)
    tm2.load_state_dict(tm.state_dict())
    _same(tm2(x), tm(x))
    with pytest.raises(RuntimeError, match="missing"):
        tm2.load_state_dict({})
    _same(tm.cpu()(x), tm(x))


def test_other_threads_are_not_traced():
    import threading

    def f(x):
        seen = []

        def work():
            y = fiamma.ones(3).long().float()  # wrapped methods, another thread
            seen.append((y * 2).sum().item())

        t = threading.Thread(target=work)
        t.start()
        t.join()
        return x * seen[0]

    with warnings.catch_warnings():
        warnings.simplefilter("error", fiamma.jit.TracerWarning)
        tm = fiamma.jit.trace(f, randn(3))
    assert [n.op for n in tm.graph.nodes] == ["mul"]


def test_traced_module_call_records_autograd():
    """As PyTorch's traced modules: a call with grad enabled and parameters (or inputs) that
    require grad gives a result with a grad_fn, whose backward reaches the module's parameters
    with eager's gradients (also through an in-place ReLU); under no_grad the result has none."""
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(inplace=True), nn.Linear(8, 2))
    x = fiamma.randn(3, 4)
    tm = fiamma.jit.trace(net, (x,))
    y = tm(x)
    assert y.requires_grad and y.grad_fn is not None
    y.square().sum().backward()
    traced = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    net(x).square().sum().backward()
    for a, p in zip(traced, net.parameters()):
        np.testing.assert_allclose(a.numpy(), p.grad.numpy(), rtol=1e-6, atol=1e-7)
    with fiamma.no_grad():
        assert not tm(x).requires_grad
    # an input that requires grad gets its gradient, parameters frozen
    for p in net.parameters():
        p.requires_grad_(False)
    xi = x.clone().requires_grad_()
    tm(xi).sum().backward()
    xe = x.clone().requires_grad_()
    net(xe).sum().backward()
    np.testing.assert_allclose(xi.grad.numpy(), xe.grad.numpy(), rtol=1e-6, atol=1e-7)


class _Gate(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return -x


class _Cell(nn.Module):
    def __init__(self, gate=None):
        super().__init__()
        self.dg = gate if gate is not None else _Gate()
        self.linear = nn.Linear(4, 4)

    def forward(self, x, h):
        new_h = fiamma.tanh(self.dg(self.linear(x)) + h)
        return new_h, new_h


def test_traced_module_exposes_the_submodules_it_ran():
    """``traced.dg`` is the submodule traced on the inputs it got in the trace (PyTorch's
    TracedModule keeps its submodules); one the trace did not run is named in the error."""
    cell = _Cell()
    x, h = fiamma.rand(3, 4), fiamma.rand(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fiamma.jit.TracerWarning)
        tm = fiamma.jit.trace(cell, (x, h))
    assert isinstance(tm.linear, fiamma.jit.TracedModule)
    assert "addmm" in tm.linear.code
    assert tm.dg is tm.dg and "def forward" in tm.dg.code
    with fiamma.no_grad():
        _same(tm.linear(x), cell.linear(x))
    with pytest.raises(AttributeError, match=r"submodules its trace ran: \['dg', 'linear'\]"):
        tm.nothing


def test_traced_module_inside_a_trace_is_inlined():
    """A traced module kept as an attribute and called in another trace is recorded op by op
    with its weights as the outer graph's initializers (it used to come out as a constant)."""
    class Loop(nn.Module):
        def __init__(self):
            super().__init__()
            inner = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
            self.cell = fiamma.jit.trace(inner, (fiamma.rand(3, 4),))

        def forward(self, xs):
            h = fiamma.zeros(3, 4)
            for i in range(xs.size(0)):
                h = self.cell(xs[i] + h)
            return h

    m = Loop()
    xs = fiamma.rand(5, 3, 4)
    tm = fiamma.jit.trace(m, (xs,))
    assert "cell.0.weight" in tm.graph.params
    assert sum(n.op == "addmm" for n in tm.graph.nodes) == 5
    xs2 = fiamma.rand(5, 3, 4)
    with fiamma.no_grad():
        _same(tm(xs2), m(xs2))
    for p in m.cell.graph.params.values():   # frozen weights: still recorded, not baked in
        p.requires_grad_(False)
    tm2 = fiamma.jit.trace(m, (xs,))
    assert sum(n.op == "addmm" for n in tm2.graph.nodes) == 5
    _same(tm2(xs2), m(xs2))


def test_script_module_code_before_a_call_is_its_forward_source():
    scripted = fiamma.jit.script(_Gate())
    code = scripted.code
    assert code.startswith("def forward(self, x):") and "if x.sum() > 0:" in code
    cell = fiamma.jit.script(_Cell(scripted))
    assert "fiamma.tanh(self.dg(self.linear(x)) + h)" in cell.code


def test_traced_module_prints_the_module_hierarchy():
    """PyTorch's printout of a traced module: the modules with their ``original_name``."""
    x, h = fiamma.rand(3, 4), fiamma.rand(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fiamma.jit.TracerWarning)
        tm = fiamma.jit.trace(_Cell(), (x, h))
    assert tm.original_name == "_Cell"
    assert repr(tm) == ("_Cell(\n"
                        "  original_name=_Cell\n"
                        "  (dg): _Gate(original_name=_Gate)\n"
                        "  (linear): Linear(original_name=Linear)\n"
                        ")")
    assert repr(fiamma.jit.trace(lambda a: a * 2, (x,))) == "TracedModule(inputs=1, nodes=1)"


def test_freeze_optimize_for_inference_and_onednn_switch():
    """The tuning guide's inference recipe: trace, freeze, run; the errors are PyTorch's."""
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
    x = fiamma.rand(2, 3, 8, 8)
    fiamma.jit.enable_onednn_fusion(True)
    assert fiamma.jit.onednn_fusion_enabled()
    fiamma.jit.enable_onednn_fusion(False)
    with fiamma.no_grad():
        frozen = fiamma.jit.freeze(fiamma.jit.trace(net, (x,)))
        _same(frozen(x), net(x))
    with pytest.raises(RuntimeError, match="Freezing expects a ScriptModule"):
        fiamma.jit.freeze(net)
    scripted = fiamma.jit.script(nn.Linear(4, 4))
    with pytest.raises(RuntimeError, match="only implemented for modules in eval mode"):
        fiamma.jit.freeze(scripted)
    opt = fiamma.jit.optimize_for_inference(scripted)
    assert not opt.training
    with pytest.raises(RuntimeError, match="optimize_for_inference expects a ScriptModule"):
        fiamma.jit.optimize_for_inference(net)


class _NoGradForward(nn.Module):
    """A model whose forward runs under ``@no_grad()`` (segment-anything's SamOnnxModel)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)

    @fiamma.no_grad()
    def forward(self, x, scale):
        with fiamma.set_grad_enabled(False):
            y = self.lin(x) * scale
        with fiamma.inference_mode():
            return y.relu() + x[:, :2]


@pytest.mark.parametrize("outer", ["none", "no_grad", "inference_mode"])
def test_trace_records_ops_run_under_no_grad(outer):
    # ops under no_grad / set_grad_enabled(False) / inference_mode, in the forward or around
    # the trace call, are in the graph: the trace of such a forward was all constants before
    m = _NoGradForward().eval()
    x, s = randn(4, 3), fiamma.tensor(2.0)
    ctx = {"none": fiamma.enable_grad, "no_grad": fiamma.no_grad,
           "inference_mode": fiamma.inference_mode}[outer]
    with ctx():
        tm = fiamma.jit.trace(m, (x, s))
        assert fiamma.is_grad_enabled() == (outer == "none")
    ops = [n.op for n in tm.graph.nodes]
    assert "relu" in ops and "mul" in ops, ops
    assert not [k for k in tm.graph.params if k.startswith("const")], tm.graph
    x2, s2 = randn(6, 3, seed=3), fiamma.tensor(-0.5)
    _same(tm(x2, s2), m(x2, s2))
    assert fiamma.is_grad_enabled()


def test_jit_interface_declares_an_ordinary_class():
    # MONAI's DiNTS declares @torch.jit.interface classes and subclasses them
    @fiamma.jit.interface
    class Stem(fiamma.nn.Module):
        def forward(self, x):
            pass

    class Impl(Stem):
        def forward(self, x):
            return x * 2

    assert Impl()(fiamma.ones(2)).tolist() == [2.0, 2.0]


def test_jit_isinstance_checks_container_elements():
    import typing

    T = fiamma.Tensor
    assert fiamma.jit.isinstance(fiamma.ones(1), T)
    assert fiamma.jit.isinstance([fiamma.ones(1)], typing.List[T])
    assert not fiamma.jit.isinstance([fiamma.ones(1), 2], typing.List[T])
    assert fiamma.jit.isinstance({"a": [1]}, typing.Dict[str, typing.List[int]])
    assert not fiamma.jit.isinstance({"a": 1}, typing.Dict[str, str])
    assert fiamma.jit.isinstance(None, typing.Optional[T])
    assert fiamma.jit.isinstance((1, "a"), typing.Tuple[int, str])
    assert not fiamma.jit.isinstance((1, "a", 2), typing.Tuple[int, str])
    assert fiamma.jit.isinstance((1, 2, 3), typing.Tuple[int, ...])
    assert fiamma.jit.isinstance(3, int | None) and not fiamma.jit.isinstance("x", list[int])
    with pytest.raises(TypeError, match="fiamma.jit.isinstance: unsupported type"):
        fiamma.jit.isinstance({1}, typing.Set[int])
    # the module's own code still sees the builtin isinstance
    assert "isinstance" not in vars(fiamma.jit)
