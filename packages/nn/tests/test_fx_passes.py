"""fiamma.fx passes: Interpreter, Transformer, ShapeProp and the fx tutorial patterns
(conv+bn fusion by graph rewriting, counting ops, swapping activations)."""

import copy
from collections import Counter

import fx_models as M
import nn_models
import numpy as np
import pytest

import fiamma
import fiamma.fx as fx
import fiamma.nn as nn
import fiamma.nn.functional as F
from fiamma.fx.passes.shape_prop import ShapeProp, TensorMetadata


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


# ---- Interpreter -------------------------------------------------------------------------

def test_interpreter_runs_like_the_module_and_frees_values():
    fiamma.manual_seed(0)
    m = M.randomize_bn(M.ConvBNNet()).eval()
    gm = fx.symbolic_trace(m)
    x = fiamma.randn(2, 3, 8, 8)
    seen = []

    class Recording(fx.Interpreter):
        def run_node(self, n):
            seen.append((n.name, len(self.env)))
            return super().run_node(n)

    _close(Recording(gm).run(x), m(x), 0)
    assert [s[0] for s in seen] == [n.name for n in gm.graph.nodes]
    assert max(s[1] for s in seen) <= 3        # values are dropped after their last use
    kept = fx.Interpreter(gm, garbage_collect_values=False)
    kept.run(x)
    assert len(kept.env) == len(gm.graph.nodes)


def test_interpreter_initial_env_and_overrides():
    gm = fx.symbolic_trace(lambda x: fiamma.sigmoid(x) * 2)
    nodes = list(gm.graph.nodes)
    out = fx.Interpreter(gm).run(fiamma.zeros(3),
                                 initial_env={nodes[1]: fiamma.ones(3)})
    _close(out, fiamma.full((3,), 2.0), 0)

    class NegSigmoid(fx.Interpreter):
        def call_function(self, target, args, kwargs):
            if target is fiamma.sigmoid:
                return -fiamma.sigmoid(*args, **kwargs)
            return super().call_function(target, args, kwargs)

    _close(NegSigmoid(gm).run(fiamma.zeros(2)), fiamma.full((2,), -1.0), 0)
    with pytest.raises(RuntimeError, match="Expected positional argument for parameter x"):
        fx.Interpreter(gm).run()


# ---- Transformer ---------------------------------------------------------------------------

class ReluToGelu(fx.Transformer):
    """The activation swap of the fx docs: functional relus and ReLU modules become gelu."""

    def call_function(self, target, args, kwargs):
        if target in (fiamma.relu, F.relu):
            return super().call_function(F.gelu, args, kwargs)
        return super().call_function(target, args, kwargs)

    def call_module(self, target, args, kwargs):
        if isinstance(self.fetch_attr(target), nn.ReLU):
            return super().call_function(F.gelu, args, kwargs)
        return super().call_module(target, args, kwargs)


def test_transformer_relu_to_gelu_changes_the_result_as_expected():
    fiamma.manual_seed(0)
    m = M.randomize_bn(M.ConvBNNet()).eval()
    x = fiamma.randn(2, 3, 8, 8)
    gelu_gm = ReluToGelu(fx.symbolic_trace(m)).transform()
    assert not any(n.target in (fiamma.relu, F.relu) for n in gelu_gm.graph.nodes)
    # the same network written with gelu
    y = F.gelu(m.bn1(m.conv1(x)))
    y = F.gelu(m.bn2(m.conv2(y)) + y)
    ref = m.fc(fiamma.flatten(m.pool(y), 1))
    _close(gelu_gm(x), ref, 1e-6)
    assert not np.allclose(gelu_gm(x).detach().numpy(), m(x).detach().numpy(), atol=1e-4)
    assert gelu_gm.conv1 is m.conv1         # the new module shares the layers


def test_transformer_relu_modules_in_mlp_and_identity_transform():
    mlp = nn_models.mlp(nn, (8, 16, 16, 3))
    x = fiamma.randn(4, 8)
    same = fx.Transformer(fx.symbolic_trace(mlp)).transform()
    _close(same(x), mlp(x), 0)
    gm = ReluToGelu(fx.symbolic_trace(mlp)).transform()
    ref = mlp[4](F.gelu(mlp[2](F.gelu(mlp[0](x)))))
    _close(gm(x), ref, 1e-6)
    assert Counter(n.op for n in gm.graph.nodes)["call_module"] == 3


def test_transformer_call_method_and_get_attr():
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.s = nn.Parameter(fiamma.tensor([2.0, 3.0]))

        def forward(self, x):
            return x.exp() * self.s

    class ExpToSin(fx.Transformer):
        def call_method(self, target, args, kwargs):
            return super().call_method("sin" if target == "exp" else target, args, kwargs)

    m = Scale()
    gm = ExpToSin(fx.symbolic_trace(m)).transform()
    x = fiamma.randn(2)
    _close(gm(x), x.sin() * m.s, 1e-6)
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "call_method", "get_attr",
                                              "call_function", "output"]


# ---- ShapeProp -----------------------------------------------------------------------------

def test_shape_prop_matches_the_real_shapes():
    fiamma.manual_seed(0)
    m = nn_models.resnet18(nn, num_classes=7).eval()
    gm = fx.symbolic_trace(m)
    x = fiamma.randn(2, 3, 32, 32)
    out = ShapeProp(gm).propagate(x)
    assert out.shape == (2, 7)
    # every node's value recorded by a plain Interpreter run
    values = {}

    class Keep(fx.Interpreter):
        def run_node(self, n):
            values[n] = super().run_node(n)
            return values[n]

    Keep(gm).run(x)
    for n in gm.graph.nodes:
        meta = n.meta["tensor_meta"]
        assert isinstance(meta, TensorMetadata)
        v = values[n]
        assert tuple(meta.shape) == tuple(v.shape) and meta.dtype == v.dtype
        assert meta.stride == tuple(v.stride()) and meta.is_quantized is False
        assert n.meta["type"] is type(v)
    shapes = {n.target: tuple(n.meta["tensor_meta"].shape) for n in gm.graph.nodes
              if n.op == "call_module"}
    assert shapes["conv1"] == (2, 64, 16, 16) and shapes["layer4.1.bn2"] == (2, 512, 1, 1)
    assert shapes["fc"] == (2, 7)


def test_shape_prop_on_tuples_and_non_tensors():
    gm = fx.symbolic_trace(lambda x: (x.chunk(2, dim=0), x.shape[0]))
    ShapeProp(gm).propagate(fiamma.randn(4, 3).requires_grad_())
    chunk = next(n for n in gm.graph.nodes if n.name == "chunk")
    assert [tuple(t.shape) for t in chunk.meta["tensor_meta"]] == [(2, 3), (2, 3)]
    assert all(t.requires_grad for t in chunk.meta["tensor_meta"])
    getitem = next(n for n in gm.graph.nodes if n.name == "getitem")
    assert "tensor_meta" not in getitem.meta and getitem.meta["type"] is int


# ---- the fx tutorials: conv+bn fusion, counting ops ------------------------------------------

def fuse_conv_bn_eval(conv, bn):
    """A new Conv2d computing bn(conv(x)) with bn's running statistics (eval mode)."""
    fused = copy.deepcopy(conv)
    w, b = conv.weight, conv.bias if conv.bias is not None else fiamma.zeros(conv.out_channels)
    scale = bn.weight * fiamma.rsqrt(bn.running_var + bn.eps)
    with fiamma.no_grad():
        fused.weight = nn.Parameter(w * scale.reshape(-1, 1, 1, 1))
        fused.bias = nn.Parameter((b - bn.running_mean) * scale + bn.bias)
    return fused


def fuse(model):
    """The fx fusion tutorial's pass: find conv -> bn pairs in the graph, fold bn into the
    conv, route users to the conv node, erase the bn node."""
    model = copy.deepcopy(model)
    gm = fx.symbolic_trace(model)
    modules = dict(gm.named_modules())
    for node in gm.graph.nodes:
        if node.op != "call_module" or not isinstance(modules[node.target], nn.BatchNorm2d):
            continue
        prev = node.args[0]
        if not (isinstance(prev, fx.Node) and prev.op == "call_module"
                and isinstance(modules[prev.target], nn.Conv2d) and len(prev.users) == 1):
            continue
        conv, bn = modules[prev.target], modules[node.target]
        fused = fuse_conv_bn_eval(conv, bn)
        parent, _, name = prev.target.rpartition(".")
        setattr(modules[parent] if parent else gm, name, fused)
        node.replace_all_uses_with(prev)
        gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()
    gm.delete_all_unused_submodules()
    return gm


@pytest.mark.parametrize("build", ["convbn", "resnet18"])
def test_conv_bn_fusion_by_graph_rewriting(build):
    fiamma.manual_seed(0)
    m = M.ConvBNNet() if build == "convbn" else nn_models.resnet18(nn, num_classes=10)
    m = M.randomize_bn(m).eval()
    fused = fuse(m).eval()
    kinds = Counter(type(fused.get_submodule(n.target)).__name__
                    for n in fused.graph.nodes if n.op == "call_module")
    assert kinds["BatchNorm2d"] == 0 and kinds["Conv2d"] == (2 if build == "convbn" else 20)
    assert not any(isinstance(mod, nn.BatchNorm2d) for mod in fused.modules())
    x = fiamma.randn(2, 3, 32, 32) if build == "resnet18" else fiamma.randn(2, 3, 8, 8)
    _close(fused(x), m(x), 1e-4)


def test_count_ops_tutorial_pattern():
    gm = fx.symbolic_trace(nn_models.resnet18(nn, num_classes=10))
    by_op = Counter(n.op for n in gm.graph.nodes)
    assert by_op["placeholder"] == 1 and by_op["output"] == 1
    calls = Counter()
    for n in gm.graph.nodes:
        if n.op == "call_module":
            calls[type(gm.get_submodule(n.target)).__name__] += 1
        elif n.op == "call_function":
            calls[n.target.__name__] += 1
        elif n.op == "call_method":
            calls["." + n.target] += 1
    assert calls == Counter({"Conv2d": 20, "BatchNorm2d": 20, "ReLU": 17, "add": 8,
                             "MaxPool2d": 1, "AdaptiveAvgPool2d": 1, ".flatten": 1,
                             "Linear": 1})


def test_decomposition_with_proxies_tutorial_pattern():
    """The fx docs' decomposition pass: rebuild the graph node by node, expanding some calls
    by running a Python rule on Proxies of the new graph."""
    def relu_decomposition(x):
        return (x > 0) * x

    rules = {F.relu: relu_decomposition, fiamma.relu: relu_decomposition}
    m = M.randomize_bn(M.ConvBNNet()).eval()
    graph = fx.Tracer().trace(m)
    new_graph = fx.Graph()
    env = {}
    tracer = fx.proxy.GraphAppendingTracer(new_graph)
    for node in graph.nodes:
        if node.op == "call_function" and node.target in rules:
            args = [fx.Proxy(env[a.name], tracer) if isinstance(a, fx.Node) else a
                    for a in node.args]
            env[node.name] = rules[node.target](*args).node
        else:
            env[node.name] = new_graph.node_copy(node, lambda a: env[a.name])
    gm = fx.GraphModule(m, new_graph)
    assert not any(n.target in rules for n in gm.graph.nodes if n.op == "call_function")
    x = fiamma.randn(2, 3, 8, 8)
    _close(gm(x), m(x), 1e-6)


def helper(x):
    return x.clamp(min=0) if bool((x > 100).any()) else x * 1.0


def add_then_helper(x, y):
    return helper(fiamma.add(x, y))


def test_retargeting_nodes_and_autowrap_functions():
    f = add_then_helper   # autowrap_functions are found among the traced code's globals

    with pytest.raises(fx.TraceError):
        fx.symbolic_trace(f)
    graph = fx.Tracer(autowrap_functions=(helper,)).trace(f)
    gm = fx.GraphModule(nn.Module(), graph)
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [fiamma.add,
                                                                             helper]
    for n in gm.graph.nodes:                  # the docs' "swap torch.add for torch.mul"
        if n.op == "call_function" and n.target is fiamma.add:
            n.target = fiamma.mul
    gm.recompile()
    x, y = fiamma.randn(3), fiamma.randn(3)
    _close(gm(x, y), x * y, 1e-6)


def test_hand_made_proxies_record_fiamma_functions():
    """Proxies built by hand (fx's "graph creation with Proxy objects" pattern): fiamma's
    functions called on them record call_function nodes, modules called on them run their
    forward on Proxies, and the functions are fiamma's own again once the Proxies are gone
    (PyTorch records these through __torch_function__)."""
    import gc

    original_cat = fiamma.cat
    graph = fx.Graph()
    x = graph.placeholder("x")
    y = graph.placeholder("y")
    tracer = fx.proxy.GraphAppendingTracer(graph)
    px, py = fx.Proxy(x, tracer), fx.Proxy(y, tracer)
    a = fiamma.cat([px, py])
    b = nn.ReLU()(fiamma.tanh(a))      # a module's forward on a Proxy: F.relu records
    c = F.leaky_relu(b, 0.1) + fiamma.neg(b)
    graph.output(c.node)
    targets = [n.target for n in graph.nodes if n.op == "call_function"]
    assert targets[:3] == [fiamma.cat, fiamma.tanh, F.relu]
    del px, py, a, b, c
    gc.collect()
    assert fiamma.cat is original_cat and not hasattr(F.relu, "__fx_original__")
    gm = fx.GraphModule(nn.Module(), graph)
    u, v = fiamma.randn(2, 3), fiamma.randn(1, 3)
    ref = fiamma.relu(fiamma.tanh(fiamma.cat([u, v])))
    _close(gm(u, v), F.leaky_relu(ref, 0.1) - ref, 1e-6)


def test_proxy_without_tracer_and_profiler_ranges_in_graphs():
    """``Proxy(node)`` appends to the node's graph; ``fiamma.ops.profiler`` range calls record
    as nodes and open a range when the graph runs."""
    from fiamma.profiler import profile

    gm = fx.symbolic_trace(lambda x: x * 2)
    out = next(n for n in gm.graph.nodes if n.op == "output")
    with gm.graph.inserting_before(out):
        p = fx.Proxy(out.args[0])
        h = gm.graph.call_function(fiamma.ops.profiler._record_function_enter, ("blk",))
        r = fiamma.sigmoid(p)
        fiamma.ops.profiler._record_function_exit(fx.Proxy(h))
    out.args = (r.node,)
    gm.recompile()
    with profile() as prof:
        y = gm(fiamma.ones(3))
    _close(y, fiamma.sigmoid(fiamma.full((3,), 2.0)), 1e-6)
    assert "blk" in [e.name for e in prof.events()]
    with pytest.raises(TypeError, match="_record_function_exit: expected the handle"):
        fiamma.ops.profiler._record_function_exit(3)
    with pytest.raises(AttributeError, match="no operator 'frobnicate'"):
        fiamma.ops.aten.frobnicate  # noqa: B018
    assert fx.node.Target is not None and fx.node.Argument is not None


def test_transformer_override_calls_functions_on_proxies():
    """PyTorch's Transformer docs pattern: an override returns ``torch.neg(*args)``."""
    class NegSigmoidSwap(fx.Transformer):
        def call_function(self, target, args, kwargs):
            if target == fiamma.sigmoid:
                return fiamma.neg(*args, **kwargs)
            return super().call_function(target, args, kwargs)

    gm = NegSigmoidSwap(fx.symbolic_trace(lambda x: fiamma.sigmoid(x) + 1)).transform()
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"][0] is fiamma.neg
    x = fiamma.randn(4)
    _close(gm(x), 1 - x, 1e-6)
    assert not hasattr(fiamma.neg, "__fx_original__")
