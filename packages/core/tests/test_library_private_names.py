"""PyTorch's private helper names that pure-Python libraries built on PyTorch call (found by
running kornia's programs on fiamma): the run-time checks ``torch._check*``,
``torch._assert_async``, ``torch._shape_as_tensor``, the ``torch.SymInt`` family for
``isinstance`` checks, ``torch._subclasses.fake_tensor.is_fake``,
``torch._C._are_functorch_transforms_active``, ``torch.torch``, and the autocast queries for
PyTorch's other device types."""

import os
import subprocess
import sys
import textwrap

import pytest

import fiamma
from fiamma._subclasses.fake_tensor import is_fake
from fiamma._torch_c import module as torch_c


def test_check_family_raises_its_error_type_with_the_lazy_message():
    fiamma._check(True)
    fiamma._check(2 > 1, lambda: 1 / 0)  # the message is only made on failure
    with pytest.raises(RuntimeError, match="Expected cond to be True"):
        fiamma._check(False)
    with pytest.raises(RuntimeError, match="^too small$"):
        fiamma._check(False, lambda: "too small")
    for fn, err in [(fiamma._check_index, IndexError), (fiamma._check_value, ValueError),
                    (fiamma._check_type, TypeError),
                    (fiamma._check_not_implemented, NotImplementedError)]:
        with pytest.raises(err, match="boom"):
            fn(False, lambda: "boom")
        fn(True)
    with pytest.raises(KeyError):
        fiamma._check_with(KeyError, False)
    with pytest.raises(TypeError, match="cond must be a bool, but got a Tensor"):
        fiamma._check(fiamma.tensor(True))
    with pytest.raises(TypeError, match="cond must be a bool"):
        fiamma._check(1)
    with pytest.raises(TypeError, match="message must be a callable"):
        fiamma._check(False, "not callable")
    fiamma._check_is_size(0)
    with pytest.raises(RuntimeError):
        fiamma._check_is_size(-1)
    with pytest.raises(RuntimeError):
        fiamma._check_is_size(5, max=4)


def test_check_tensor_all():
    fiamma._check_tensor_all(fiamma.tensor([True, True]))
    fiamma._check_tensor_all(fiamma.zeros(0, dtype=fiamma.bool))
    with pytest.raises(RuntimeError, match="bad"):
        fiamma._check_tensor_all(fiamma.tensor([True, False]), lambda: "bad")
    with pytest.raises(TypeError, match="dtype torch.bool"):
        fiamma._check_tensor_all(fiamma.tensor([1, 1]))
    with pytest.raises(TypeError, match="must be a tensor"):
        fiamma._check_tensor_all(True)


def test_assert_async_checks_a_one_element_tensor_now():
    fiamma._assert_async(fiamma.tensor(True))
    fiamma._assert_async(fiamma.tensor(2.5))
    fiamma._assert_async(fiamma.tensor([float("nan")]))  # nan is nonzero
    with pytest.raises(RuntimeError, match="single nonzero value, but got zero"):
        fiamma._assert_async(fiamma.tensor(0))
    with pytest.raises(RuntimeError, match="^out of range$"):
        fiamma._assert_async(fiamma.tensor([1, 2]).max() < 2, "out of range")
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        fiamma._assert_async(fiamma.tensor([1, 1]))
    with pytest.raises(RuntimeError, match="no values is ambiguous"):
        fiamma._assert_async(fiamma.tensor([]))
    with pytest.raises(TypeError, match="must be Tensor"):
        fiamma._assert_async(True)


def test_shape_as_tensor():
    s = fiamma._shape_as_tensor(fiamma.zeros(2, 3, 4))
    assert s.dtype == fiamma.int64 and s.tolist() == [2, 3, 4]
    e = fiamma._shape_as_tensor(fiamma.tensor(1.0))
    assert e.shape == (0,) and e.dtype == fiamma.int64
    m = fiamma._shape_as_tensor(fiamma.zeros(5, device="meta"))
    assert m.device.type == "cpu" and m.tolist() == [5]


def test_symbolic_number_classes_exist_for_isinstance_and_are_never_made():
    assert not isinstance(3, fiamma.SymInt) and isinstance(3, (int, fiamma.SymInt))
    assert not isinstance(2.0, fiamma.SymFloat) and not isinstance(True, fiamma.SymBool)
    for cls in (fiamma.SymInt, fiamma.SymFloat, fiamma.SymBool):
        with pytest.raises(TypeError, match="cannot be created"):
            cls(3)


def test_no_tensor_is_fake():
    assert is_fake(fiamma.zeros(2)) is False
    assert is_fake(fiamma.zeros(2, device="meta")) is False
    assert is_fake(3) is False


def test_functorch_transforms_active_follows_vmap_and_grad():
    assert torch_c._are_functorch_transforms_active() is False
    func = pytest.importorskip("fiamma.func")
    pytest.importorskip("fiamma.autograd")
    seen = []

    def f(x):
        seen.append(torch_c._are_functorch_transforms_active())
        return (x * x).sum()

    func.vmap(f)(fiamma.ones(3, 2))
    func.grad(f)(fiamma.ones(2))
    assert seen == [True, True]
    assert torch_c._are_functorch_transforms_active() is False


def test_autocast_queries_on_pytorchs_other_device_types():
    for dt, dtype in [("mps", fiamma.float16), ("xpu", fiamma.float16),
                      ("hpu", fiamma.bfloat16), ("xla", fiamma.bfloat16)]:
        assert fiamma.is_autocast_enabled(dt) is False
        assert fiamma.get_autocast_dtype(dt) == dtype
        assert fiamma.amp.is_autocast_available(dt) is False
    with fiamma.autocast("cpu"):
        assert fiamma.is_autocast_enabled("mps") is False
    with pytest.raises(RuntimeError, match="unsupported device_type 'meta'"):
        fiamma.is_autocast_enabled("meta")
    with pytest.raises(RuntimeError, match="unsupported device_type 'mps'"):
        fiamma.set_autocast_enabled("mps", True)


def test_runner_torch_torch_is_torch(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import torch
        from torch._subclasses.fake_tensor import is_fake
        def f(x: torch.torch.Tensor) -> torch.torch.Tensor:
            return x
        print(torch.torch is torch, is_fake(f(torch.ones(1))),
              torch._C._are_functorch_transforms_active())
        """))
    r = subprocess.run([sys.executable, "-m", "fiamma.run", str(script)], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False", "False"]


@pytest.mark.parity
def test_parity_with_torch():
    torch = pytest.importorskip("torch")
    for mod in (torch, fiamma):
        assert mod._shape_as_tensor(mod.zeros(4, 1)).tolist() == [4, 1]
    for dt in ("mps", "xpu", "hpu", "maia", "mtia"):
        assert str(fiamma.get_autocast_dtype(dt)).split(".")[-1] == \
            str(torch.get_autocast_dtype(dt)).split(".")[-1]
        assert fiamma.is_autocast_enabled(dt) == torch.is_autocast_enabled(dt)
    for args in [(False,), (False, lambda: "m")]:
        with pytest.raises(RuntimeError) as a:
            torch._check(*args)
        with pytest.raises(RuntimeError) as b:
            fiamma._check(*args)
        assert str(a.value) == str(b.value)
