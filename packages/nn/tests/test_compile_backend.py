"""fiamma.compile with a callable backend: the backend gets an fx GraphModule and the call's
tensors, its result runs the calls; new shapes or a train/eval switch capture again; code
that cannot be one graph runs eagerly with a warning; named backends change nothing."""

import warnings

import pytest

import fiamma
from fiamma import fx, nn


class _Recorder:
    def __init__(self, wrap=None):
        self.calls = []
        self.wrap = wrap

    def __call__(self, gm, example_inputs):
        self.calls.append((gm, example_inputs))
        if self.wrap is not None:
            return self.wrap(gm)
        return gm.forward


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 3)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return fiamma.relu(self.drop(self.lin(x)))


def test_function_backend_gets_graph_and_inputs():
    be = _Recorder()

    def foo(x, y):
        return fiamma.sin(x) + fiamma.cos(y)

    opt = fiamma.compile(foo, backend=be)
    x, y = fiamma.randn(3, 4), fiamma.randn(3, 4)
    out = opt(x, y)
    assert fiamma.equal(out, foo(x, y))
    assert len(be.calls) == 1
    gm, example = be.calls[0]
    assert isinstance(gm, fx.GraphModule)
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "placeholder", "call_function",
                                              "call_function", "call_function", "output"]
    assert len(example) == 2 and example[0] is x and example[1] is y
    opt(fiamma.randn(3, 4), fiamma.randn(3, 4))          # same shapes: no new capture
    assert len(be.calls) == 1
    opt(fiamma.randn(5, 4), fiamma.randn(5, 4))          # new shapes: captured again
    assert len(be.calls) == 2


def test_backend_result_is_what_runs():
    def doubled(gm):
        return lambda *a: gm(*a) * 2

    be = _Recorder(wrap=doubled)
    opt = fiamma.compile(lambda x: x + 1, backend=be)
    assert opt(fiamma.ones(2)).tolist() == [4.0, 4.0]


def test_decorator_form_keeps_the_backend():
    be = _Recorder()

    @fiamma.compile(backend=be)
    def f(x):
        return x * 3

    assert f(fiamma.ones(2)).tolist() == [3.0, 3.0] and len(be.calls) == 1


def test_module_is_wrapped_and_trains():
    be = _Recorder()
    net = _Net()
    opt = fiamma.compile(net, backend=be)
    assert isinstance(opt, nn.Module) and opt._orig_mod is net
    assert [k for k in opt.state_dict()] == ["_orig_mod.lin.weight", "_orig_mod.lin.bias"]
    assert opt.lin is net.lin
    x = fiamma.randn(4, 6)
    net.eval()
    assert fiamma.equal(opt(x), net(x))
    n = len(be.calls)
    assert n == 1 and any(m.op == "call_module" for m in be.calls[0][0].graph.nodes)
    net.train()
    opt(x)                                              # the training flag is a guard
    assert len(be.calls) == 2
    # gradients reach the original parameters through the compiled graph
    opt(x).sum().backward()
    assert net.lin.weight.grad is not None


def test_untraceable_runs_eagerly_with_a_warning():
    be = _Recorder()

    def bar(a, b):
        x = a / (fiamma.abs(a) + 1)
        if b.sum() < 0:
            b = b * -1
        return x * b

    opt = fiamma.compile(bar, backend=be)
    a, b = fiamma.randn(10), fiamma.randn(10)
    with pytest.warns(UserWarning, match="could not be captured as one graph"):
        out = opt(a, b)
    assert fiamma.equal(out, bar(a, b)) and be.calls == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # warned once only
        assert fiamma.equal(opt(a, -b), bar(a, -b))


def test_named_backends_and_disable_change_nothing():
    def f(x):
        return x

    for kw in ({}, {"backend": "eager"}, {"backend": "inductor", "mode": "reduce-overhead"},
               {"backend": _Recorder(), "disable": True}):
        assert fiamma.compile(f, **kw) is f
    with pytest.raises(TypeError, match="backend must be a name or a callable"):
        fiamma.compile(f, backend=3)


def test_backend_must_return_a_callable():
    opt = fiamma.compile(lambda x: x, backend=lambda gm, ex: None)
    with pytest.raises(RuntimeError, match="returned NoneType, expected a callable"):
        opt(fiamma.ones(1))
