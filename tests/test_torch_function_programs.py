"""Programs using PyTorch's ``__torch_function__`` protocol (the "Extending torch" docs'
patterns: a tensor-like ``ScalarTensor`` with a HANDLED_FUNCTIONS table, a ``MetadataTensor``
wrapper, a logging Tensor subclass calling ``super().__torch_function__``, TorchFunctionModes,
``nn.Parameter``'s opt-out) run under ``python -m fiamma.run``; the parity variant runs the same
program under PyTorch and compares every printed line."""

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = textwrap.dedent('''
    import functools
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    HANDLED = {}

    class ScalarTensor:
        def __init__(self, n, value):
            self._n, self._value = n, value

        def __repr__(self):
            return f"ScalarTensor(N={self._n}, value={self._value})"

        def tensor(self):
            return self._value * torch.eye(self._n)

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func not in HANDLED or not all(issubclass(t, (torch.Tensor, ScalarTensor))
                                              for t in types):
                return NotImplemented
            return HANDLED[func](*args, **(kwargs or {}))

    def implements(torch_function):
        def decorator(func):
            functools.update_wrapper(func, torch_function)
            HANDLED[torch_function] = func
            return func
        return decorator

    @implements(torch.mean)
    def mean(x):
        return float(x._value) / x._n

    @implements(torch.add)
    def add(a, b):
        if isinstance(a, ScalarTensor) and isinstance(b, ScalarTensor):
            return ScalarTensor(a._n, a._value + b._value)
        a = a.tensor() if isinstance(a, ScalarTensor) else a
        b = b.tensor() if isinstance(b, ScalarTensor) else b
        return torch.add(a, b)

    s = ScalarTensor(2, 2)
    print("mean", torch.mean(ScalarTensor(5, 2)))
    print("add", torch.add(s, s))
    print("add_tensor", torch.add(s, torch.tensor([[1.0, 1.0], [1.0, 1.0]])).tolist())
    try:
        torch.sum(s)
    except TypeError as e:
        print("sum TypeError", str(e).splitlines()[0])

    class MetadataTensor:
        def __init__(self, data, metadata=None):
            self._t = torch.as_tensor(data)
            self._metadata = metadata

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            metadatas = [a._metadata for a in args if hasattr(a, "_metadata")]
            args = [getattr(a, "_t", a) for a in args]
            return MetadataTensor(func(*args, **(kwargs or {})), metadatas[0])

    m = torch.mul(torch.tensor([[1, 2], [1, 2]]), MetadataTensor([[1, 2], [3, 4]], "owner"))
    print("metadata", type(m).__name__, m._metadata, m._t.tolist())

    class LoggingTensor(torch.Tensor):
        log = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            LoggingTensor.log.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs)

    x = torch.ones(2, 3).as_subclass(LoggingTensor)
    y = (x + 1) * 2
    z = y.sum(0)
    w = F.relu(torch.cat([x, y]))
    print("subclass", type(y).__name__, type(z).__name__, type(w).__name__, LoggingTensor.log)
    print("repr", z)
    LoggingTensor.log.clear()
    out = torch.nn.Linear(3, 2)(x)
    print("linear", type(out).__name__, LoggingTensor.log)
    parts = torch.split(x, 1)
    print("split", type(parts).__name__, [type(p).__name__ for p in parts])
    print("max", type(x.max(1).values).__name__, type(x.max(1).indices).__name__)
    print("shape", type(x.shape).__name__, type(x.T).__name__, type(x[0]).__name__)

    class Recorder(TorchFunctionMode):
        def __init__(self, tag, log):
            super().__init__()
            self.tag, self.log = tag, log

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.log.append(f"{self.tag}:{func.__name__}")
            return func(*args, **(kwargs or {}))

    log = []
    with Recorder("outer", log):
        with Recorder("inner", log):
            a = torch.zeros(2)
            b = a + 1
            F.linear(torch.ones(1, 2), torch.ones(3, 2))
    print("modes", log)
    log = []
    with Recorder("m", log):
        lin = torch.nn.Linear(3, 2)
    log = []
    with Recorder("m", log):
        lin(torch.ones(1, 3))
    print("module under mode", log)

    p = torch.nn.Parameter(torch.ones(2))
    print("parameter", type(p * 2).__name__, type(p.detach()).__name__, type(p[0]).__name__)

    class MyParam(torch.nn.Parameter):
        pass

    print("param subclass", type(MyParam(torch.ones(2))).__name__,
          type(MyParam(torch.ones(2)) + 1).__name__)

    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    s2 = leaf.as_subclass(LoggingTensor)
    (s2 * s2).sum().backward()
    print("grad", leaf.grad.tolist(), type(leaf.grad).__name__, s2.is_leaf)

    class Refuse(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return NotImplemented

    r = torch.ones(2).as_subclass(Refuse)
    try:
        torch.add(r, 1)
    except TypeError as e:
        print("refuse", str(e).splitlines()[0])
    try:
        r + 1
    except TypeError as e:
        print("refuse op", e)
    with torch._C.DisableTorchFunctionSubclass():
        print("disabled", type(torch.ones(2).as_subclass(LoggingTensor) + 1).__name__)
    print("has", torch.overrides.has_torch_function((x,)),
          torch.overrides.has_torch_function((torch.ones(1),)))
    print("names", torch.overrides.resolve_name(torch.add),
          torch.overrides.resolve_name(F.linear))
    made = torch.Tensor._make_subclass(LoggingTensor, torch.ones(2), True)
    print("make_subclass", type(made).__name__, made.requires_grad)
''')


# more subclass cases: keyword arguments, properties, constructors, indexing, autograd, modules
PROGRAM2 = PROGRAM.split("HANDLED = {}")[0] + textwrap.dedent('''
class S(torch.Tensor):
    pass

x = torch.arange(6.).reshape(2, 3).as_subclass(S)
y = torch.ones(2, 3)
def t(v): return type(v).__name__
print("kw", t(torch.sum(x, dim=0)), t(F.softmax(x, dim=-1)), t(torch.where(x > 2, x, y)))
print("stack", t(torch.stack((x, y))), t(torch.stack((y, x))), [t(c) for c in x.chunk(2)])
print("props", t(x.T), t(x.mT), t(x.data), t(x.real), t(x.grad))
print("meta", x.shape, x.dtype, x.ndim, x.is_leaf)
print("new", t(x.new_zeros(2)), t(x.new_tensor([1.])), t(x.clone()), t(x.detach()))
print("to", t(x.to(torch.float64)))
print("cmp", t(x == 1), t(x > y), t(x.bool()), (x == x).all().item(), t(x.argmax()))
print("idx", t(x[x > 3]), t(x[0, 1]))
print("math", t(torch.exp(x)), t(x.exp()), t(abs(-x)), t(x ** 2), t(2 ** x), t(x // 2), t(x % 2))
print("unary", t(-x), t(+x), t(x.neg()), float(x.sum()), int(x[1, 1]), x.tolist())
print("reduce", t(x.max()), t(torch.max(x, dim=1).values), t(x.mean()), t(x.std()))
z = x.clone()
z[0, 0] = 5.
print("setitem", t(z), z.tolist())
z.mul_(2)
print("inplace", t(z), z.tolist())
w = S(torch.ones(2))
print("ctor", t(w), w.is_leaf, w.requires_grad)
leaf = torch.ones(2).as_subclass(S).requires_grad_()
out = (leaf * 3).sum()
out.backward()
print("grad", t(leaf.grad), leaf.grad.tolist(), t(out), out.grad_fn is not None)
m = torch.nn.Linear(3, 2)
with torch.no_grad():
    m.weight.fill_(1.); m.bias.fill_(0.)
o = m(x)
print("module", t(o), o.tolist())
print("F", t(F.relu(x)), t(F.gelu(x)), t(F.layer_norm(x, (3,))), t(F.dropout(x, 0.0)))
print("pad", t(F.pad(x, (1, 1))))
print("misc", t(torch.cat([y, x], 0)), t(torch.einsum('ij->j', x)), t(torch.matmul(y, x.T)))
print("mm", t(x @ y.T))
print("cast", t(x.float()), t(x.int()), t(x.contiguous()), t(x.view(-1)), t(x.flatten()))
print("unsqueeze", t(x.unsqueeze(0)))
print("numpy", type(x.numpy()).__name__, x.numpy().tolist())
print("iter", [t(r) for r in x], len(x))
print("is", isinstance(x, torch.Tensor), torch.is_tensor(x))
p = torch.nn.Parameter(torch.ones(2))
print("param", t(x[0, :2] + p))
''')


def _run(cmd, tmp_path, program=PROGRAM):
    prog = tmp_path / "prog.py"
    prog.write_text(program)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([sys.executable, *cmd, str(prog)], capture_output=True, text=True,
                       timeout=300, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.splitlines()


def test_torch_function_program_runs_under_fiamma(tmp_path):
    pytest.importorskip("fiamma.nn")
    out = dict(line.split(" ", 1) for line in _run(["-m", "fiamma.run"], tmp_path))
    assert out["mean"] == "0.4"
    assert out["add"] == "ScalarTensor(N=2, value=4)"
    assert out["subclass"] == ("LoggingTensor LoggingTensor LoggingTensor "
                               "['add', 'mul', 'sum', 'cat', 'relu']")
    assert out["linear"] == "LoggingTensor ['linear']"
    assert out["parameter"] == "Tensor Tensor Tensor"
    assert out["grad"] == "[2.0, 4.0] Tensor False"
    assert out["modes"].startswith("['inner:zeros', 'outer:zeros', 'inner:add', 'outer:add'")


@pytest.mark.parity
def test_torch_function_program_matches_pytorch(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("fiamma.nn")
    theirs = _run([], tmp_path)
    ours = _run(["-m", "fiamma.run"], tmp_path)
    assert ours == theirs


@pytest.mark.parity
def test_subclass_cases_match_pytorch(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("fiamma.nn")
    theirs = _run([], tmp_path, PROGRAM2)
    ours = _run(["-m", "fiamma.run"], tmp_path, PROGRAM2)
    assert ours == theirs


def test_runner_turns_the_protocol_on_for_tensor_likes_only(tmp_path):
    """Under fiamma.run a class defining __torch_function__ turns the protocol on when it is
    created; a TorchFunctionMode class does not (its functions go back after the mode)."""
    pytest.importorskip("fiamma.nn")
    program = textwrap.dedent('''
        import torch
        from torch.overrides import TorchFunctionMode
        from fiamma import _torch_function as TF

        class M(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        with M():
            pass
        print("after mode", TF._active["sticky"], TF._active["on"])

        class Like:
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return "handled"

        print("after tensor-like", TF._active["sticky"], torch.add(Like(), 1))
    ''')
    out = _run(["-m", "fiamma.run"], tmp_path, program)
    assert out == ["after mode False 0", "after tensor-like True handled"]
