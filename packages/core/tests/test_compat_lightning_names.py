"""The PyTorch names that PyTorch Lightning and torchmetrics reach in core: ``torch._C``'s few
private names under the runner, ``torch.overrides.TorchFunctionMode`` (entered, never
dispatched to), ``torch.utils.flop_counter.FlopCounterMode``, ``torch.PyTorchFileReader``,
pytree's node definitions, ``torch._dynamo.OptimizedModule``, ``profiler.kineto_available``."""

import collections
import importlib.util
import io
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import fiamma
from fiamma import overrides
from fiamma._torch_c import module as torch_c
from fiamma.utils import _pytree as pytree
from fiamma.utils.flop_counter import FlopCounterMode


def test_parse_to_reads_device_dtype_and_flags():
    assert torch_c._nn._parse_to("cpu") == (fiamma.device("cpu"), None, False, None)
    assert torch_c._nn._parse_to(fiamma.float64) == (None, fiamma.float64, False, None)
    t = fiamma.zeros(2, dtype=fiamma.float16)
    assert torch_c._nn._parse_to(t, True) == (t.device, fiamma.float16, True, None)
    assert torch_c._nn._parse_to(device="cpu", dtype=fiamma.bfloat16,
                                 memory_format=fiamma.channels_last) == (
        fiamma.device("cpu"), fiamma.bfloat16, False, fiamma.channels_last)
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        torch_c._nn._parse_to("cpu", "cpu")
    with pytest.raises(TypeError, match="unexpected keyword arguments"):
        torch_c._nn._parse_to(colour="red")


def test_torch_c_names_and_its_gaps():
    assert torch_c._TensorMeta is type(fiamma.Tensor)
    torch_c._log_api_usage_once("torchmetrics.metric.Accuracy")
    with pytest.raises(TypeError, match="expected a str"):
        torch_c._log_api_usage_once(3)
    assert torch_c.ffi is fiamma._C.ffi  # fiamma's own extension behind it
    with pytest.raises(AttributeError, match="torch._C.*_cuda_clearCublasWorkspaces"):
        torch_c._cuda_clearCublasWorkspaces
    assert not hasattr(fiamma._C, "_TensorMeta")  # fiamma's extension module is left alone
    assert not hasattr(torch_c, "_cuda_clearCublasWorkspaces")  # Lightning's probe: False
    c10d = torch_c._distributed_c10d  # (Lightning casts DDP's reducer to its Reducer)
    if importlib.util.find_spec("fiamma.distributed") is not None:
        from fiamma.distributed._reducer import Reducer

        assert c10d.Reducer is Reducer


def test_torch_c_under_the_runner(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text(textwrap.dedent("""
        import torch
        import torch._C as C
        from torch._C import _TensorMeta
        import fiamma
        assert C is torch._C and isinstance(torch.zeros(1), torch.Tensor)
        assert fiamma._C is not C and fiamma._C.lib is C.lib
        print(C._nn._parse_to("cpu", torch.float64)[:2], _TensorMeta.__name__)
        """))
    r = subprocess.run([sys.executable, "-m", "fiamma.run", str(prog)], capture_output=True,
                       text=True, timeout=120, env={**os.environ,
                                                    "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "(device(type='cpu'), torch.float64) type"


class _Mode(overrides.TorchFunctionMode):
    calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        type(self).calls += 1
        return func(*args, **(kwargs or {}))


def test_torch_function_mode_is_entered_and_dispatched_to():
    _Mode.calls = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "not dispatched" warning any more
        with _Mode() as outer:
            with _Mode() as inner:
                assert overrides._current_modes() == [outer, inner]
                y = fiamma.ones(2) + 1
    # ones and add, each through the inner then the outer mode
    assert _Mode.calls == 4 and y.tolist() == [2.0, 2.0]
    assert overrides._current_modes() == []
    a, b = _Mode(), _Mode()
    a.__enter__()
    b.__enter__()
    with pytest.raises(RuntimeError, match="not the innermost active mode"):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)
    assert overrides.is_tensor_like(fiamma.ones(1)) and not overrides.is_tensor_like(1.0)


def test_flop_counter_counts_products_as_pytorch():
    a, b = fiamma.ones(4, 3), fiamma.ones(3, 5)
    with FlopCounterMode(display=False) as fc:
        a @ b                                  # 2*4*5*3
        fiamma.mm(a, b)                        # again
        fiamma.ones(2, 4, 3).bmm(fiamma.ones(2, 3, 6))  # 2*2*4*6*3
        a * 2 + 1                              # pointwise: nothing
    assert fc.get_total_flops() == 120 + 120 + 288
    counts = fc.get_flop_counts()
    assert sum(counts["Global"].values()) == 528 and counts["Global"]["aten.bmm"] == 288
    with FlopCounterMode(display=False) as fc:
        fiamma.conv2d(fiamma.ones(2, 3, 8, 8), fiamma.ones(4, 3, 3, 3))
    assert fc.get_flop_counts()["Global"] == {"aten.convolution": 2 * (2 * 4 * 6 * 6) * 27}
    with FlopCounterMode(display=False) as fc:
        pass
    assert fc.get_total_flops() == 0
    with pytest.raises(NotImplementedError, match="custom_mapping"):
        FlopCounterMode(custom_mapping={"x": None})


def test_flop_counter_inside_a_running_profile():
    a, b = fiamma.ones(4, 3), fiamma.ones(3, 5)
    with fiamma.profiler.profile() as prof:
        a @ b
        with FlopCounterMode(display=False) as fc:
            fiamma.mm(a, b)
        a @ b
    assert fc.get_total_flops() == 120  # only what ran inside the counter
    # the profile's own events are as it made them (it did not ask for FLOPs)
    assert [e.flops for e in prof.events() if e.name == "aten::mm"] == [0]
    with fiamma.profiler.profile(with_flops=True) as prof:
        with FlopCounterMode(display=False) as fc:
            fiamma.mm(a, b)
    assert fc.get_total_flops() == 120
    assert [e.flops for e in prof.events() if e.name == "aten::mm"] == [120]
    sched = fiamma.profiler.schedule(wait=1, warmup=1, active=1)
    with fiamma.profiler.profile(schedule=sched) as prof:
        with FlopCounterMode(display=False) as fc:  # in the schedule's wait step
            fiamma.mm(a, b)
        for _ in range(3):
            prof.step()
    assert fc.get_total_flops() == 120


def test_flop_counter_per_module():
    nn = pytest.importorskip("fiamma.nn")

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2))

        def forward(self, x):
            return self.body(x)

    with FlopCounterMode(display=False, depth=3) as fc:
        Net()(fiamma.ones(5, 8))
    c = fc.get_flop_counts()
    assert c["Net.body.0"] == {"aten.addmm": 2 * 5 * 4 * 8}
    assert c["Net.body.2"] == {"aten.addmm": 2 * 5 * 2 * 4}
    assert sum(c["Net"].values()) == sum(c["Global"].values()) == 320 + 80
    assert "Net.body.0" in fc.get_table(depth=3) and "Net.body.0" not in fc.get_table(depth=2)


def test_pytorch_file_reader_reads_records():
    buf = io.BytesIO()
    fiamma.save({"w": fiamma.arange(4, dtype=fiamma.float64)}, buf)
    r = fiamma.PyTorchFileReader(buf)
    assert {"data.pkl", "data/0", "byteorder"} <= set(r.get_all_records())
    assert r.get_record("byteorder") in (b"little", b"big")
    assert r.get_storage_from_record("data/0", 4, fiamma.float64).tolist() == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="holds 32 bytes, 5 elements"):
        r.get_storage_from_record("data/0", 5, fiamma.float64)
    with pytest.raises(RuntimeError, match="no record 'nope'"):
        r.get_record("nope")
    data = buf.getvalue()
    start = r.get_record_offset("data/0")
    assert data[start:start + 32] == r.get_record("data/0")
    with pytest.raises(RuntimeError, match="not a readable zip archive"):
        fiamma.PyTorchFileReader(io.BytesIO(b"not a zip"))


def test_pytree_node_definitions():
    Point = collections.namedtuple("Point", "x y")
    assert pytree._get_node_type([1]) is list and pytree._get_node_type(3) is int
    kind = pytree._get_node_type(Point(1, 2))
    assert kind in pytree.SUPPORTED_NODES and 3 .__class__ not in pytree.SUPPORTED_NODES
    children, context = pytree.SUPPORTED_NODES[dict].flatten_fn({"a": 1, "b": 2})
    assert (children, context) == ([1, 2], ["a", "b"])
    # a spec built from these pieces by hand (as Lightning does) unflattens
    ch, ctx = pytree.SUPPORTED_NODES[kind].flatten_fn(Point(1, 2))
    spec = pytree.TreeSpec(kind, ctx, [pytree.LeafSpec(), pytree.LeafSpec()])
    assert pytree.tree_unflatten([5, 6], spec) == Point(5, 6)


def test_dynamo_optimized_module_and_kineto():
    from fiamma._dynamo import OptimizedModule

    def f(x):
        return x + 1

    assert not isinstance(fiamma.compile(f), OptimizedModule)
    with pytest.raises(NotImplementedError, match="returns the module itself"):
        OptimizedModule(f)
    assert fiamma.profiler.kineto_available() is False


def test_event_list_key_averages_keyword_is_pytorchs():
    with fiamma.profiler.profile(record_shapes=True) as prof:
        fiamma.ones(2, 2) + fiamma.ones(2, 2)
        fiamma.ones(3) + fiamma.ones(3)
    by_shape = prof.events().key_averages(group_by_input_shapes=True)
    assert [a.count for a in by_shape if a.key == "aten::add"] == [1, 1]
    assert [a.count for a in prof.key_averages(group_by_input_shape=False)
            if a.key == "aten::add"] == [2]


def test_gradient_values_and_errors():
    # f = x^2 sampled at 0..4: central differences are exact inside (2x), one-sided at the ends
    f = fiamma.tensor([0.0, 1.0, 4.0, 9.0, 16.0])
    assert fiamma.gradient(f)[0].tolist() == [1.0, 2.0, 4.0, 6.0, 7.0]
    assert fiamma.gradient(f, edge_order=2)[0].tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
    x = fiamma.tensor([0.0, 0.5, 2.0, 3.0, 5.0])  # uneven points: still exact for x^2 inside
    got = fiamma.gradient(x * x, spacing=[x], edge_order=2)[0]
    assert fiamma.allclose(got, 2 * x)
    g0, g1 = fiamma.gradient(fiamma.arange(12).reshape(3, 4), spacing=[2.0, 0.5])
    assert g0.dtype == fiamma.float32 and g0.tolist() == [[2.0] * 4] * 3
    assert g1.tolist() == [[2.0] * 4] * 3
    assert len(fiamma.gradient(fiamma.ones(3, 4, 5), dim=(0, 2))) == 2
    pytest.importorskip("fiamma.autograd")
    t = fiamma.tensor([1.0, 4.0, 9.0], requires_grad=True)
    fiamma.gradient(t)[0].sum().backward()
    assert t.grad.tolist() == [-1.5, 0.0, 1.5]
    with pytest.raises(RuntimeError, match="at least edge_order\\+1"):
        fiamma.gradient(fiamma.ones(2), edge_order=2)
    with pytest.raises(RuntimeError, match="only supports edge_order=1 and edge_order=2"):
        fiamma.gradient(f, edge_order=3)
    with pytest.raises(RuntimeError, match="same length"):
        fiamma.gradient(fiamma.ones(3, 3), spacing=[1.0])


def test_gradient_signature_forms():
    f = fiamma.tensor([[0.0, 1.0, 4.0], [9.0, 16.0, 25.0]])
    ref = fiamma.gradient(f)
    for got in (fiamma.gradient(f, spacing=None), fiamma.gradient(f, spacing=None, dim=None)):
        assert [g.tolist() for g in got] == [g.tolist() for g in ref]
    assert fiamma.gradient(f, spacing=2)[1].tolist() == (ref[1] / 2).tolist()
    assert fiamma.gradient(f, spacing=(1, 0.5))[1].tolist() == (ref[1] * 2).tolist()
    assert fiamma.gradient(f, dim=-1)[0].tolist() == ref[1].tolist()
    assert fiamma.gradient(f, dim=[1], spacing=[0.5])[0].tolist() == (ref[1] * 2).tolist()
    # float64 coordinates promote a float32 (or integer) input, as in PyTorch
    xs = fiamma.tensor([0.0, 1.0, 3.0], dtype=fiamma.float64)
    assert fiamma.gradient(f, spacing=[xs], dim=1)[0].dtype == fiamma.float64
    assert fiamma.gradient(f.long(), spacing=[xs], dim=1)[0].dtype == fiamma.float64
    assert fiamma.gradient(f, spacing=[fiamma.arange(3)], dim=1)[0].dtype == fiamma.float32
    with pytest.raises(IndexError):
        fiamma.gradient(f, dim=2)
    with pytest.raises(RuntimeError, match="one dimension"):
        fiamma.gradient(f, spacing=[fiamma.tensor(1.0), fiamma.tensor(2.0)])
    with pytest.raises(TypeError, match="element 1"):
        fiamma.gradient(f, spacing=[fiamma.arange(2.0), 1.0])
    with pytest.raises(RuntimeError, match="gradient: bool"):
        fiamma.gradient(fiamma.tensor([True, False, True]))


@pytest.mark.parity
def test_gradient_forms_match_pytorch():
    torch = pytest.importorskip("torch")
    import numpy as np

    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 5)).astype(np.float32)
    xs = [np.sort(rng.random(n)) for n in (4, 5)]
    for kw in ({"spacing": None}, {"spacing": 2}, {"spacing": (2.0, 0.5)}, {"dim": -1},
               {"dim": [1], "spacing": [3.0]}, {"spacing": "coords"},
               {"spacing": "coords", "edge_order": 2}):
        mine, theirs = dict(kw), dict(kw)
        if kw.get("spacing") == "coords":
            mine["spacing"] = [fiamma.tensor(x) for x in xs]
            theirs["spacing"] = [torch.tensor(x) for x in xs]
        ours = fiamma.gradient(fiamma.tensor(a), **mine)
        ref = torch.gradient(torch.tensor(a), **theirs)
        assert len(ours) == len(ref)
        for o, r in zip(ours, ref):
            assert str(o.dtype) == str(r.dtype).replace("torch", "fiamma"), kw
            np.testing.assert_allclose(o.numpy(), r.numpy(), rtol=1e-6, atol=1e-6,
                                       err_msg=str(kw))


@pytest.mark.parity
def test_gradient_matches_pytorch():
    torch = pytest.importorskip("torch")
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 6, 4))
    xs = [np.sort(rng.random(n)) * 5 for n in (5, 6, 4)]
    cases = [{}, {"edge_order": 2}, {"dim": 1}, {"dim": [0, 2], "spacing": [0.5, 2.0]},
             {"spacing": 3.0, "edge_order": 2}, {"spacing": "coords"},
             {"spacing": "coords", "edge_order": 2}]
    for kw in cases:
        mine, theirs = dict(kw), dict(kw)
        if kw.get("spacing") == "coords":
            mine["spacing"] = [fiamma.tensor(x) for x in xs]
            theirs["spacing"] = [torch.tensor(x) for x in xs]
        ours = fiamma.gradient(fiamma.tensor(a), **mine)
        ref = torch.gradient(torch.tensor(a), **theirs)
        assert len(ours) == len(ref)
        for o, r in zip(ours, ref):
            np.testing.assert_allclose(o.numpy(), r.numpy(), rtol=1e-12, atol=1e-12,
                                       err_msg=str(kw))
