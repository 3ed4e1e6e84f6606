"""Programs using PyTorch's ``__torch_dispatch__`` (the "Extending PyTorch" docs' patterns: a
logging dispatch mode over a training step, a logging wrapper subclass trained with an
optimizer, a quantised-like weight wrapper converted and loaded through the
``torch.__future__`` swap path, as PyTorch's swap_tensors recipe does) run under
``python -m fiamma.run``; the parity variants run them under PyTorch and compare the printed
ATen op sequences.

fiamma reports the forward ops and the optimizer's ops as PyTorch does; backward passes run
fiamma's derivative formulas, which are written in ordinary ops, so their sequences differ
where PyTorch has fused backward kernels (``nll_loss_backward``,
``_log_softmax_backward_data``, a reduction's ``expand``): the parity tests compare the forward
and step sequences exactly and the backward ones on the ops both compute the same way (the
matrix products, ``threshold_backward``, the seed ``ones_like``)."""

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TRAINING = textwrap.dedent('''
    import sys
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils._pytree import tree_map
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpLog(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not str(func).startswith("profiler."):
                self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    LOG = []

    class Logged(torch.Tensor):
        __torch_function__ = torch._C._disabled_torch_function_impl

        @staticmethod
        def __new__(cls, elem, requires_grad=False):
            r = torch.Tensor._make_wrapper_subclass(
                cls, elem.size(), strides=elem.stride(), dtype=elem.dtype,
                device=elem.device, requires_grad=requires_grad)
            r.elem = elem
            return r

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            def unwrap(e):
                return e.elem if isinstance(e, cls) else e

            def wrap(e):
                return cls(e) if isinstance(e, torch.Tensor) else e

            out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
            LOG.append(str(func))
            return tree_map(wrap, out)

    def show(phase, ops):
        print(phase + ": " + " ".join(ops))
        ops.clear()

    torch.manual_seed(0)
    x = torch.randn(6, 4)
    target = torch.tensor([0, 2, 1, 1, 0, 2])

    # a dispatch mode over a training step of a module
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(2):
        with OpLog() as log:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), target)
            show("mode forward", log.ops)
            loss.backward()
            show("mode backward", log.ops)
            opt.step()
            show("mode step", log.ops)

    # a wrapper subclass holding the weights, trained with Adam
    w1 = Logged(torch.randn(8, 4) * 0.3, requires_grad=True)
    b1 = Logged(torch.zeros(8), requires_grad=True)
    w2 = Logged(torch.randn(3, 8) * 0.3, requires_grad=True)
    opt = torch.optim.Adam([w1, b1, w2], lr=0.01)
    xs = Logged(x)
    losses = []
    for step in range(3):
        opt.zero_grad()
        out = F.linear(F.relu(F.linear(xs, w1, b1)), w2)
        loss = F.mse_loss(out, Logged(torch.zeros(6, 3)))
        show("sub forward", LOG)
        loss.backward()
        show("sub backward", LOG)
        opt.step()
        show("sub step", LOG)
        losses.append(loss.elem.item())
    print("types:", type(loss).__name__, type(w1.grad).__name__, w1.is_leaf)
    print("decreasing:", losses[0] > losses[1] > losses[2])
''')

SWAP = textwrap.dedent('''
    import torch
    import torch.nn as nn

    aten = torch.ops.aten

    class Int8Weight(torch.Tensor):
        """A weight kept as int8 codes and a scale (converting it converts the codes' dequantized
        copy only through the ops it handles)."""

        @staticmethod
        def __new__(cls, codes, scale):
            return torch.Tensor._make_wrapper_subclass(
                cls, codes.shape, dtype=torch.float32 if codes.dtype == torch.int8
                else codes.dtype, device=codes.device, strides=codes.stride())

        def __init__(self, codes, scale):
            self.codes, self.scale = codes, scale

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is aten.detach.default:
                return cls(args[0].codes, args[0].scale)
            if func is aten._to_copy.default:
                return cls(args[0].codes.to(kwargs.get("dtype", args[0].codes.dtype)),
                           args[0].scale)
            raise NotImplementedError(f"Int8Weight: {func}")

    def quantize(w):
        scale = w.abs().max().item() / 127
        return Int8Weight((w / scale).round().to(torch.int8), scale)

    lin = nn.Linear(4, 2)
    w = nn.Parameter(quantize(lin.weight.detach()))
    print("parameter:", isinstance(w, nn.Parameter), type(w).__name__, w.requires_grad)
    lin.weight = w

    before = id(lin.weight)
    lin.half()
    print("set-data path:", id(lin.weight) == before, lin.weight.dtype,
          lin.weight.codes.dtype, lin.bias.dtype)

    torch.__future__.set_swap_module_params_on_conversion(True)
    lin = nn.Linear(4, 2)
    lin.weight = nn.Parameter(quantize(lin.weight.detach()))
    before = id(lin.weight)
    lin.half()
    print("swap path:", id(lin.weight) == before, lin.weight.dtype, lin.weight.codes.dtype,
          lin.bias.dtype)

    @classmethod
    def load_hook(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.module_load:
            dest, src = args
            return quantize(src)
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))

    Int8Weight.__torch_function__ = load_hook

    with torch.device("meta"):
        skeleton = nn.Linear(4, 2)
    skeleton.weight = nn.Parameter(Int8Weight(torch.zeros(2, 4, dtype=torch.int8,
                                                          device="meta"), 1.0))
    ids = id(skeleton.weight), id(skeleton.bias)
    source = nn.Linear(4, 2)
    skeleton.load_state_dict(source.state_dict(), assign=True)
    sw = skeleton.weight
    print("loaded:", (id(skeleton.weight), id(skeleton.bias)) == ids, type(sw).__name__,
          sw.codes.dtype, sw.codes.device.type, skeleton.bias.device.type)
    err = (sw.codes.float() * sw.scale - source.weight.detach()).abs().max().item()
    print("quantization error small:", err <= sw.scale / 2 + 1e-6)
    torch.__future__.set_swap_module_params_on_conversion(False)
''')


EMBED = textwrap.dedent('''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils._pytree import tree_map
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpLog(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    class Boxed(torch.Tensor):
        __torch_function__ = torch._C._disabled_torch_function_impl

        @staticmethod
        def __new__(cls, elem, requires_grad=False):
            r = torch.Tensor._make_wrapper_subclass(
                cls, elem.shape, strides=elem.stride(), dtype=elem.dtype, device=elem.device,
                requires_grad=requires_grad)
            r.elem = elem
            return r

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            def unwrap(e):
                return e.elem if isinstance(e, cls) else e

            out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
            return tree_map(lambda e: cls(e) if isinstance(e, torch.Tensor) else e, out)

    torch.manual_seed(0)
    emb, drop = nn.Embedding(6, 4), nn.Dropout(0.25)
    idx = torch.tensor([[1, 4], [5, 1]])
    with OpLog() as log:
        y = drop(emb(idx))
    print("forward:", " ".join(log.ops))
    weight = Boxed(torch.randn(6, 4), requires_grad=True)
    out = F.dropout(F.embedding(Boxed(idx), weight), 0.25)
    out.sum().backward()
    print("boxed:", type(out).__name__, type(weight.grad).__name__, tuple(weight.grad.shape))
    print("rows without lookups get no gradient:",
          bool((weight.grad.elem[[0, 2, 3]] == 0).all()))
''')


INPLACE = textwrap.dedent('''
    import torch
    import torch.nn as nn
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpLog(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(inplace=True), nn.Linear(4, 1))
    x = torch.randn(5, 3)
    with OpLog() as log:
        y = model(x)
    print("forward:", " ".join(log.ops))
    with OpLog():
        y.sum().backward()
    g = model[0].weight.grad.clone()
    model.zero_grad()
    model(x).sum().backward()
    print("same gradients:", torch.equal(g, model[0].weight.grad))
''')


def _run(code, tmp_path, name, torch_real=False):
    path = tmp_path / f"{name}.py"
    path.write_text(code)
    env = dict(os.environ)
    if torch_real:
        cmd = [sys.executable, str(path)]
        cwd = str(tmp_path)
        env.pop("PYTHONPATH", None)
    else:
        cmd = [sys.executable, "-m", "fiamma.run", str(path)]
        cwd = ROOT
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.splitlines()


def _phases(lines):
    out = {}
    for line in lines:
        key, _, rest = line.partition(": ")
        out.setdefault(key, []).append(rest.split() if " backward" in key or " forward" in key
                                       or " step" in key else rest)
    return out


@pytest.fixture(scope="module")
def fiamma_training(tmp_path_factory):
    return _phases(_run(TRAINING, tmp_path_factory.mktemp("dispatch"), "training"))


def test_training_program_runs(fiamma_training):
    p = fiamma_training
    assert p["types"] == ["Logged Logged True"]
    assert p["decreasing"] == ["True"]
    fwd = p["mode forward"][0]
    assert fwd == ["aten.t.default", "aten.addmm.default", "aten.relu.default",
                   "aten.detach.default", "aten.t.default", "aten.addmm.default",
                   "aten._log_softmax.default", "aten.detach.default",
                   "aten.nll_loss_forward.default"]
    # the first SGD step creates the momentum buffers (a copy of each gradient)
    assert p["mode step"][0] == ["aten.clone.default", "aten.detach.default",
                                 "aten.add_.Tensor"] * 4
    assert p["mode step"][1] == ["aten.mul_.Tensor", "aten.add_.Tensor",
                                 "aten.add_.Tensor"] * 4
    bwd = p["mode backward"][0]
    assert bwd[0] == "aten.ones_like.default" and bwd.count("aten.mm.default") == 3
    assert "aten.threshold_backward.default" in bwd
    assert p["sub forward"][0][:4] == ["aten.t.default", "aten.addmm.default",
                                       "aten.relu.default", "aten.detach.default"]


def test_swap_program_runs(tmp_path):
    lines = _run(SWAP, tmp_path, "swap")
    assert [ln.replace("torch.", "fiamma.") for ln in lines] == [
        "parameter: True Int8Weight True",
        "set-data path: True fiamma.float16 fiamma.int8 fiamma.float16",
        "swap path: True fiamma.float16 fiamma.float16 fiamma.float16",
        "loaded: True Int8Weight fiamma.int8 cpu cpu",
        "quantization error small: True",
    ]


@pytest.mark.parity
def test_training_program_parity(fiamma_training, tmp_path):
    pytest.importorskip("torch")
    t = _phases(_run(TRAINING, tmp_path, "training_torch", torch_real=True))
    f = fiamma_training
    for key in ("mode forward", "sub forward"):
        assert f[key] == t[key], key
    # the optimizers' ops (the first SGD step's momentum buffers: clone and detach in either
    # order, as fiamma's SGD copies the gradient first)
    assert f["mode step"][1:] == t["mode step"][1:]
    assert sorted(f["mode step"][0]) == sorted(t["mode step"][0])
    assert [sorted(s) for s in f["sub step"]] == [sorted(s) for s in t["sub step"]]
    for key in ("mode backward", "sub backward"):
        for fo, to in zip(f[key], t[key]):
            assert fo[0] == to[0] == "aten.ones_like.default"
            for op in ("aten.mm.default", "aten.threshold_backward.default"):
                assert fo.count(op) == to.count(op), (key, op)
    for key in ("types", "decreasing"):
        assert f.get(key) == t.get(key)


@pytest.mark.parity
def test_swap_program_parity(tmp_path):
    pytest.importorskip("torch")
    f = _run(SWAP, tmp_path, "swap_f")
    t = _run(SWAP, tmp_path, "swap_t", torch_real=True)
    assert [ln.replace("fiamma.", "torch.") for ln in f] == t


def test_embedding_dropout_program(tmp_path):
    lines = _run(EMBED, tmp_path, "embed")
    assert lines == [
        "forward: aten.embedding.default aten.empty_like.default aten.bernoulli_.float "
        "aten.div_.Scalar aten.mul.Tensor",
        "boxed: Boxed Boxed (6, 4)",
        "rows without lookups get no gradient: True",
    ]


@pytest.mark.parity
def test_embedding_dropout_program_parity(tmp_path):
    pytest.importorskip("torch")
    assert _run(EMBED, tmp_path, "embed_f") == _run(EMBED, tmp_path, "embed_t",
                                                     torch_real=True)


def test_inplace_relu_program(tmp_path):
    assert _run(INPLACE, tmp_path, "inplace") == [
        "forward: aten.t.default aten.addmm.default aten.relu_.default aten.detach.default "
        "aten.t.default aten.addmm.default",
        "same gradients: True",
    ]


@pytest.mark.parity
def test_inplace_relu_program_parity(tmp_path):
    pytest.importorskip("torch")
    assert _run(INPLACE, tmp_path, "inplace_f") == _run(INPLACE, tmp_path, "inplace_t",
                                                         torch_real=True)
