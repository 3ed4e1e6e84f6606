"""Core's fused elementwise losses through fiamma.jit (traced as one op each, run by the
traced module) and fiamma.onnx (the formula in ONNX ops): ONNX Runtime and the traced module
against eager for every loss and reduction, with weights and broadcasting."""

import io
import warnings

import numpy as np
import pytest

import fiamma
import fiamma.nn.functional as F

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
import fiamma.jit  # noqa: E402
import fiamma.onnx  # noqa: E402

rng = np.random.default_rng(0)
X = fiamma.tensor(rng.standard_normal((6, 5)), dtype=fiamma.float32)
P = fiamma.tensor(rng.uniform(0.02, 0.98, (6, 5)), dtype=fiamma.float32)
T = fiamma.tensor(rng.uniform(0.02, 1.0, (6, 5)), dtype=fiamma.float32)
S = fiamma.tensor(np.sign(rng.standard_normal((6, 5))), dtype=fiamma.float32)
W = fiamma.tensor(rng.uniform(0.5, 2.0, (5,)), dtype=fiamma.float32)

CASES = {
    "mse": (lambda x, t, r: F.mse_loss(x, t, reduction=r), (X, T)),
    "mse_broadcast": (lambda x, t, r: F.mse_loss(x, t[:1], reduction=r), (X, T)),
    "l1": (lambda x, t, r: F.l1_loss(x, t, reduction=r), (X, T)),
    "smooth_l1": (lambda x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.5), (X, T)),
    "huber": (lambda x, t, r: F.huber_loss(x, t, reduction=r, delta=0.7), (X, T)),
    "bce": (lambda p, t, r: F.binary_cross_entropy(p, t.clamp(max=1.0), reduction=r), (P, T)),
    "bce_weight": (lambda p, t, r: F.binary_cross_entropy(p, t, W, reduction=r), (P, T)),
    "bce_logits": (lambda x, t, r: F.binary_cross_entropy_with_logits(x, t, reduction=r),
                   (X, T)),
    "bce_logits_weights": (lambda x, t, r: F.binary_cross_entropy_with_logits(
        x, t, W, reduction=r, pos_weight=W * 2), (X, T)),
    "soft_margin": (lambda x, s, r: F.soft_margin_loss(x, s, reduction=r), (X, S)),
    "kl_div": (lambda x, t, r: F.kl_div(x, t, reduction=r), (X, T)),
    "kl_div_log": (lambda x, t, r: F.kl_div(x, t.log(), reduction=r, log_target=True), (X, T)),
    "kl_div_batchmean": (lambda x, t, r: F.kl_div(x, t, reduction="batchmean" if r == "mean"
                                                  else r), (X, T)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("opset", [17, None])  # the oldest supported and the newest
def test_loss_traces_as_one_op_and_exports(case, reduction, opset):
    fn, args = CASES[case]

    def f(a, b):
        return fn(a, b, reduction)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # kl_div's 'mean', mse's broadcast
        tm = fiamma.jit.trace(f, args)
        ops = [n.op for n in tm.graph.nodes]
        assert sum(op.endswith(("_loss", "cross_entropy", "logits", "kl_div")) for op in ops) == 1
        buf = io.BytesIO()
        fiamma.onnx.export(f, args, buf, opset_version=opset)
        want = f(*args).numpy()
    model = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tm(*args).numpy(), want, rtol=1e-6, atol=1e-7)
