"""fiamma.detection.nms (core's public detection kernel) against a greedy float64 loop."""
import numpy as np
import pytest

import fiamma
from fiamma import detection


def _ref(b, s, thr):
    order = sorted(range(len(s)), key=lambda i: (-s[i], i))
    keep, dead = [], np.zeros(len(s), bool)
    for i in order:
        if dead[i]:
            continue
        keep.append(i)
        for j in order:
            if dead[j] or j == i:
                continue
            w = max(0.0, min(b[i, 2], b[j, 2]) - max(b[i, 0], b[j, 0]))
            h = max(0.0, min(b[i, 3], b[j, 3]) - max(b[i, 1], b[j, 1]))
            inter = w * h
            a_i = (b[i, 2] - b[i, 0]) * (b[i, 3] - b[i, 1])
            a_j = (b[j, 2] - b[j, 0]) * (b[j, 3] - b[j, 1])
            if inter > 0 and inter / (a_i + a_j - inter) > thr:
                dead[j] = True
    return keep


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nms_vs_loop(dtype):
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 60, (150, 2))
    b = np.concatenate([xy, xy + rng.uniform(2, 30, (150, 2))], 1)
    s = rng.uniform(0, 1, 150)
    s[3] = s[7]
    for thr in (0.0, 0.25, 0.6):
        got = detection.nms(fiamma.from_numpy(b.astype(dtype)),
                            fiamma.from_numpy(s.astype(dtype)), thr)
        assert got.dtype == fiamma.int64
        assert got.tolist() == _ref(b.astype(dtype).astype(np.float64), s.astype(dtype), thr)


def test_nms_strided_empty_and_errors():
    b = fiamma.tensor([[0., 0., 10., 10.], [1., 1., 11., 11.], [20., 20., 30., 30.]])
    s = fiamma.tensor([0.9, 0.8, 0.7, 0.1])[:3]
    assert detection.nms(b.t().contiguous().t(), s, 0.5).tolist() == [0, 2]
    assert detection.nms(fiamma.zeros((0, 4)), fiamma.zeros(0), 0.5).tolist() == []
    with pytest.raises(ValueError, match="detection.nms"):
        detection.nms(fiamma.zeros((3, 3)), fiamma.zeros(3), 0.5)
    with pytest.raises(TypeError, match="detection.nms"):
        detection.nms(fiamma.zeros((3, 4)), fiamma.zeros(3, dtype=fiamma.float64), 0.5)
    with pytest.raises(TypeError, match="detection.nms"):
        detection.nms([[0, 0, 1, 1]], fiamma.zeros(1), 0.5)
