"""``export`` returns an ONNXProgram as torch.onnx.export does (PyTorch's ONNX tutorial calls
``optimize()`` and ``save()`` on it): saving (inline, external data, without weights, weights as
inputs), running it on fiamma tensors through ONNX Runtime, swapping weights in, and the
proto's attributes through the program."""

import io

import numpy as np
import pytest

import fiamma
import fiamma.nn as nn
import fiamma.nn.functional as F

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
import fiamma.onnx  # noqa: E402
from fiamma.onnx import ONNXProgram  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x):
        return self.fc(F.relu(self.conv(x)).flatten(1))


def _net():
    fiamma.manual_seed(0)
    return Net().eval()


def test_tutorial_flow(tmp_path):
    model, x = _net(), fiamma.randn(1, 1, 8, 8)
    prog = fiamma.onnx.export(model, (x,), dynamo=True)
    assert isinstance(prog, ONNXProgram)
    assert isinstance(prog.model_proto, onnx.ModelProto) and prog.model is prog.model_proto
    ep = prog.exported_program  # made by fiamma.export on first access, then kept
    assert type(ep).__name__ == "ExportedProgram" and prog.exported_program is ep
    assert float((ep.module()(x) - model(x)).abs().max()) < 1e-6
    assert prog.optimize() is None
    path = tmp_path / "m.onnx"
    prog.save(str(path))
    onnx.checker.check_model(onnx.load(str(path)))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {i.name: v for i, v in zip(sess.get_inputs(), [x.numpy()])}
    np.testing.assert_allclose(sess.run(None, feeds)[0], model(x).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    # the proto's attributes through the program; the program runs itself
    assert [i.name for i in prog.graph.input] == ["input_0"]
    assert prog.SerializeToString() == prog.model_proto.SerializeToString()
    out = prog(x)
    assert isinstance(out, tuple) and len(out) == 1 and isinstance(out[0], fiamma.Tensor)
    np.testing.assert_allclose(out[0].numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert "ONNXProgram(" in repr(prog) and "Conv" in repr(prog)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        prog.nope


def test_return_values_with_a_file():
    model, x = _net(), fiamma.randn(1, 1, 8, 8)
    buf = io.BytesIO()
    prog = fiamma.onnx.export(model, (x,), buf)
    assert isinstance(prog, ONNXProgram)
    assert buf.getvalue() == prog.model_proto.SerializeToString()
    assert fiamma.onnx.export(model, (x,), io.BytesIO(), dynamo=False) is None


def test_save_variants(tmp_path):
    model, x = _net(), fiamma.randn(2, 1, 8, 8)
    prog = fiamma.onnx.export(model, (x,))
    n_init = len(prog.model_proto.graph.initializer)
    assert n_init > 0
    ext = tmp_path / "ext.onnx"
    prog.save(ext, external_data=True)
    assert (tmp_path / "ext.onnx.data").stat().st_size > 0
    sess = ort.InferenceSession(str(ext), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"input_0": x.numpy()})[0],
                               model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    bare = tmp_path / "bare.onnx"
    prog.save(bare, include_initializers=False)
    assert len(onnx.load(str(bare)).graph.initializer) == 0
    as_inputs = tmp_path / "inputs.onnx"
    prog.save(as_inputs, keep_initializers_as_inputs=True)
    g = onnx.load(str(as_inputs)).graph
    assert len(g.input) == 1 + n_init and len(g.initializer) == n_init
    buf = io.BytesIO()
    prog.save(buf)
    assert buf.getvalue() == prog.model_proto.SerializeToString()
    with pytest.raises(ValueError, match="needs a path"):
        prog.save(io.BytesIO(), external_data=True)
    # the program's own proto is untouched by the variants
    assert len(prog.model_proto.graph.initializer) == n_init


def test_keyword_and_nested_inputs_and_complex_outputs():
    class M(nn.Module):
        def forward(self, x, pair, scale=None):
            return {"a": x * scale + pair[0], "b": fiamma.fft.rfft(pair[1])}

    x, p0, p1, s = (fiamma.randn(3, 4) for _ in range(4))
    prog = fiamma.onnx.export(M(), (x, (p0, p1)), kwargs={"scale": s})
    a, b = prog(x, (p0, p1), scale=s)
    np.testing.assert_allclose(a.numpy(), (x * s + p0).numpy(), rtol=1e-6)
    assert b.dtype is fiamma.complex64
    np.testing.assert_allclose(b.numpy(), np.fft.rfft(p1.numpy()), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="takes 4 input tensors"):
        prog(x)


def test_apply_weights():
    model, x = _net(), fiamma.randn(1, 1, 8, 8)
    prog = fiamma.onnx.export(model, (x,))
    before = prog(x)[0]
    new = fiamma.randn(4, 1, 3, 3)
    prog.apply_weights({"conv.weight": new})
    with fiamma.no_grad():
        model.conv.weight.copy_(new)
    after = prog(x)[0]
    assert not np.allclose(after.numpy(), before.numpy())
    np.testing.assert_allclose(after.numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    folded = [k for k in model.state_dict()
              if k not in {t.name for t in prog.model_proto.graph.initializer}]
    assert folded, "expected the linear weight to be folded (transposed) at export"
    with pytest.raises(ValueError, match="folded into other constants"):
        prog.apply_weights({folded[0]: model.state_dict()[folded[0]]})
    with pytest.warns(UserWarning, match="not found in the model"):
        prog.apply_weights({"nothing.here": fiamma.zeros(1)})
    with pytest.raises(ValueError, match=r"has shape \(4, 1, 3, 3\)"):
        prog.apply_weights({"conv.weight": fiamma.zeros(2, 2)})
