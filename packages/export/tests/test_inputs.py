"""Keyword and dict inputs, nested outputs and dynamic_shapes (torch.onnx.export's and
torch.jit.trace's conventions)."""

import io
import warnings

import numpy as np
import pytest
from models import randn

import fiamma
import fiamma.jit
import fiamma.nn as nn

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
import fiamma.onnx  # noqa: E402


class Masked(nn.Module):
    """forward(x, mask=None, scale=...) with nested dict/tuple outputs."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x, mask=None, bias=None):
        y = self.lin(x)
        if mask is not None:
            y = y.masked_fill(mask.unsqueeze(-1), 0.0)
        if bias is not None:
            y = y + bias["b"] * bias["w"][0]
        return {"logits": y, "aux": (y.sum(-1), [y.amax(-1)])}


def _data(b=2, t=5, seed=0):
    fiamma.manual_seed(seed)
    return fiamma.randn(b, t, 4), fiamma.rand(b, t) > 0.5


def _flat_eager(m, *a, **k):
    with fiamma.no_grad():
        out = m(*a, **k)
    return [out["logits"], out["aux"][0], out["aux"][1][0]]


def _export(m, args, **kw):
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error", fiamma.jit.TracerWarning)
        fiamma.onnx.export(m, args, buf, **kw)
    model = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(model, full_check=True)
    return model, ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])


def test_trailing_dict_is_keyword_inputs_and_outputs_are_named():
    m = Masked().eval()
    x, mask = _data()
    model, sess = _export(m, (x, {"mask": mask}))
    assert [i.name for i in sess.get_inputs()] == ["input_0", "mask"]
    assert [o.name for o in sess.get_outputs()] == ["logits", "aux_0", "aux_1_0"]
    got = sess.run(None, {"input_0": x.numpy(), "mask": mask.numpy()})
    for g, w in zip(got, _flat_eager(m, x, mask=mask)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)


def test_kwargs_argument_nested_dict_and_dynamic_shapes():
    """kwargs= with a nested dict input; dynamic_shapes by parameter name (the output axes
    that follow are found and named)."""
    m = Masked().eval()
    x, mask = _data()
    bias = {"b": randn(3, seed=1), "w": (randn(1, seed=2),)}
    model, sess = _export(m, (x,), kwargs={"mask": mask, "bias": bias},
                          dynamic_shapes={"x": {0: "batch", 1: "seq"},
                                          "mask": {0: "batch", 1: "seq"}, "bias": None})
    names = [i.name for i in sess.get_inputs()]
    assert names == ["input_0", "mask", "bias_b", "bias_w_0"]
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "seq", 4]
    out_dims = [d.dim_param or d.dim_value
                for d in model.graph.output[0].type.tensor_type.shape.dim]
    assert out_dims == ["logits_dim_0", "logits_dim_1", 3]
    x2, mask2 = _data(3, 7, seed=4)
    got = sess.run(None, dict(zip(names, [x2.numpy(), mask2.numpy(), bias["b"].numpy(),
                                          bias["w"][0].numpy()])))
    for g, w in zip(got, _flat_eager(m, x2, mask=mask2, bias=bias)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)


def test_dynamic_shapes_as_a_tuple_and_dim_objects():
    class Dim:  # torch.export.Dim's shape: named by __name__
        __name__ = "B"

    m = Masked().eval()
    x, mask = _data()
    model, sess = _export(m, (x, mask, {}), dynamic_shapes=([Dim(), None, None], {0: "B"}),
                          input_names=["x", "m"])
    assert [d.dim_param or d.dim_value
            for d in model.graph.input[1].type.tensor_type.shape.dim] == ["B", 5]
    x2, mask2 = _data(4)
    got = sess.run(None, {"x": x2.numpy(), "m": mask2.numpy()})
    np.testing.assert_allclose(got[0], _flat_eager(m, x2, mask2)[0].numpy(), rtol=1e-5,
                               atol=1e-6)


def test_dynamic_shapes_errors():
    m = Masked().eval()
    x, mask = _data()
    with pytest.raises(ValueError, match="not both"):
        fiamma.onnx.export(m, (x,), None, dynamic_axes={"input_0": [0]},
                           dynamic_shapes={"x": {0: "b"}})
    with pytest.raises(ValueError, match="axis 3"):
        fiamma.onnx.export(m, (x,), None, dynamic_shapes={"x": {3: "b"}})
    with pytest.raises(ValueError, match="entries"):
        fiamma.onnx.export(m, (x,), None, dynamic_shapes=({0: "b"}, None))


def test_dict_positional_input():
    def f(batch):
        return batch["x"] * 2 + batch["y"]

    x, y = randn(2, 3), randn(2, 3, seed=1)
    model, sess = _export(f, ({"x": x, "y": y}, {}))  # {} last: no keyword inputs
    assert [i.name for i in sess.get_inputs()] == ["x", "y"]
    np.testing.assert_allclose(sess.run(None, {"x": x.numpy(), "y": y.numpy()})[0],
                               (x * 2 + y).numpy(), rtol=1e-6)


def test_jit_trace_keyword_inputs(tmp_path):
    m = Masked().eval()
    x, mask = _data()
    tm = fiamma.jit.trace(m, (x,), example_kwarg_inputs={"mask": mask})
    x2, mask2 = _data(3, 6, seed=2)
    with fiamma.no_grad():
        out = tm(x2, mask=mask2)
    assert set(out) == {"logits", "aux"}
    for g, w in zip([out["logits"], out["aux"][0], out["aux"][1][0]],
                    _flat_eager(m, x2, mask=mask2)):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-6)
    p = tmp_path / "m.pt"
    tm.save(str(p))
    loaded = fiamma.jit.load(str(p))
    np.testing.assert_allclose(loaded(x2, mask=mask2)["logits"].numpy(),
                               out["logits"].numpy())
    with pytest.raises(TypeError, match="keyword inputs"):
        tm(x2, other=mask2)
