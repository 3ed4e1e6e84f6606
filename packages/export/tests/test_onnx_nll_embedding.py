"""F.nll_loss and F.embedding (core's one-op nll_loss and embedding) through fiamma.jit (one
traced op each, run by the traced module) and fiamma.onnx (NegativeLogLikelihoodLoss, Gather):
ONNX Runtime and the traced module against eager, for every reduction, class weights,
ignore_index and spatial inputs; an embedding model and its gradient through the trace."""

import io

import numpy as np
import pytest

import fiamma
import fiamma.nn.functional as F
from fiamma import nn

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
import fiamma.jit  # noqa: E402
import fiamma.onnx  # noqa: E402

rng = np.random.default_rng(0)


def _run_onnx(f, args, opset=None):
    buf = io.BytesIO()
    fiamma.onnx.export(f, args, buf, opset_version=opset)
    model = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)}
    return sess.run(None, feeds), model


def _logp(shape):
    return fiamma.tensor(rng.standard_normal(shape), dtype=fiamma.float32).log_softmax(
        0 if len(shape) == 1 else 1)


NLL_CASES = {
    "1d": ((5,), ()),
    "2d": ((6, 5), (6,)),
    "3d": ((3, 5, 4), (3, 4)),
    "4d": ((2, 5, 3, 2), (2, 3, 2)),
}


@pytest.mark.parametrize("case", sorted(NLL_CASES))
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("opset", [17, None])
def test_nll_loss_traces_as_one_op_and_exports(case, reduction, weighted, opset):
    xshape, tshape = NLL_CASES[case]
    x = _logp(xshape)
    c = xshape[0] if len(xshape) == 1 else xshape[1]
    t = fiamma.tensor(rng.integers(0, c, tshape))
    if t.numel() > 1:
        t.view(-1)[0] = 2  # an ignored entry
    w = fiamma.tensor(rng.uniform(0.5, 2.0, c), dtype=fiamma.float32) if weighted else None

    def f(x, t):
        return F.nll_loss(x, t, w, ignore_index=2, reduction=reduction)

    tm = fiamma.jit.trace(f, (x, t))
    assert [n.op for n in tm.graph.nodes].count("nll_loss") == 1
    want = f(x, t).numpy()
    np.testing.assert_allclose(tm(x, t).numpy(), want, rtol=1e-6, atol=1e-7)
    (got,), model = _run_onnx(f, (x, t), opset)
    assert "NegativeLogLikelihoodLoss" in {n.op_type for n in model.graph.node}
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_nll_loss_traced_module_reruns_on_new_targets():
    x = _logp((4, 3))

    def f(x, t):
        return F.nll_loss(x, t)

    tm = fiamma.jit.trace(f, (x, fiamma.tensor([0, 1, 2, 0])))
    t2 = fiamma.tensor([2, 2, 1, 0])
    np.testing.assert_allclose(tm(x, t2).numpy(), f(x, t2).numpy(), rtol=1e-6)


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8, padding_idx=0)
        self.out = nn.Linear(8, 20)

    def forward(self, ids):
        return self.out(self.emb(ids)).log_softmax(-1)


def test_embedding_traces_as_one_op_and_exports_as_gather():
    m = LM().eval()
    ids = fiamma.randint(0, 20, (2, 5))
    tm = fiamma.jit.trace(m, (ids,))
    assert [n.op for n in tm.graph.nodes].count("embedding") == 1
    ids2 = fiamma.randint(0, 20, (2, 5))
    np.testing.assert_allclose(tm(ids2).detach().numpy(), m(ids2).detach().numpy(), rtol=1e-6)
    (got,), model = _run_onnx(m, (ids,))
    assert "Gather" in {n.op_type for n in model.graph.node}
    np.testing.assert_allclose(got, m(ids).detach().numpy(), rtol=1e-5, atol=1e-6)
    # int32 indices and the functional form
    w = fiamma.randn(7, 3)
    i32 = fiamma.tensor([[1, 6], [0, 0]], dtype=fiamma.int32)

    def f(i):
        return F.embedding(i, w) * 2.0

    (got,), _ = _run_onnx(f, (i32,))
    np.testing.assert_allclose(got, f(i32).numpy(), rtol=1e-6)


class LMLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.lm = LM()

    def forward(self, ids, tgt):
        return F.nll_loss(self.lm(ids).reshape(-1, 20), tgt.reshape(-1))


def test_traced_language_model_loss_and_gradients():
    m = LMLoss()
    ids = fiamma.randint(1, 20, (3, 4))
    tgt = fiamma.randint(0, 20, (3, 4))
    tm = fiamma.jit.trace(m, (ids, tgt))
    ops = [n.op for n in tm.graph.nodes]
    assert ops.count("nll_loss") == 1 and ops.count("embedding") == 1
    want = m(ids, tgt)
    got = tm(ids, tgt)
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
    w = m.lm.emb.weight
    (ge,) = fiamma.autograd.grad(want, w)
    (gt,) = fiamma.autograd.grad(got, w)
    assert ge.abs().sum().item() > 0
    np.testing.assert_allclose(gt.numpy(), ge.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("case", sorted(NLL_CASES))
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_traces_as_one_op_and_exports(case, reduction, weighted):
    xshape, tshape = NLL_CASES[case]
    x = fiamma.tensor(rng.standard_normal(xshape), dtype=fiamma.float32)
    c = xshape[0] if len(xshape) == 1 else xshape[1]
    t = fiamma.tensor(rng.integers(0, c, tshape))
    if t.numel() > 1:
        t.view(-1)[0] = 2
    w = fiamma.tensor(rng.uniform(0.5, 2.0, c), dtype=fiamma.float32) if weighted else None

    def f(x, t):
        return F.cross_entropy(x, t, w, ignore_index=2, reduction=reduction)

    tm = fiamma.jit.trace(f, (x, t))
    assert [n.op for n in tm.graph.nodes].count("cross_entropy_loss") == 1
    want = f(x, t).numpy()
    np.testing.assert_allclose(tm(x, t).numpy(), want, rtol=1e-6, atol=1e-7)
    (got,), _ = _run_onnx(f, (x, t))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_cross_entropy_label_smoothing_traces_but_does_not_export():
    x = fiamma.randn(4, 5)
    t = fiamma.tensor([0, 1, 2, 3])

    def f(x, t):
        return F.cross_entropy(x, t, label_smoothing=0.1)

    tm = fiamma.jit.trace(f, (x, t))
    np.testing.assert_allclose(tm(x, t).item(), f(x, t).item(), rtol=1e-6)
    with pytest.raises(fiamma.onnx.UnsupportedOpError, match="label_smoothing"):
        fiamma.onnx.export(f, (x, t), io.BytesIO())
