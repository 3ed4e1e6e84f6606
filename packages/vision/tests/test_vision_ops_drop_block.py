"""drop_block2d/3d and DropBlock2d/3d: identity when off, zeroed regions made of whole
blocks, the drop rate and rescaling, and bad arguments."""
import numpy as np
import pytest

import fiamma
from fiamma.vision.ops import DropBlock2d, DropBlock3d, drop_block2d, drop_block3d


def test_identity_when_off_and_errors():
    x = fiamma.randn(2, 3, 8, 8)
    assert drop_block2d(x, 0.0, 3) is x
    assert drop_block2d(x, 0.5, 3, training=False) is x
    m = DropBlock2d(0.5, 3).eval()
    assert m(x) is x
    assert repr(m) == "DropBlock2d(p=0.5, block_size=3, inplace=False)"
    with pytest.raises(ValueError, match="drop_block2d"):
        drop_block2d(x, 1.5, 3)
    with pytest.raises(ValueError, match="drop_block2d"):
        drop_block2d(fiamma.randn(3, 8, 8), 0.1, 3)
    with pytest.raises(ValueError, match="odd"):
        drop_block2d(x, 0.1, 4)
    with pytest.raises(ValueError, match="drop_block3d"):
        drop_block3d(x, 0.1, 3)


def test_blocks_rate_and_scale():
    fiamma.manual_seed(0)
    x = fiamma.ones(4, 8, 32, 32)
    y = drop_block2d(x, 0.2, 5).numpy()
    zero = y == 0
    # every zeroed pixel lies inside a fully zeroed 5x5 square
    n, c, h, w = zero.shape
    for i, j, r, q in zip(*np.nonzero(zero)):
        ok = False
        for dr in range(-4, 1):
            for dq in range(-4, 1):
                r0, q0 = r + dr, q + dq
                if 0 <= r0 <= h - 5 and 0 <= q0 <= w - 5 and zero[i, j, r0:r0 + 5,
                                                                   q0:q0 + 5].all():
                    ok = True
                    break
            if ok:
                break
        assert ok
    frac = zero.mean()
    assert 0.12 < frac < 0.22          # seeds grow into overlapping blocks: at most p
    kept = y[~zero]
    np.testing.assert_allclose(kept, y.size / (~zero).sum(), rtol=1e-5)
    z = DropBlock3d(0.3, 3).train()(fiamma.ones(2, 2, 6, 6, 6))
    assert tuple(z.shape) == (2, 2, 6, 6, 6) and float((z == 0).float().mean()) > 0
