"""Memory formats: fiamma.channels_last / channels_last_3d / contiguous_format /
preserve_format as strided layouts (values never change, only strides), through contiguous,
clone, to, empty and the *_like functions; ops accept channels-last operands."""

import copy
import pickle

import numpy as np
import pytest

import fiamma

CL, CL3, CF, PF = (fiamma.channels_last, fiamma.channels_last_3d, fiamma.contiguous_format,
                   fiamma.preserve_format)


def test_constants():
    assert repr(CL) == "fiamma.channels_last" and isinstance(CL, fiamma.memory_format)
    assert pickle.loads(pickle.dumps(CL)) is CL and copy.deepcopy(PF) is PF
    assert len({CL, CL3, CF, PF, fiamma.legacy_contiguous_format}) == 5


def test_contiguous_channels_last_strides_and_values():
    x = fiamma.arange(120.0).reshape(2, 3, 4, 5)
    y = x.contiguous(memory_format=CL)
    assert y.stride() == (60, 1, 15, 3) and fiamma.equal(x, y)
    assert y.is_contiguous(memory_format=CL) and not y.is_contiguous()
    assert y.contiguous(memory_format=CL) is y  # already in the format
    back = y.contiguous()
    assert back.stride() == (60, 20, 5, 1) and fiamma.equal(back, x)
    z = fiamma.arange(240.0).reshape(2, 3, 2, 4, 5).contiguous(memory_format=CL3)
    assert z.stride() == (120, 1, 60, 15, 3) and z.is_contiguous(memory_format=CL3)
    # an NHWC array permuted to NCHW is channels-last already
    nhwc = fiamma.from_numpy(np.zeros((2, 4, 5, 3), np.float32)).permute(0, 3, 1, 2)
    assert nhwc.is_contiguous(memory_format=CL)
    # size-1 dims do not constrain their strides
    assert fiamma.zeros(1, 3, 1, 1).is_contiguous(memory_format=CL)
    assert not fiamma.zeros(3, 4).is_contiguous(memory_format=CL)  # wrong rank: False


def test_errors():
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last"):
        fiamma.zeros(3, 4).contiguous(memory_format=CL)
    with pytest.raises(RuntimeError, match="required rank 5 tensor"):
        fiamma.zeros(1, 2, 3, 4).to(memory_format=CL3)
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
        fiamma.zeros(1, 2, 3, 4).contiguous(memory_format=PF)
    with pytest.raises(TypeError, match="memory_format must be a fiamma.memory_format"):
        fiamma.zeros(1, 2, 3, 4).contiguous(memory_format="channels_last")


def test_clone_to_empty_and_like():
    x = fiamma.randn(2, 3, 4, 5)
    y = x.contiguous(memory_format=CL)
    assert y.clone(memory_format=PF).stride() == y.stride()
    assert y.clone(memory_format=CF).is_contiguous()
    assert x.clone(memory_format=CL).stride() == (60, 1, 15, 3)
    assert y.clone().is_contiguous()  # fiamma's default: contiguous (see porting.md)
    t = x.to(fiamma.float64, memory_format=CL)
    assert t.dtype == fiamma.float64 and t.is_contiguous(memory_format=CL)
    assert fiamma.equal(t, x.double())
    assert y.to(fiamma.float64, memory_format=PF).is_contiguous(memory_format=CL)
    assert fiamma.empty(2, 3, 4, 5, memory_format=CL).stride() == (60, 1, 15, 3)
    for fn in (fiamma.empty_like, fiamma.zeros_like, fiamma.ones_like):
        assert fn(y, memory_format=PF).stride() == y.stride()
        assert fn(x, memory_format=CL).stride() == y.stride()
        assert fn(y).is_contiguous()
    o = fiamma.full_like(x, 2.5, memory_format=CL)
    assert o.stride() == y.stride() and bool((o == 2.5).all())
    assert bool((fiamma.ones_like(y, memory_format=PF) == 1).all())


def test_gradients_flow_through_a_format_change():
    pytest.importorskip("fiamma.autograd")  # core's wheel tests run without it
    x = fiamma.randn(2, 3, 4, 5, requires_grad=True)
    w = fiamma.randn(2, 3, 4, 5)
    (x.contiguous(memory_format=CL) * w).sum().backward()
    assert fiamma.equal(x.grad, w)


def test_conv_with_channels_last_operands():
    fiamma.manual_seed(0)
    x = fiamma.randn(2, 3, 8, 8, dtype=fiamma.float64)
    w = fiamma.randn(4, 3, 3, 3, dtype=fiamma.float64)
    ref = fiamma.conv2d(x, w, padding=1)
    for xx in (x, x.contiguous(memory_format=CL)):
        for ww in (w, w.contiguous(memory_format=CL)):
            assert float((fiamma.conv2d(xx, ww, padding=1) - ref).abs().max()) < 1e-12


@pytest.mark.parity
def test_parity_with_torch_strides():
    torch = pytest.importorskip("torch")
    for shape, f, t in [((2, 3, 4, 5), CL, torch.channels_last),
                        ((2, 3, 2, 4, 5), CL3, torch.channels_last_3d),
                        ((1, 3, 1, 5), CL, torch.channels_last)]:
        a = fiamma.zeros(*shape).contiguous(memory_format=f)
        b = torch.zeros(*shape).contiguous(memory_format=t)
        assert a.stride() == b.stride()
        assert a.is_contiguous() == b.is_contiguous()
        assert a.is_contiguous(memory_format=f) == b.is_contiguous(memory_format=t)


@pytest.mark.parametrize("name,dt", [
    ("float", "float32"), ("double", "float64"), ("half", "float16"), ("bfloat16", "bfloat16"),
    ("long", "int64"), ("int", "int32"), ("short", "int16"), ("char", "int8"),
    ("byte", "uint8"), ("bool", "bool"), ("cpu", "float32")])
def test_conversion_methods_take_memory_format(name, dt):
    x = fiamma.randn(2, 3, 4, 5)
    y = getattr(x, name)(memory_format=fiamma.channels_last)
    assert y.dtype is getattr(fiamma, dt)
    assert y.stride() == (60, 1, 15, 3)
    assert y.is_contiguous(memory_format=fiamma.channels_last)
    assert getattr(x, name)(memory_format=fiamma.preserve_format).is_contiguous()
    cl = x.to(memory_format=fiamma.channels_last)
    # the default (preserve_format) keeps channels-last through a dtype change
    assert getattr(cl, name)().stride() == (60, 1, 15, 3)
    assert getattr(cl, name)(memory_format=fiamma.contiguous_format).stride() == (60, 20, 5, 1)
    with pytest.raises(TypeError, match=name):
        getattr(x, name)(memory_format=3)
    with pytest.raises(TypeError):
        getattr(x, name)(fiamma.channels_last)  # keyword-only, as PyTorch
    with pytest.raises(RuntimeError, match="rank 4"):
        getattr(x[0], name)(memory_format=fiamma.channels_last)


def test_float_memory_format_same_dtype_returns_self():
    x = fiamma.randn(2, 3, 4, 5)
    assert x.float(memory_format=fiamma.contiguous_format) is x
    assert x.float(memory_format=fiamma.preserve_format) is x
    assert x.float(memory_format=fiamma.channels_last) is not x
