"""transforms.v2.functional.register_kernel: kernels for user tv_tensor classes, reached from
the functionals (by object or name) and from the v2 transforms; torchvision's errors."""
import pytest

import fiamma
from fiamma.vision import tv_tensors
from fiamma.vision.transforms import v2
from fiamma.vision.transforms.v2 import functional as F


def _fresh_cls(name="Mine", base=tv_tensors.TVTensor):
    return type(name, (base,), {})


def test_registered_kernel_runs_from_functional_and_transform():
    Mine = _fresh_cls()
    calls = []

    @F.register_kernel(functional="hflip", tv_tensor_cls=Mine)
    def hflip_mine(x, *args, **kwargs):
        calls.append((type(x), args, kwargs))
        return tv_tensors.wrap(x.flip(-1), like=x)

    assert hflip_mine.__name__ == "hflip_mine"          # the decorator returns the kernel
    x = Mine(fiamma.arange(6.0).reshape(2, 3))
    out = F.hflip(x)
    assert type(out) is Mine and out.tolist() == [[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]]
    # hflip and horizontal_flip are one functional
    assert F.horizontal_flip(x).tolist() == out.tolist()
    out = v2.RandomHorizontalFlip(p=1)(x)
    assert type(out) is Mine and out.tolist() == [[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]]
    assert len(calls) == 3 and calls[0] == (Mine, (), {})


def test_kernel_gets_the_other_parameters_as_keywords_with_defaults():
    Mine = _fresh_cls()
    seen = {}

    @F.register_kernel(F.resize, Mine)
    def resize_mine(x, **kwargs):
        seen.update(kwargs)
        return x

    F.resize(Mine([[1.0]]), [4, 5], max_size=None)
    assert seen["size"] == [4, 5] and seen["max_size"] is None
    assert seen["interpolation"] == F.InterpolationMode.BILINEAR and seen["antialias"] is True


def test_subclass_uses_parent_kernel_and_builtin_subclass_uses_builtin_kernel():
    Mine = _fresh_cls()
    F.register_kernel("vflip", Mine)(lambda x, *a, **k: "mine")
    Child = _fresh_cls("Child", Mine)
    assert F.vflip(Child([1.0])) == "mine"
    MyBoxes = _fresh_cls("MyBoxes", tv_tensors.BoundingBoxes)
    b = MyBoxes._wrap(fiamma.tensor([[1, 2, 4, 6]]), format=tv_tensors.BoundingBoxFormat.XYXY,
                      canvas_size=(10, 10), clamping_mode="soft")
    assert F.horizontal_flip(b).tolist() == [[6, 2, 9, 6]]


def test_unregistered_user_tv_tensor_raises_in_functional_passes_through_transforms():
    Mine = _fresh_cls()
    x = Mine(fiamma.rand(3, 4, 4))
    with pytest.raises(TypeError, match="F.horizontal_flip supports inputs of type"):
        F.horizontal_flip(x)
    img = tv_tensors.Image(fiamma.rand(3, 4, 4))
    out_img, out_x = v2.RandomHorizontalFlip(p=1)(img, x)
    assert out_x is x
    assert out_img.tolist() == img.flip(-1).tolist()
    # size queries ignore user tv_tensors
    out_img, out_x = v2.RandomCrop(2)(img, x)
    assert tuple(out_img.shape) == (3, 2, 2) and out_x is x


def test_register_kernel_errors():
    Mine = _fresh_cls()
    with pytest.raises(ValueError, match="Could not find functional with name 'nope'"):
        F.register_kernel("nope", Mine)
    with pytest.raises(ValueError, match="only be registered on functionals"):
        F.register_kernel(lambda x: x, Mine)
    with pytest.raises(ValueError, match="subclasses of fiamma.vision.tv_tensors.TVTensor"):
        F.register_kernel("hflip", fiamma.Tensor)
    with pytest.raises(ValueError, match="subclasses of fiamma.vision.tv_tensors.TVTensor"):
        F.register_kernel("hflip", "Image")
    for cls in (tv_tensors.TVTensor, tv_tensors.Image, tv_tensors.BoundingBoxes,
                tv_tensors.Mask, tv_tensors.Video, tv_tensors.KeyPoints):
        with pytest.raises(ValueError, match="builtin tv_tensor classes"):
            F.register_kernel("hflip", cls)
    F.register_kernel("crop", Mine)(lambda x, **k: x)
    with pytest.raises(ValueError, match="already has a kernel registered"):
        F.register_kernel(F.crop, Mine)


def test_builtin_inputs_unaffected():
    img = fiamma.arange(4.0).reshape(1, 2, 2)
    assert F.hflip(img).tolist() == [[[1.0, 0.0], [3.0, 2.0]]]
    assert type(F.hflip(tv_tensors.Mask(img))) is tv_tensors.Mask
