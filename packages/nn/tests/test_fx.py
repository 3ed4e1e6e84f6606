"""fiamma.fx: tracing real models, the generated code, graph editing, Proxy semantics."""

import copy
import math
import operator
import pickle
from collections import Counter

import fx_models as M
import nn_models
import numpy as np
import pytest

import fiamma
import fiamma.fx as fx
import fiamma.nn as nn
import fiamma.nn.functional as F
from fiamma.nn.functional import gelu as imported_gelu


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def scaled_by_len(x):
    return x * len(x)   # len() of a Proxy cannot be traced: wrapped below


fx.wrap("scaled_by_len")


# ---- tracing real models -----------------------------------------------------------------

def test_mlp_trace_matches_module_and_shares_parameters():
    fiamma.manual_seed(0)
    m = M.MLP().eval()
    gm = fx.symbolic_trace(m)
    x = fiamma.randn(5, 16)
    _close(gm(x), m(x), 0)
    assert list(gm.state_dict()) == list(m.state_dict())
    assert all(a is b for a, b in zip(gm.parameters(), m.parameters()))
    ops = [(n.op, n.target if isinstance(n.target, str) else n.target.__name__)
           for n in gm.graph.nodes]
    assert ops == [("placeholder", "x"), ("call_module", "layers.0"),
                   ("call_function", "relu"), ("call_module", "dropout"),
                   ("call_module", "layers.1"), ("call_function", "relu"),
                   ("call_module", "dropout"), ("call_module", "layers.2"),
                   ("call_function", "log_softmax"), ("output", "output")]


def test_resnet18_trace_matches_in_eval_and_train_and_gradients():
    fiamma.manual_seed(0)
    m = M.randomize_bn(nn_models.resnet18(nn, num_classes=10)).eval()
    gm = fx.symbolic_trace(m)
    x = fiamma.randn(2, 3, 32, 32)
    _close(gm(x), m(x), 1e-6)
    counts = Counter(type(gm.get_submodule(n.target)).__name__
                     for n in gm.graph.nodes if n.op == "call_module")
    assert counts["Conv2d"] == 20 and counts["BatchNorm2d"] == 20 and counts["Linear"] == 1
    # a GraphModule trains like the module: same gradients, shared parameters
    m.train()
    gm.train()
    m2 = copy.deepcopy(m)
    gm2 = fx.symbolic_trace(m2)
    x.requires_grad_(True)
    gm2(x).square().sum().backward()
    m(x).square().sum().backward()
    for (name, p), p2 in zip(m.named_parameters(), m2.parameters()):
        _close(p2.grad, p.grad, 1e-4)
    _close(gm2.bn1.running_mean, m.bn1.running_mean, 1e-6)


def test_transformer_block_with_concrete_args():
    fiamma.manual_seed(0)
    m = M.SelfAttentionBlock().eval()
    x = fiamma.randn(2, 5, 16)
    # data-independent branches cannot be traced without fixing them
    with pytest.raises(fx.TraceError, match="control flow"):
        fx.symbolic_trace(M.SelfAttentionBlock(), concrete_args={"residual": fx.PH,
                                                                  "mask": None})
    gm = fx.symbolic_trace(m, concrete_args={"mask": None, "residual": True})
    _close(gm(x), m(x), 1e-6)
    _close(gm(x, None, True), m(x), 1e-6)
    with pytest.raises(AssertionError, match="residual has been specialized"):
        gm(x, None, False)
    with pytest.raises(AssertionError, match="mask has been specialized"):
        gm(x, fiamma.zeros(5, 5, dtype=fiamma.bool))
    # a GraphModule traces again (its guards are recorded, not run)
    gm2 = fx.symbolic_trace(gm)
    assert sorted(n.name for n in gm2.graph.nodes) == sorted(n.name for n in gm.graph.nodes)
    _close(gm2(x), m(x), 1e-6)
    _close(pickle.loads(pickle.dumps(gm))(x), m(x), 1e-6)
    gm_nores = fx.symbolic_trace(m, concrete_args={"mask": None, "residual": False})
    _close(gm_nores(x, None, False), m(x, residual=False), 1e-6)
    assert "math.sqrt" in gm.code and "fiamma.softmax" in gm.code


def test_conv_bn_net_trace_and_recompile_after_edit():
    m = M.randomize_bn(M.ConvBNNet()).eval()
    gm = fx.symbolic_trace(m)
    x = fiamma.randn(2, 3, 8, 8)
    _close(gm(x), m(x), 0)
    # edit: the last relu becomes a sigmoid
    relus = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is fiamma.relu]
    assert len(relus) == 1
    with gm.graph.inserting_after(relus[0]):
        sig = gm.graph.call_function(fiamma.sigmoid, relus[0].args)
    relus[0].replace_all_uses_with(sig)
    gm.graph.erase_node(relus[0])
    gm.graph.lint()
    gm.recompile()
    assert "fiamma.sigmoid" in gm.code and "fiamma.relu" not in gm.code
    y = F.relu(m.bn1(m.conv1(x)))
    y = fiamma.sigmoid(m.bn2(m.conv2(y)) + y)
    _close(gm(x), m.fc(fiamma.flatten(m.pool(y), 1)), 1e-6)


def test_function_root_and_imported_names_and_constants():
    const = fiamma.arange(4.0)

    def f(x, y):
        z = fiamma.cat([x, y], dim=1)
        z = imported_gelu(z) + const         # a name imported with `from ... import`
        return F.relu(z).sum(dim=1, keepdim=True), z.shape[1]

    gm = fx.symbolic_trace(f)
    x, y = fiamma.randn(3, 2), fiamma.randn(3, 2)
    out, n = gm(x, y)
    ref, n_ref = f(x, y)
    _close(out, ref, 0)
    assert n == n_ref == 4
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert fiamma.cat in targets and F.gelu in targets and F.relu in targets
    assert gm._tensor_constant0 is const
    # nothing stays patched after a trace
    assert fiamma.cat.__name__ == "cat" and not hasattr(fiamma.cat, "__fx_original__")
    assert imported_gelu is F.gelu and not hasattr(F.relu, "__fx_original__")


def test_wrap_records_a_call():
    gm = fx.symbolic_trace(lambda x: scaled_by_len(x) + 1)
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "call_function", "call_function",
                                              "output"]
    x = fiamma.randn(3, 2)
    _close(gm(x), x * 3 + 1, 1e-6)
    assert scaled_by_len.__name__ == "scaled_by_len" and not hasattr(scaled_by_len,
                                                                      "__fx_original__")
    with pytest.raises(NotImplementedError, match="top level"):
        fx.wrap("scaled_by_len")


# ---- Proxy semantics ---------------------------------------------------------------------

def test_proxy_operators_reflected_and_unary():
    def f(x, y):
        a = 1 - x + 2 * y - y / 2 + 3 ** x.clamp(max=1) + (x // 1) % 2
        b = -a + (+a) - abs(x) @ y.t()
        c = (x > 0) & (y <= 0) | ~(x == y) ^ (x != 1)
        return a, b, c, x[:, 0], x[..., None]

    gm = fx.symbolic_trace(f)
    x, y = fiamma.randn(3, 3), fiamma.randn(3, 3)
    for got, ref in zip(gm(x, y), f(x, y)):
        if got.dtype == fiamma.bool:
            assert bool((got == ref).all())
        else:
            _close(got, ref, 1e-5)
    ops = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert {operator.sub, operator.add, operator.mul, operator.truediv, operator.pow,
            operator.floordiv, operator.mod, operator.neg, operator.pos, operator.abs,
            operator.matmul, operator.gt, operator.le, operator.and_, operator.or_,
            operator.invert, operator.eq, operator.xor, operator.ne, operator.getitem} <= ops


def test_proxy_setitem_and_methods():
    def f(x):
        y = x.clone()
        y[0] = 0.0
        return y.view(-1).softmax(0)

    gm = fx.symbolic_trace(f)
    x = fiamma.randn(2, 3)
    _close(gm(x), f(x), 1e-6)
    assert any(n.target is operator.setitem for n in gm.graph.nodes)
    gm.graph.eliminate_dead_code()              # setitem has a side effect: kept
    _close(gm(x), f(x), 1e-6)


def test_proxy_iteration_len_and_bool_errors():
    def loop(x):
        return [r for r in x]

    with pytest.raises(fx.TraceError, match="Proxy object cannot be iterated"):
        fx.symbolic_trace(loop)
    with pytest.raises(RuntimeError, match="'len' is not supported"):
        fx.symbolic_trace(lambda x: len(x))
    with pytest.raises(fx.TraceError, match="symbolically traced variables cannot be used"):
        fx.symbolic_trace(lambda x: x if x.sum() > 0 else -x)
    with pytest.raises(fx.TraceError, match=r"with \*\*kw"):
        fx.symbolic_trace(lambda x, **kw: x)
    with pytest.raises(fx.TraceError, match="cannot be iterated"):
        fx.symbolic_trace(lambda x: fiamma.add(*x.chunk(2)))     # *-splat of a Proxy
    # a failed trace restores everything it patched
    assert not hasattr(fiamma.add, "__fx_original__")
    assert nn.Module.__call__.__name__ == "__call__"
    assert "__getattr__" in nn.Module.__dict__ and nn.Module.__getattr__.__name__ == "__getattr__"

    def unpack(x):
        a, b = x.chunk(2)          # unpacking a fixed count works
        return a - b

    gm = fx.symbolic_trace(unpack)
    x = fiamma.randn(4)
    _close(gm(x), x[:2] - x[2:], 1e-6)


def test_varargs_forward():
    class Sum(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x, *rest, scale=2.0):
            return self.lin(x) * scale + rest[0] - rest[1]

    m = Sum()
    gm = fx.symbolic_trace(m)
    assert "def forward(self, x, scale = 2.0, *rest):" in gm.code
    x, a, b = fiamma.randn(2, 3), fiamma.randn(2, 3), fiamma.randn(2, 3)
    _close(gm(x, 2.0, a, b), m(x, a, b), 1e-6)
    _close(fx.Interpreter(gm).run(x, 3.0, a, b), m(x, a, b, scale=3.0), 1e-6)
    gm2 = fx.symbolic_trace(lambda *xs: xs[0] * xs[1])
    _close(gm2(a, b), a * b, 0)


def test_create_arg_rejects_unknown_objects():
    class Opaque:
        pass
    with pytest.raises(NotImplementedError, match="argument of type Opaque"):
        fx.symbolic_trace(lambda x: fiamma.add(x, Opaque()))


# ---- Tracer customisation ----------------------------------------------------------------

def test_custom_leaf_modules_and_create_proxy():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return fiamma.tanh(self.lin(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.head = nn.Linear(4, 2)

        def forward(self, x):
            return self.head(self.block(x))

    class BlockLeaf(fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, Block) or super().is_leaf_module(m, qualname)

    class Counting(fx.Tracer):
        created = 0

        def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None,
                         proxy_factory_fn=None):
            Counting.created += 1
            return super().create_proxy(kind, target, args, kwargs, name, type_expr,
                                        proxy_factory_fn)

    net = Net()
    g = BlockLeaf().trace(net)
    assert [n.target for n in g.nodes if n.op == "call_module"] == ["block", "head"]
    g2 = Counting().trace(net)
    assert [n.target for n in g2.nodes if n.op == "call_module"] == ["block.lin", "head"]
    assert Counting.created == len(g2.nodes) - 1     # every node but the output
    gm = fx.GraphModule(net, g)
    x = fiamma.randn(3, 4)
    _close(gm(x), net(x), 0)


def test_parameters_used_directly_become_get_attr():
    class Affine(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(fiamma.randn(3, 3))
            self.inner = nn.Linear(3, 3)
            self.register_buffer("shift", fiamma.ones(3))

        def forward(self, x):
            return F.linear(x, self.w) @ self.inner.weight + self.shift + self.w.sum()

    m = Affine()
    gm = fx.symbolic_trace(m)
    attrs = [n.target for n in gm.graph.nodes if n.op == "get_attr"]
    assert attrs == ["w", "inner.weight", "shift"]   # one node per parameter
    x = fiamma.randn(2, 3)
    _close(gm(x), m(x), 1e-6)
    assert set(gm.state_dict()) == {"w", "inner.weight", "shift"}
    assert "shift" in dict(gm.named_buffers())


def test_param_shapes_constant():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 5)

        def forward(self, x):
            w = self.lin.weight
            return x @ w.t() + fiamma.zeros(w.shape[0]) + w.size(1)

    g_sym = fx.Tracer().trace(Net())
    g_const = fx.Tracer(param_shapes_constant=True).trace(net := Net())
    assert any(n.target is getattr for n in g_sym.nodes if n.op == "call_function")
    assert not any(n.target is getattr for n in g_const.nodes if n.op == "call_function")
    gm = fx.GraphModule(net, g_const)
    x = fiamma.randn(2, 3)
    _close(gm(x), net(x), 1e-6)


# ---- GraphModule ---------------------------------------------------------------------------

def test_graph_module_pickle_and_deepcopy():
    fiamma.manual_seed(1)
    m = M.randomize_bn(M.ConvBNNet()).eval()
    gm = fx.symbolic_trace(m)
    x = fiamma.randn(2, 3, 8, 8)
    ref = gm(x)
    gm2 = pickle.loads(pickle.dumps(gm))
    _close(gm2(x), ref, 0)
    assert type(gm2).__name__ == "ConvBNNet" and gm2.code == gm.code
    gm3 = copy.deepcopy(gm)
    _close(gm3(x), ref, 0)
    assert gm3.conv1.weight is not gm.conv1.weight
    assert gm3.graph is not gm.graph and gm3.graph.owning_module is gm3
    with fiamma.no_grad():
        gm3.conv1.weight.zero_()
    _close(gm(x), ref, 0)                     # the copy is independent
    assert type(gm3) is not type(gm)          # each instance has its own class
    gm3.recompile()
    assert "conv1" in gm.code


def test_graph_module_from_dict_root_and_submodule_management():
    g = fx.Graph()
    x = g.placeholder("x")
    h = g.call_module("enc.lin", (x,))
    s = g.get_attr("scale")
    out = g.call_function(operator.mul, (h, s))
    g.output(out)
    lin = nn.Linear(2, 2)
    scale = fiamma.tensor(3.0)
    gm = fx.GraphModule({"enc.lin": lin, "scale": scale}, g, "Scaled")
    assert type(gm).__name__ == "Scaled"
    xv = fiamma.randn(4, 2)
    _close(gm(xv), lin(xv) * 3, 1e-6)
    assert gm.add_submodule("extra.relu", nn.ReLU())
    gm.delete_all_unused_submodules()
    assert not hasattr(gm, "extra")
    assert gm.delete_submodule("enc.lin") and not gm.delete_submodule("enc.lin")
    with pytest.raises(RuntimeError, match="the dict root lacks"):
        fx.GraphModule({}, g)


# ---- Graph editing -------------------------------------------------------------------------

def test_graph_build_print_and_python_code():
    g = fx.Graph()
    x = g.placeholder("x")
    y = g.placeholder("input", default_value=2.0)
    a = g.call_method("to", (x,), {"dtype": fiamma.float64})
    b = g.call_function(fiamma.clamp, (a,), {"min": -math.inf, "max": y})
    g.output({"b": b, "pair": (a, [b, 1])})
    code = g.python_code("self").src
    assert "def forward(self, x, input_1 = 2.0):" in code
    assert "to = x.to(dtype = fiamma.float64)" in code
    assert "float('-inf')" in code
    assert "%x : [num_users=1] = placeholder[target=x]" in str(g)
    gm = fx.GraphModule(nn.Module(), g)
    xv = fiamma.tensor([-5.0, 0.5, 7.0])
    res = gm(xv)
    assert res["b"].dtype == fiamma.float64
    np.testing.assert_array_equal(res["b"].numpy(), [-5.0, 0.5, 2.0])
    assert res["pair"][1][1] == 1


def test_print_tabular(capsys):
    gm = fx.symbolic_trace(M.ConvBNNet())
    gm.graph.print_tabular()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["opcode", "name", "target", "args", "kwargs"]
    assert lines[2].split()[:3] == ["placeholder", "x", "x"]
    assert any(line.split()[:3] == ["call_module", "conv1", "conv1"] for line in lines)
    assert any("fiamma.nn.functional.relu" in line for line in lines)


def test_erase_dead_code_and_lint_errors():
    g = fx.Graph()
    x = g.placeholder("x")
    dead = g.call_function(fiamma.exp, (x,))
    inplace = g.call_method("add_", (x, 1))
    used = g.call_function(fiamma.neg, (x,))
    g.output(used)
    with pytest.raises(RuntimeError, match="still has 3 users"):
        g.erase_node(x)
    assert g.eliminate_dead_code()
    names = [n.name for n in g.nodes]
    assert dead.name not in names and inplace.name in names   # in-place calls are kept
    assert not g.eliminate_dead_code()
    # a use before its definition
    g2 = fx.Graph()
    a = g2.placeholder("a")
    o = g2.output(a)
    with g2.inserting_before(a):
        g2.call_function(fiamma.exp, (a,))
    with pytest.raises(RuntimeError, match="used before it is defined"):
        g2.lint()
    # get_attr of something the module does not have
    g3 = fx.Graph()
    g3.output(g3.get_attr("missing"))
    with pytest.raises(RuntimeError, match="does not have"):
        fx.GraphModule(nn.Module(), g3)
    del o


def test_node_api():
    g = fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(fiamma.relu, (x,))
    b = g.call_function(operator.add, (a, a), {"alpha": a} if False else {})
    g.output(b)
    assert list(a.users) == [b] and b.all_input_nodes == [a]
    assert a.next is b and b.prev is a
    c = g.call_function(fiamma.sigmoid, (x,))
    a.prepend(c)                                          # move c before a
    assert [n.name for n in g.nodes] == ["x", "sigmoid", "relu", "add", "output"]
    b.update_arg(1, c)
    assert b.args == (a, c) and c in b.all_input_nodes and set(a.users) == {b}
    changed = a.replace_all_uses_with(c)
    assert changed == [b] and b.args == (c, c) and not a.users
    a.meta["k"] = 1
    d = g.call_function(fiamma.tanh, (x,))
    a.replace_all_uses_with(d, propagate_meta=True)
    assert d.meta == {"k": 1}
    with pytest.raises(ValueError, match="op must be one of"):
        g.create_node("call", fiamma.relu)


def test_graph_module_error_names_the_node():
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(fiamma.matmul, (x, x)))
    gm = fx.GraphModule(nn.Module(), g)
    with pytest.raises(Exception) as info:
        fx.Interpreter(gm).run(fiamma.randn(2, 3))
    assert "While executing %matmul" in str(info.value)


def test_experimental_proxy_tensor_mode_is_never_active():
    from fiamma.fx.experimental.proxy_tensor import get_proxy_mode

    assert get_proxy_mode() is None
    seen = []

    class M(fiamma.nn.Module):
        def forward(self, x):
            seen.append(get_proxy_mode())
            return x + 1

    fiamma.fx.symbolic_trace(M())
    assert seen == [None]
