"""Gradients of the index and sort ops on the array-module reference device ``xp``: the
backward formulas build their buffers on the gradient's device, and give the CPU's values."""

import numpy as np
import pytest

import fiamma


def _t(data, d):
    return fiamma.tensor(data, device=d)


CASES = {
    "getitem": lambda x, d: (x[_t([0, 2, 0], d)] * 2).sum(),
    "getitem_view": lambda x, d: x[0].expand(3, 4)[_t([0, 1], d)].sum(),
    "gather": lambda x, d: x.gather(1, _t([[0], [1], [1]], d)).sum(),
    "index_select": lambda x, d: x.index_select(1, _t([0, 2, 0], d)).sum(),
    "take_put": lambda x, d: x.put(_t([0, 5], d), x.take(_t([1, 2], d)) * 3,
                                   accumulate=True).sum(),
    "index_put": lambda x, d: x.index_put((_t([1, 1], d),), x[0] * 2, accumulate=True).sum(),
    "setitem": lambda x, d: (lambda y: (y.__setitem__((_t([0, 2], d),), x[1] * 5), y)[1])(
        x * 1).sum(),
    "masked_select": lambda x, d: x.masked_select(x > 3).sum(),
    "scatter_mean": lambda x, d: x.scatter_reduce(1, _t([[0, 0], [1, 1], [2, 3]], d),
                                                  x[:, :2] * 2, "mean",
                                                  include_self=False).sum(),
    "scatter_amax": lambda x, d: x.scatter_reduce(1, _t([[0, 0], [1, 1], [2, 3]], d),
                                                  x[:, :2] * 2, "amax").sum(),
    "sort": lambda x, d: (x.sort(1).values[:, 0] * 3).sum(),
    "topk": lambda x, d: x.topk(2).values.sum(),
    "cummax": lambda x, d: x.cummax(1).values.sum(),
    "median": lambda x, d: x.median(1).values.sum() + x.median(),
    "kthvalue": lambda x, d: x.kthvalue(2, 0).values.sum(),
    "mode": lambda x, d: x.mode(1).values.sum(),
    "diff": lambda x, d: x.diff(1, prepend=0.5).sum(),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_index_sort_grads_on_xp(name):
    grads = []
    for dev in ("cpu", "xp"):
        x = fiamma.tensor(np.arange(12.0).reshape(3, 4) % 5, device=dev, requires_grad=True)
        CASES[name](x, dev).backward()
        assert x.grad.device.type == dev
        grads.append(x.grad.cpu().numpy())
    np.testing.assert_array_equal(grads[1], grads[0])
