"""AugMix (v1 and v2): the Dirichlet sampler's moments, the mix as a convex combination of the
original and the chains (checked with the ops replaced by known ones), seeded
reproducibility, types, and the errors."""
import numpy as np
import pytest

import fiamma
from fiamma.vision import transforms as T, tv_tensors as tv
from fiamma.vision.transforms import _autoaugment as A, v2


def test_dirichlet_moments():
    fiamma.manual_seed(0)
    draws = np.array([A.sample_dirichlet([1.0, 2.0, 3.0]) for _ in range(3000)])
    np.testing.assert_allclose(draws.sum(1), 1.0, atol=1e-12)
    assert (draws > 0).all()
    # mean a_i / sum(a), variance a_i (a0 - a_i) / (a0^2 (a0 + 1))
    np.testing.assert_allclose(draws.mean(0), [1 / 6, 2 / 6, 3 / 6], atol=0.02)
    np.testing.assert_allclose(draws.var(0)[0], 1 * 5 / (36 * 7), rtol=0.15)


def test_mix_is_convex_combination(monkeypatch):
    img = fiamma.full((3, 8, 8), 100, dtype=fiamma.uint8)
    # every op adds 40 to the image: the result is 100 + 40 * (augmented share), between them
    monkeypatch.setattr(A, "_apply_op", lambda im, *a: (im.to(fiamma.int32) + 40).to(im.dtype))
    m = T.AugMix(chain_depth=1, mixture_width=2)
    fixed = {"calls": 0}

    def dirichlet(alphas, rows):
        fixed["calls"] += 1
        return fiamma.tensor([[0.25, 0.75]] if fixed["calls"] == 1 else [[0.5, 0.5]])
    monkeypatch.setattr(m, "_sample_dirichlet", dirichlet)
    out = m(img)
    # 0.25 * 100 + 0.75 * (0.5 * 140 + 0.5 * 140) = 130
    assert out.dtype == fiamma.uint8 and out.tolist() == img.fill_(130).tolist()


def test_seeded_types_and_errors():
    img = fiamma.randint(0, 256, (2, 3, 12, 12), dtype=fiamma.uint8)
    fiamma.manual_seed(3)
    a = T.AugMix(severity=5)(img)
    fiamma.manual_seed(3)
    b = T.AugMix(severity=5)(img)
    assert a.dtype == fiamma.uint8 and tuple(a.shape) == (2, 3, 12, 12)
    assert bool((a == b).all())
    from PIL import Image
    pil = Image.fromarray((np.random.RandomState(0).rand(10, 12, 3) * 255).astype(np.uint8))
    assert T.AugMix()(pil).size == (12, 10)
    with pytest.raises(TypeError, match="uint8"):
        T.AugMix()(fiamma.rand(3, 8, 8))
    with pytest.raises(ValueError, match="severity"):
        T.AugMix(severity=11)
    out = v2.AugMix()({"image": tv.Image(img[0]), "label": 3})
    assert isinstance(out["image"], tv.Image) and out["label"] == 3
    with pytest.raises(TypeError, match="BoundingBoxes"):
        v2.AugMix()({"image": tv.Image(img[0]),
                     "boxes": tv.BoundingBoxes([[0, 0, 2, 2]], format="XYXY",
                                               canvas_size=(12, 12))})
