"""fiamma.export: export, ExportedProgram, module(), Dim / dynamic shapes, save/load, cond,
errors; parity of signatures and outputs with torch.export."""

import copy
import dataclasses
import io

import numpy as np
import pytest

import fiamma
import fiamma.nn as nn
from fiamma.export import (
    ConstraintViolationError,
    DataDependentError,
    Dim,
    ExportedProgram,
    InputKind,
    OutputKind,
    UserError,
    export,
    load,
    save,
)


def _close(a, b, tol=1e-5):
    a, b = np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy())
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol * (np.abs(b).max() + 1e-30))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(fiamma.relu(self.fc1(x)))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = fiamma.relu(self.bn(self.conv(x)))
        return self.fc(y.mean((2, 3)))


class KwTuple(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, *, mask=None, scale=1.0):
        h = self.fc(x) * scale
        if mask is not None:
            h = h * mask
        return h, (h.sum(-1), {"mean": h.mean(0)})


def _roundtrip(ep):
    buf = io.BytesIO()
    save(ep, buf)
    buf.seek(0)
    return load(buf)


# ---- programs ----------------------------------------------------------------------------------

def test_mlp_program_pieces():
    fiamma.manual_seed(0)
    m = MLP().eval()
    x = fiamma.randn(4, 6)
    ep = export(m, (x,))
    assert isinstance(ep, ExportedProgram)
    sig = ep.graph_signature
    assert [(s.kind, s.arg.name, s.target) for s in sig.input_specs] == [
        (InputKind.PARAMETER, "p_fc1_weight", "fc1.weight"),
        (InputKind.PARAMETER, "p_fc1_bias", "fc1.bias"),
        (InputKind.PARAMETER, "p_fc2_weight", "fc2.weight"),
        (InputKind.PARAMETER, "p_fc2_bias", "fc2.bias"),
        (InputKind.USER_INPUT, "x", None)]
    assert sig.parameters == ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")
    assert sig.user_inputs == ("x",) and len(sig.user_outputs) == 1
    assert sig.buffers == () and sig.inputs_to_parameters["p_fc1_weight"] == "fc1.weight"
    assert [s.kind for s in sig.output_specs] == [OutputKind.USER_OUTPUT]
    # state_dict holds the module's own parameters, as PyTorch's does
    assert ep.state_dict["fc1.weight"] is m.fc1.weight
    assert ep.constants == {}
    assert ep.example_inputs[0][0] is x
    names = [n.name for n in ep.graph.nodes]
    assert names[:5] == ["p_fc1_weight", "p_fc1_bias", "p_fc2_weight", "p_fc2_bias", "x"]
    assert list(ep.graph.nodes)[-1].op == "output"
    text = str(ep)
    assert text.startswith("ExportedProgram:") and "Graph signature:" in text
    assert "p_fc1_weight: PARAMETER target='fc1.weight'" in text
    assert "fiamma.export.ops.relu" in text
    assert "class" in ep.graph_module.print_readable(print_output=False)
    # the lifted graph module takes every placeholder
    flat = [ep.state_dict[t] for t in sig.parameters] + [x]
    _close(ep.graph_module(*flat)[0], m(x))
    mod = ep.module()
    assert isinstance(mod, fiamma.fx.GraphModule)
    _close(mod(x), m(x))
    assert sorted(dict(mod.named_parameters())) == sorted(sig.parameters)


def test_calling_the_program_directly_raises():
    ep = export(MLP(), (fiamma.randn(2, 6),))
    with pytest.raises(RuntimeError, match=r"exported_program.module\(\)"):
        ep(fiamma.randn(2, 6))


def test_static_shapes_are_checked():
    m = MLP()
    mod = export(m, (fiamma.randn(4, 6),)).module()
    with pytest.raises(AssertionError, match=r"Guard failed: x.size\(\)\[0\] == 4"):
        mod(fiamma.randn(5, 6))
    with pytest.raises(AssertionError, match=r"x.dim\(\) == 2"):
        mod(fiamma.randn(4, 6, 1))
    with pytest.raises(ValueError, match="tree spec"):
        mod([[1.0] * 6] * 4)


def test_dynamic_batch_and_range():
    fiamma.manual_seed(1)
    m = MLP().eval()
    batch = Dim("batch", min=2, max=16)
    ep = export(m, (fiamma.randn(4, 6),), dynamic_shapes={"x": {0: batch}})
    (sym, rng), = ep.range_constraints.items()
    assert (rng.lower, rng.upper) == (2, 16)
    assert "f32[s0, 6]" in str(ep)
    mod = ep.module()
    for n in (2, 9, 16):
        x = fiamma.randn(n, 6)
        _close(mod(x), m(x))
    with pytest.raises(AssertionError, match="<= 16"):
        mod(fiamma.randn(17, 6))
    with pytest.raises(AssertionError, match=">= 2"):
        mod(fiamma.randn(1, 6))
    with pytest.raises(AssertionError, match=r"x.size\(\)\[1\] == 6"):
        mod(fiamma.randn(3, 7))


def test_dynamic_shapes_forms():
    m = MLP()
    x = fiamma.randn(4, 6)
    for spec in ({"x": {0: Dim("b")}}, ({0: Dim("b")},), ((Dim("b"), None),),
                 ({0: Dim.AUTO},), ({0: Dim.DYNAMIC},)):
        ep = export(m, (x,), dynamic_shapes=spec)
        assert ep.module()(fiamma.randn(7, 6)).shape == (7, 3)
    ep = export(m, (x,), dynamic_shapes=({0: Dim.STATIC},))
    assert ep.range_constraints == {}
    with pytest.raises(UserError, match="not inputs of forward"):
        export(m, (x,), dynamic_shapes={"y": {0: Dim("b")}})
    with pytest.raises(UserError, match="expected 1 specs"):
        export(m, (x,), dynamic_shapes=({0: Dim("b")}, None))
    with pytest.raises(UserError, match="out of range"):
        export(m, (x,), dynamic_shapes=({2: Dim("b")},))


def test_dim_repr_and_validation():
    assert repr(Dim("b")) == "Dim('b', min=0)"
    # PyTorch's reprs
    assert [repr(Dim("b", min=2, max=8)), repr(Dim("b", min=2)), repr(Dim("b", max=9)),
            repr(Dim("b", min=3))] == ["Dim('b', max=8)", "Dim('b')", "Dim('b', min=0, max=9)",
                                       "Dim('b', min=3)"]
    assert repr(Dim.AUTO) == "DimHint(AUTO)" and repr(Dim.STATIC) == "DimHint(STATIC)"
    with pytest.raises(UserError):
        Dim("b", min=5, max=2)
    d = Dim("d")
    assert repr(2 * d) == "2*d" and repr(d + 1) == "d + 1" and repr(2 * d - 1) == "2*d - 1"


def test_example_size_one_is_specialised():
    with pytest.raises(ConstraintViolationError, match="specialized it to be a constant"):
        export(MLP(), (fiamma.randn(1, 6),), dynamic_shapes=({0: Dim("b")},))
    ep = export(MLP(), (fiamma.randn(1, 6),), dynamic_shapes=({0: Dim.AUTO},))
    assert ep.range_constraints == {}  # AUTO: size 1 stays static


def test_shared_and_derived_dims():
    class Pair(nn.Module):
        def forward(self, x, y):
            return x[:, :-1] + y

    dx = Dim("dx", min=3, max=20)
    ep = export(Pair(), (fiamma.randn(2, 5), fiamma.randn(2, 4)),
                dynamic_shapes=({1: dx}, {1: dx - 1}))
    mod = ep.module()
    x, y = fiamma.randn(2, 9), fiamma.randn(2, 8)
    _close(mod(x, y), x[:, :-1] + y)
    with pytest.raises(AssertionError, match="dx - 1"):
        mod(fiamma.randn(2, 9), fiamma.randn(2, 7))

    class Add(nn.Module):
        def forward(self, a, b):
            return a + b

    n = Dim("n")
    ep = export(Add(), (fiamma.randn(4), fiamma.randn(4)), dynamic_shapes=({0: n}, {0: n}))
    assert ep.module()(fiamma.ones(6), fiamma.ones(6)).shape == (6,)
    with pytest.raises(AssertionError, match="Guard failed"):
        ep.module()(fiamma.ones(6), fiamma.ones(5))
    with pytest.raises(ConstraintViolationError, match="differ"):
        export(Add(), (fiamma.randn(4), fiamma.randn(5)), dynamic_shapes=({0: n}, {0: n}))


def test_cnn_batch_norm_eval_buffers_are_inputs():
    fiamma.manual_seed(2)
    m = CNN()
    with fiamma.no_grad():
        m.bn.running_mean.copy_(fiamma.randn(8) * 0.1)
        m.bn.running_var.copy_(fiamma.rand(8) + 0.5)
    m.eval()
    x = fiamma.randn(2, 3, 6, 6)
    ep = export(m, (x,), dynamic_shapes=({0: Dim("batch")},))
    sig = ep.graph_signature
    assert sig.buffers == ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked")
    assert [s.persistent for s in sig.input_specs if s.kind == InputKind.BUFFER] == [True] * 3
    used = {n.name for n in ep.graph.nodes if n.op == "placeholder" and n.users}
    assert {"b_bn_running_mean", "b_bn_running_var"} <= used  # read by the graph
    assert sig.buffers_to_mutate == {}
    x2 = fiamma.randn(5, 3, 6, 6)
    _close(ep.module()(x2), m(x2))
    # a program loaded from a file has its own buffers; new statistics change its output
    ep2 = _roundtrip(ep)
    mod2 = ep2.module()
    _close(mod2(x2), m(x2))
    with fiamma.no_grad():
        mod2.bn.running_mean.add_(1.0)
    assert float((mod2(x2) - m(x2)).abs().max()) > 1e-3


def test_cnn_batch_norm_train_mutates_buffers():
    fiamma.manual_seed(3)
    m = CNN().train()
    ref = copy.deepcopy(m)
    x = fiamma.randn(4, 3, 6, 6)
    ep = export(m, (x,))
    # the example run changed no buffer
    _close(m.bn.running_mean, ref.bn.running_mean)
    assert int(m.bn.num_batches_tracked) == 0
    sig = ep.graph_signature
    assert sig.buffers_to_mutate.values() and set(sig.buffers_to_mutate.values()) == {
        "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}
    kinds = [s.kind for s in sig.output_specs]
    assert kinds == [OutputKind.BUFFER_MUTATION] * 3 + [OutputKind.USER_OUTPUT]
    mod = ep.module()
    for _ in range(2):
        _close(mod(x), ref(x))
    # the module's buffers (the program's, here m's own) follow eager training
    _close(mod.bn.running_mean, ref.bn.running_mean)
    _close(mod.bn.running_var, ref.bn.running_var)
    assert int(mod.bn.num_batches_tracked) == 2 == int(ref.bn.num_batches_tracked)


def test_batch_norm_cumulative_average():
    m = nn.BatchNorm1d(3, momentum=None).train()
    ref = copy.deepcopy(m)
    mod = export(m, (fiamma.randn(4, 3),)).module()
    for _ in range(3):
        x = fiamma.randn(4, 3)
        _close(mod(x), ref(x))
    _close(mod.running_var, ref.running_var)


def test_lstm_dynamic_batch_and_time():
    fiamma.manual_seed(4)
    m = nn.LSTM(4, 6, num_layers=2, batch_first=True).eval()
    ep = export(m, (fiamma.randn(3, 5, 4),),
                dynamic_shapes=({0: Dim("batch"), 1: Dim("time")},))
    assert ep.graph_signature.user_inputs == ("input",)
    assert all(s.kind == InputKind.PARAMETER for s in ep.graph_signature.input_specs[:-1])
    x = fiamma.randn(2, 9, 4)
    (o, (h, c)), (o2, (h2, c2)) = ep.module()(x), m(x)
    _close(o, o2)
    _close(h, h2)
    _close(c, c2)
    (o3, (h3, _)) = _roundtrip(ep).module()(x)
    _close(o3, o2)
    _close(h3, h2)


def test_transformer_encoder_layer_dynamic_sequence():
    fiamma.manual_seed(5)
    m = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()
    ep = export(m, (fiamma.randn(2, 6, 16),),
                dynamic_shapes=({0: Dim("batch"), 1: Dim("seq", max=64)},))
    mod = _roundtrip(ep).module()
    for shape in ((2, 6, 16), (3, 11, 16)):
        x = fiamma.randn(*shape)
        _close(mod(x), m(x), 1e-4)


def test_kwargs_nested_inputs_and_tuple_outputs():
    fiamma.manual_seed(6)
    m = KwTuple()
    x, mask = fiamma.randn(3, 4), (fiamma.rand(3, 4) > 0.5).float()
    ep = export(m, (x,), {"mask": mask, "scale": 2.0},
                dynamic_shapes={"x": {0: Dim("b")}, "mask": {0: Dim("b")}, "scale": None})
    sig = ep.graph_signature
    assert sig.user_inputs == ("x", "mask", 2.0)
    user = [s for s in sig.input_specs if s.kind == InputKind.USER_INPUT]
    assert [s.arg.name for s in user] == ["x", "mask", "scale"]
    assert len(sig.user_outputs) == 3
    mod = ep.module()
    x2, m2 = fiamma.randn(5, 4), fiamma.ones(5, 4)
    got, want = mod(x2, mask=m2, scale=2.0), m(x2, mask=m2, scale=2.0)
    assert isinstance(got, tuple) and isinstance(got[1], tuple) and set(got[1][1]) == {"mean"}
    _close(got[0], want[0])
    _close(got[1][0], want[1][0])
    _close(got[1][1]["mean"], want[1][1]["mean"])
    # keywords in another order are fine; a missing one or another constant is not
    got2 = mod(x2, scale=2.0, mask=m2)
    _close(got2[0], want[0])
    with pytest.raises(ValueError, match="kwarg keyword mismatch"):
        mod(x2, mask=m2)
    with pytest.raises(AssertionError, match="scale == 2.0"):
        mod(x2, mask=m2, scale=3.0)
    got3 = _roundtrip(ep).module()(x2, mask=m2, scale=2.0)
    _close(got3[1][1]["mean"], want[1][1]["mean"])


def test_nested_tuple_input_names():
    class Cell(nn.Module):
        def forward(self, x, hc):
            h, c = hc
            return x + h * c

    ep = export(Cell(), (fiamma.randn(2), (fiamma.randn(2), fiamma.randn(2))))
    assert ep.graph_signature.user_inputs == ("x", "hc_0", "hc_1")
    a, b, c = fiamma.randn(2), fiamma.randn(2), fiamma.randn(2)
    _close(ep.module()(a, (b, c)), a + b * c)
    with pytest.raises(ValueError, match="tree spec"):
        ep.module()(a, (b, c, c))


def test_register_dataclass_input():
    @dataclasses.dataclass
    class Batch:
        x: fiamma.Tensor
        y: fiamma.Tensor

    fiamma.export.register_dataclass(Batch)

    class F(nn.Module):
        def forward(self, b):
            return b.x * b.y

    b = Batch(fiamma.randn(3), fiamma.randn(3))
    ep = export(F(), (b,))
    assert ep.graph_signature.user_inputs == ("b_x", "b_y")
    _close(ep.module()(b), b.x * b.y)


def test_constants_and_non_persistent_buffers():
    class C(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", fiamma.tensor([2.0, 3.0]), persistent=False)
            self.offset = fiamma.tensor([1.0, -1.0])  # a plain tensor attribute

        def forward(self, x):
            return x * self.scale + self.offset + fiamma.tensor([0.5, 0.5])

    m = C()
    ep = export(m, (fiamma.randn(4, 2),))
    specs = {s.target: s for s in ep.graph_signature.input_specs if s.target}
    assert specs["scale"].kind == InputKind.BUFFER and specs["scale"].persistent is False
    assert ep.graph_signature.non_persistent_buffers == ("scale",)
    assert specs["offset"].kind == InputKind.CONSTANT_TENSOR
    assert "lifted_tensor_0" in ep.constants and "scale" in ep.constants
    assert "scale" not in ep.state_dict
    x = fiamma.randn(4, 2)
    _close(ep.module()(x), m(x))
    _close(_roundtrip(ep).module()(x), m(x))


def test_save_load_file_and_layout(tmp_path):
    import zipfile

    fiamma.manual_seed(7)
    m = MLP()
    ep = export(m, (fiamma.randn(3, 6),), dynamic_shapes=({0: Dim("b", max=10)},))
    path = tmp_path / "mlp.pt2"
    save(ep, str(path), extra_files={"note.txt": "hello"})
    names = zipfile.ZipFile(path).namelist()
    assert "archive/models/model.json" in names
    assert "archive/data/weights/model.safetensors" in names
    extra = {"note.txt": ""}
    ep2 = load(str(path), extra_files=extra)
    assert extra["note.txt"] == "hello"
    assert [str(s) for s in ep2.graph_signature.input_specs] == \
        [str(s) for s in ep.graph_signature.input_specs]
    assert list(ep2.range_constraints.values()) == list(ep.range_constraints.values())
    x = fiamma.randn(8, 6)
    _close(ep2.module()(x), m(x))
    with pytest.raises(AssertionError, match="<= 10"):
        ep2.module()(fiamma.randn(11, 6))
    _close(ep2.example_inputs[0][0], ep.example_inputs[0][0])


def test_load_refuses_other_archives():
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("m/archive_format", "pt2")
    buf.seek(0)
    with pytest.raises(RuntimeError, match="PyTorch's torch.export.save"):
        load(buf)
    with pytest.raises(RuntimeError, match="not a zip"):
        load(io.BytesIO(b"garbage"))


def test_save_refuses_foreign_targets():
    ep = export(MLP(), (fiamma.randn(2, 6),))
    ep2 = ep.run_decompositions({"relu": lambda x: fiamma.clamp(x, min=0)})
    x = fiamma.randn(2, 6)
    _close(ep2.module()(x), ep.module()(x))
    with pytest.raises(TypeError, match="fiamma.export's ops"):
        save(ep2, io.BytesIO())


def test_run_decompositions_copies():
    ep = export(MLP(), (fiamma.randn(2, 6),))
    ep2 = ep.run_decompositions()
    assert isinstance(ep2, ExportedProgram) and ep2 is not ep
    assert ep2.graph is not ep.graph
    assert [n.target for n in ep2.graph.nodes] == [n.target for n in ep.graph.nodes]
    assert fiamma.export.default_decompositions() == {}


# ---- control flow -----------------------------------------------------------------------------

def test_data_dependent_control_flow_raises():
    class D(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x + 1
            return x - 1

    with pytest.raises(DataDependentError, match="data-dependent control flow.*fiamma.cond"):
        export(D(), (fiamma.randn(3),))

    class Item(nn.Module):
        def forward(self, x):
            return x * x.max().item()

    with pytest.raises(DataDependentError, match=r"\.item\(\)"):
        export(Item(), (fiamma.randn(3),))


def test_cond_is_captured():
    class C(nn.Module):
        def forward(self, x):
            return fiamma.cond(x.sum() > 0, lambda v: v.sin(), lambda v: v.cos(), (x,))

    ep = export(C(), (fiamma.randn(3),))
    targets = {getattr(n.target, "name", None) for n in ep.graph.nodes}
    assert {"sin", "cos", "where"} <= targets
    mod = _roundtrip(ep).module()
    pos, neg = fiamma.ones(3), -fiamma.ones(3)
    _close(mod(pos), pos.sin())
    _close(mod(neg), neg.cos())
    # eager and errors
    assert fiamma.cond(True, lambda: 1, lambda: 2) == 1
    with pytest.raises(RuntimeError, match="one-element"):
        fiamma.cond(fiamma.ones(2) > 0, lambda: 1, lambda: 2)

    class Bad(nn.Module):
        def forward(self, x):
            return fiamma.cond(x.sum() > 0, lambda v: v, lambda v: v[:1], (x,))

    with pytest.raises(UserError, match="differs"):
        export(Bad(), (fiamma.randn(3),))


class Branchy(nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:
            return x + 1
        return x - 1


def test_shape_control_flow_is_specialised():
    ep = export(Branchy(), (fiamma.randn(8),))
    _close(ep.module()(fiamma.zeros(8)), fiamma.ones(8))
    # a dynamic dim the branch narrows: an error with the fix, as in PyTorch
    with pytest.raises(ConstraintViolationError, match=r"Dim\('n', min=5\)"):
        export(Branchy(), (fiamma.randn(8),), dynamic_shapes=({0: Dim("n")},))
    ep = export(Branchy(), (fiamma.randn(8),), dynamic_shapes=({0: Dim("n", min=5)},))
    _close(ep.module()(fiamma.zeros(6)), fiamma.ones(6))
    # Dim.AUTO: the range is refined and checked on each call
    ep = export(Branchy(), (fiamma.randn(8),), dynamic_shapes=({0: Dim.AUTO},))
    assert [(r.lower, r.upper) for r in ep.range_constraints.values()] == [(5, float("inf"))]
    with pytest.raises(AssertionError, match=">= 5"):
        ep.module()(fiamma.zeros(3))


def test_specialising_a_dynamic_dim_raises():
    class Fixed(nn.Module):
        def forward(self, x):
            return x.reshape(int(x.shape[0]) * 2, -1)

    with pytest.raises(ConstraintViolationError, match="specialized it to be a constant"):
        export(Fixed(), (fiamma.randn(4, 6),), dynamic_shapes=({0: Dim("b")},))
    ep = export(Fixed(), (fiamma.randn(4, 6),), dynamic_shapes=({0: Dim.AUTO},))
    with pytest.raises(AssertionError, match="Guard failed"):
        ep.module()(fiamma.randn(5, 6))
    assert ep.module()(fiamma.randn(4, 6)).shape == (8, 3)


def test_draft_export_reports():
    class Item(nn.Module):
        def forward(self, x):
            return x * float(x.max())

    ep = fiamma.export.draft_export(Item(), (fiamma.ones(3),))
    assert not ep._report.successful() and "float(tensor)" in str(ep._report)
    assert len(ep._report.failures) == 1


def test_errors_on_bad_calls():
    with pytest.raises(UserError, match="Expecting `args` to be a tuple"):
        export(MLP(), [fiamma.randn(2, 6)])
    with pytest.raises(ValueError, match="Expected `mod` to be an instance"):
        export(lambda x: x, (fiamma.randn(2),))
    with pytest.warns(FutureWarning):
        ep = fiamma.export.export_for_training(MLP(), (fiamma.randn(2, 6),))
    assert isinstance(ep, ExportedProgram)


def test_unflatten_keeps_hierarchy():
    m = CNN().eval()
    u = fiamma.export.unflatten(export(m, (fiamma.randn(2, 3, 4, 4),)))
    assert isinstance(u, fiamma.export.UnflattenedModule)
    assert u.conv.weight is m.conv.weight
    x = fiamma.randn(2, 3, 4, 4)
    _close(u(x), m(x))


def test_module_call_graph_and_call_spec():
    ep = export(CNN(), (fiamma.randn(2, 3, 4, 4),))
    fqns = [e.fqn for e in ep.module_call_graph]
    assert fqns == ["", "conv", "bn", "fc"]
    assert ep.module_call_graph[0].signature.forward_arg_names == ["x"]
    assert ep.call_spec.in_spec is not None and ep.call_spec.out_spec == ["leaf"]


def test_onnx_accepts_an_exported_program():
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import fiamma.onnx

    fiamma.manual_seed(8)
    m = CNN().eval()
    ep = export(m, (fiamma.randn(2, 3, 6, 6),), dynamic_shapes=({0: Dim("batch")},))
    prog = fiamma.onnx.export(ep)
    assert prog.exported_program is ep
    inp = prog.model_proto.graph.input[0]
    assert inp.name == "x"
    assert inp.type.tensor_type.shape.dim[0].dim_param == "batch"
    onnx.checker.check_model(prog.model_proto)
    sess = ort.InferenceSession(prog.model_proto.SerializeToString(),
                                providers=["CPUExecutionProvider"])
    x = fiamma.randn(5, 3, 6, 6)
    out = sess.run(None, {"x": x.numpy()})[0]
    np.testing.assert_allclose(out, m(x).detach().numpy(), rtol=1e-4, atol=1e-5)
    # a program captured in training mode: exporting it to ONNX updates no buffer
    m.train()
    ep = export(m, (fiamma.randn(2, 3, 6, 6),))
    before = m.bn.running_mean.clone()
    prog = fiamma.onnx.export(ep)
    assert [o.name for o in prog.model_proto.graph.output] == ["output_0"]
    _close(m.bn.running_mean, before)


# ---- parity with torch.export -----------------------------------------------------------------

def _torch_copy(torch, tmod, fmod):
    sd = {k: torch.from_numpy(np.array(v.detach().numpy())) for k, v in
          fmod.state_dict().items()}
    tmod.load_state_dict(sd)
    return tmod


def _sig(ep, torch_style=False):
    return [(s.kind.name, s.arg.name, s.target, s.persistent)
            for s in ep.graph_signature.input_specs]


@pytest.mark.parity
@pytest.mark.parametrize("train", [False, True])
def test_parity_cnn_signature_and_outputs(train):
    torch = pytest.importorskip("torch")
    tnn = torch.nn

    class TCNN(tnn.Module):
        def __init__(self):
            super().__init__()
            self.conv = tnn.Conv2d(3, 8, 3, padding=1)
            self.bn = tnn.BatchNorm2d(8)
            self.fc = tnn.Linear(8, 4)

        def forward(self, x):
            y = torch.relu(self.bn(self.conv(x)))
            return self.fc(y.mean((2, 3)))

    fiamma.manual_seed(9)
    fm = CNN()
    with fiamma.no_grad():
        fm.bn.running_var.copy_(fiamma.rand(8) + 0.5)
    tm = _torch_copy(torch, TCNN(), fm)
    fm.train(train)
    tm.train(train)
    xn = np.random.default_rng(0).standard_normal((4, 3, 6, 6)).astype(np.float32)
    fep = export(fm, (fiamma.tensor(xn),), dynamic_shapes=({0: Dim("batch")},))
    tep = torch.export.export(tm, (torch.from_numpy(xn),),
                              dynamic_shapes=({0: torch.export.Dim("batch")},))
    assert _sig(fep) == _sig(tep)
    assert fep.graph_signature.parameters == tep.graph_signature.parameters
    assert fep.graph_signature.buffers == tep.graph_signature.buffers
    assert fep.graph_signature.user_inputs == tep.graph_signature.user_inputs
    # PyTorch's training IR mutates buffers in place; its functional form (after
    # run_decompositions) has the BUFFER_MUTATION outputs fiamma's program has
    tfun = tep.run_decompositions()
    assert [s.kind.name for s in fep.graph_signature.output_specs] == \
        [s.kind.name for s in tfun.graph_signature.output_specs]
    assert set(fep.graph_signature.buffers_to_mutate.values()) == \
        set(tfun.graph_signature.buffers_to_mutate.values())
    fmod, tmod = fep.module(), tep.module()
    for n in (4, 7):
        x = np.random.default_rng(n).standard_normal((n, 3, 6, 6)).astype(np.float32)
        got = fmod(fiamma.tensor(x)).detach().numpy()
        want = tmod(torch.from_numpy(x)).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    if train:
        np.testing.assert_allclose(fmod.bn.running_mean.numpy(),
                                   tmod.bn.running_mean.detach().numpy(), rtol=1e-4, atol=1e-6)
        assert int(fmod.bn.num_batches_tracked) == int(tmod.bn.num_batches_tracked) == 2


@pytest.mark.parity
def test_parity_kwargs_lstm_and_errors():
    torch = pytest.importorskip("torch")
    fiamma.manual_seed(10)
    fm = nn.LSTM(4, 5, batch_first=True).eval()
    tm = _torch_copy(torch, torch.nn.LSTM(4, 5, batch_first=True).eval(), fm)
    xn = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    fep = export(fm, (fiamma.tensor(xn),))
    tep = torch.export.export(tm, (torch.from_numpy(xn),))
    assert _sig(fep) == _sig(tep)
    fo, (fh, _) = fep.module()(fiamma.tensor(xn))
    to, (th, _) = tep.module()(torch.from_numpy(xn))
    np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fh.detach().numpy(), th.detach().numpy(), rtol=1e-5, atol=1e-6)

    class TK(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x, *, mask=None, scale=1.0):
            h = self.fc(x) * scale
            if mask is not None:
                h = h * mask
            return h, (h.sum(-1), {"mean": h.mean(0)})

    fk = KwTuple()
    tk = _torch_copy(torch, TK(), fk)
    x, mask = xn[0], np.ones((3, 4), np.float32)
    fep = export(fk, (fiamma.tensor(x),), {"mask": fiamma.tensor(mask), "scale": 2.0})
    tep = torch.export.export(tk, (torch.from_numpy(x),),
                              {"mask": torch.from_numpy(mask), "scale": 2.0})
    assert _sig(fep) == _sig(tep)
    assert fep.graph_signature.user_inputs == tep.graph_signature.user_inputs
    assert len(fep.graph_signature.user_outputs) == len(tep.graph_signature.user_outputs)
    fo = fep.module()(fiamma.tensor(x), mask=fiamma.tensor(mask), scale=2.0)
    to = tep.module()(torch.from_numpy(x), mask=torch.from_numpy(mask), scale=2.0)
    np.testing.assert_allclose(fo[1][1]["mean"].detach().numpy(), to[1][1]["mean"].detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    # the same errors: a direct call, a wrong static size, a missing keyword
    with pytest.raises(RuntimeError, match="module()"):
        tep(torch.from_numpy(x))
    with pytest.raises(RuntimeError, match="module()"):
        fep(fiamma.tensor(x))
    with pytest.raises(AssertionError, match="Guard failed"):
        tep.module()(torch.zeros(5, 4), mask=torch.from_numpy(mask), scale=2.0)
    with pytest.raises(AssertionError, match="Guard failed"):
        fep.module()(fiamma.zeros(5, 4), mask=fiamma.tensor(mask), scale=2.0)
    with pytest.raises(ValueError, match="kwarg keyword mismatch"):
        tep.module()(torch.from_numpy(x), scale=2.0)
    with pytest.raises(ValueError, match="kwarg keyword mismatch"):
        fep.module()(fiamma.tensor(x), scale=2.0)


def test_compound_size_guard_is_checked_per_call():
    class F(nn.Module):
        def forward(self, x):
            if x.shape[0] * 2 > 9:
                return x + 1
            return x - 1

    ep = export(F(), (fiamma.randn(8),), dynamic_shapes=({0: Dim.AUTO},))
    _close(ep.module()(fiamma.zeros(6)), fiamma.ones(6))
    with pytest.raises(AssertionError, match=r"x.size\(\)\[0\], 2\) > 9"):
        ep.module()(fiamma.zeros(3))
    # kept through save/load
    with pytest.raises(AssertionError, match="Guard failed"):
        _roundtrip(ep).module()(fiamma.zeros(3))


def test_all_violations_reported_together():
    class G(nn.Module):
        def forward(self, x, y):
            if x.shape[0] <= 16 and y.shape[1] > 16:
                return x @ y[:, :16]
            return x

    dyn = {"x": {0: Dim("a"), 1: Dim("k")}, "y": {0: Dim("k2"), 1: Dim("c")}}
    with pytest.raises(ConstraintViolationError) as info:
        export(G(), (fiamma.randn(8, 16), fiamma.randn(16, 32)), dynamic_shapes=dyn)
    text = str(info.value)
    assert "Constraints violated (a, c)!" in text
    assert "a = Dim('a', max=16)" in text and "c = Dim('c', min=17)" in text


def test_torch_export_submodules_and_names():
    from fiamma.export.dynamic_shapes import Dim as D2
    from fiamma.export.exported_program import ExportedProgram as EP2
    from fiamma.export.graph_signature import ExportGraphSignature, InputKind as IK

    assert D2 is Dim and EP2 is ExportedProgram and IK is InputKind
    assert ExportGraphSignature is fiamma.export.ExportGraphSignature
    assert fiamma.export.DEFAULT_PICKLE_PROTOCOL == 2
    assert isinstance(fiamma.export.default_decompositions(), fiamma.export.CustomDecompTable)
    assert fiamma.export.ops.relu(fiamma.tensor([-1.0, 2.0])).tolist() == [0.0, 2.0]
    with pytest.raises(AttributeError, match="no op"):
        fiamma.export.ops.not_an_op


def test_dropout_in_training_mode():
    m = nn.Sequential(nn.Dropout(0.3), nn.Linear(4, 4)).train()
    ep = export(m, (fiamma.ones(8, 4),), dynamic_shapes=({0: Dim("b")},))
    drops = [n for n in ep.graph.nodes if getattr(n.target, "name", None) == "dropout"]
    assert len(drops) == 1 and drops[0].kwargs["p"] == 0.3
    z = _roundtrip(export(nn.Dropout(0.3).train(), (fiamma.ones(8, 4),),
                          dynamic_shapes=({0: Dim("b")},))).module()(fiamma.ones(2000, 4))
    frac = float((z == 0).float().mean())
    assert 0.27 < frac < 0.33  # a fresh mask per call, PyTorch's scaling
    assert abs(float(z.max()) - 1 / 0.7) < 1e-5
    ev = export(nn.Dropout(0.3).eval(), (fiamma.ones(8, 4),))
    assert not [n for n in ev.graph.nodes if n.op == "call_function"]


def test_instance_norm_dynamic_and_running_stats():
    fiamma.manual_seed(11)
    m = nn.InstanceNorm1d(4, affine=True, track_running_stats=True)
    with fiamma.no_grad():
        m.weight.copy_(fiamma.rand(4) + 0.5)
        m.running_var.copy_(fiamma.rand(4) + 0.5)
    ref = copy.deepcopy(m)
    m.eval()
    ref.eval()
    ep = export(m, (fiamma.randn(2, 4, 6),), dynamic_shapes=({0: Dim("b"), 2: Dim("l")},))
    x = fiamma.randn(3, 4, 9)
    _close(ep.module()(x), ref(x))
    m.train()
    ref.train()
    ep = export(m, (fiamma.randn(2, 4, 6),), dynamic_shapes=({0: Dim("b"), 2: Dim("l")},))
    assert set(ep.graph_signature.buffers_to_mutate.values()) == {"running_mean",
                                                                  "running_var"}
    mod = ep.module()
    for n in (3, 5):
        x = fiamma.randn(n, 4, 7)
        _close(mod(x), ref(x))
    _close(mod.running_mean, ref.running_mean)
    _close(mod.running_var, ref.running_var)


def test_dims_with_the_same_name_are_one_symbol():
    class Add(nn.Module):
        def forward(self, a, b):
            return a + b

    ep = export(Add(), (fiamma.randn(4, 2), fiamma.randn(4, 2)),
                dynamic_shapes=({0: Dim("n")}, {0: Dim("n")}))
    assert len(ep.range_constraints) == 1
    assert ep.module()(fiamma.ones(6, 2), fiamma.ones(6, 2)).shape == (6, 2)


def test_module_train_and_eval_raise_as_in_pytorch():
    mod = export(CNN().train(), (fiamma.randn(2, 3, 4, 4),)).module()
    assert mod.training
    with pytest.raises(NotImplementedError, match=r"Calling eval\(\) is not supported"):
        mod.eval()
    with pytest.raises(NotImplementedError, match=r"Calling train\(\) is not supported"):
        mod.train()


@pytest.mark.parity
def test_parity_transformer_encoder_layer_dynamic():
    torch = pytest.importorskip("torch")
    fiamma.manual_seed(12)
    fm = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()
    tm = _torch_copy(torch, torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0,
                                                             batch_first=True).eval(), fm)
    xn = np.random.default_rng(2).standard_normal((2, 6, 16)).astype(np.float32)
    fep = export(fm, (fiamma.tensor(xn),),
                 dynamic_shapes=({0: Dim("batch"), 1: Dim("seq", max=64)},))
    tep = torch.export.export(tm, (torch.from_numpy(xn),), dynamic_shapes=(
        {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq", max=64)},))
    assert _sig(fep) == _sig(tep)
    assert [(r.lower, r.upper) for r in fep.range_constraints.values()] == [(2, float("inf")),
                                                                           (2, 64)]
    x2 = np.random.default_rng(3).standard_normal((3, 11, 16)).astype(np.float32)
    got = fep.module()(fiamma.tensor(x2)).detach().numpy()
    want = tep.module()(torch.from_numpy(x2)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_shapes_collection_and_int_sizes():
    class Nested(nn.Module):
        def forward(self, d):
            return d["x"][:, :-1] * d["others"][0].sum()

    x, y, z = fiamma.randn(4, 5, 8), fiamma.randn(3), fiamma.randn(2)
    dim = Dim("dim")
    sc = fiamma.export.ShapesCollection()
    sc[x] = (dim, dim + 1, 8)
    sc[y] = {0: Dim("n")}
    assert repr(sc.dynamic_shapes(Nested(), ({"x": x, "others": [y, z]},))) == \
        "({'x': (Dim('dim', min=0), dim + 1, 8), 'others': [{0: Dim('n', min=0)}, None]},)"
    ep = export(Nested(), ({"x": x, "others": [y, z]},), dynamic_shapes=sc)
    x2 = fiamma.randn(6, 7, 8)
    got = ep.module()({"x": x2, "others": [fiamma.ones(5), z]})
    _close(got, x2[:, :-1] * 5.0)
    with pytest.raises(AssertionError, match="dim \\+ 1"):
        ep.module()({"x": fiamma.randn(6, 6, 8), "others": [y, z]})
    with pytest.raises(UserError, match="static size 9"):
        export(Nested(), ({"x": x, "others": [y, z]},),
               dynamic_shapes=({"x": (dim, dim + 1, 9), "others": None},))


def test_in_place_writes_to_inputs_and_buffers():
    class Mut(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", fiamma.zeros(()))

        def forward(self, x):
            self.count.add_(1)
            x.mul_(2)
            return x + self.count

    m = Mut()
    x = fiamma.ones(3)
    ep = export(m, (x,))
    # the example run changed neither the module nor the input
    assert float(m.count) == 0.0 and x.tolist() == [1.0, 1.0, 1.0]
    kinds = [(s.kind, s.target) for s in ep.graph_signature.output_specs]
    assert kinds == [(OutputKind.BUFFER_MUTATION, "count"),
                     (OutputKind.USER_INPUT_MUTATION, "x"), (OutputKind.USER_OUTPUT, None)]
    mod = _roundtrip(ep).module()
    x = fiamma.ones(3)
    assert mod(x).tolist() == [3.0, 3.0, 3.0] and x.tolist() == [2.0, 2.0, 2.0]
    assert mod(x).tolist() == [6.0, 6.0, 6.0] and float(mod.count) == 2.0


@pytest.mark.parity
def test_parity_mutations():
    torch = pytest.importorskip("torch")

    class TMut(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(()))

        def forward(self, x):
            self.count.add_(1)
            x.mul_(2)
            return x + self.count

    class FMut(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", fiamma.zeros(()))

        def forward(self, x):
            self.count.add_(1)
            x.mul_(2)
            return x + self.count

    tep = torch.export.export(TMut(), (torch.ones(3),)).run_decompositions()
    fep = export(FMut(), (fiamma.ones(3),))
    assert [(s.kind.name, s.target) for s in fep.graph_signature.output_specs] == \
        [(s.kind.name, s.target) for s in tep.graph_signature.output_specs]
    tx, fx_ = torch.ones(3), fiamma.ones(3)
    tmod, fmod = tep.module(), fep.module()
    for _ in range(2):
        assert fmod(fx_).tolist() == tmod(tx).tolist()
        assert fx_.tolist() == tx.tolist()


def test_aoti_package_round_trip(tmp_path):
    import fiamma._inductor as inductor

    fiamma.manual_seed(13)
    m = MLP().eval()
    ep = export(m, (fiamma.randn(4, 6),), dynamic_shapes=({0: Dim("b")},))
    path = inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "m.pt2"))
    assert path == str(tmp_path / "m.pt2")
    runner = inductor.aoti_load_package(path)
    x = fiamma.randn(9, 6)
    _close(runner(x), m(x))


class Loop(nn.Module):
    def forward(self, x):
        acc = x[0] * 0
        for i in range(x.shape[0]):
            acc = acc + x[i] * i
        return acc


def test_range_over_a_dynamic_size_specialises():
    # Python takes the loop count without asking the size: without a guard the program would
    # run 4 iterations for any batch
    with pytest.raises(ConstraintViolationError, match=r"specialized it to be a constant \(4\)"):
        export(Loop(), (fiamma.randn(4, 3),), dynamic_shapes=({0: Dim("b")},))
    ep = export(Loop(), (fiamma.randn(4, 3),), dynamic_shapes=({0: Dim.AUTO},))
    assert ep.range_constraints == {}  # static, as PyTorch makes an AUTO dim it specialises
    with pytest.raises(AssertionError, match=r"x.size\(\)\[0\] == 4"):
        ep.module()(fiamma.randn(5, 3))
    x = fiamma.randn(4, 3)
    _close(ep.module()(x), Loop()(x))
    assert "range" not in globals()  # the export's stand-in is gone
