"""grad_fn.name() (and a tensor's repr) gives PyTorch's node name where one fiamma op stands for
several of PyTorch's: basic indexing (Select/Slice/Unsqueeze/Alias by the last effective index
item), stack, casts (ToCopy), norms, the dim= overloads of reductions, scalar operands of
clamp/sub/pow, and matmul by operand ranks."""

import pytest

import fiamma

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

S = slice
KEYS = [0, -1, S(1, 3), S(None), (0, 1), (S(None), 1), (None,), (Ellipsis, 0),
        (S(1, 3), None, 2), (S(None), S(None, 2)), (0, S(None)), (None, 0), (Ellipsis, None),
        (Ellipsis,), (0, Ellipsis), (S(None), None), (S(None), S(None), S(None)), (0, 0, 0),
        (S(None, None, 2),), (S(None), 0, S(1, 2)), (0, None, S(None)), (S(0, 4),),
        (S(0, 4), S(0, 3))]

EXPECTED_INDEX = ["Select", "Select", "Slice", "Slice", "Select", "Select", "Unsqueeze",
                  "Select", "Select", "Slice", "Select", "Select", "Unsqueeze", "Alias",
                  "Select", "Unsqueeze", "Alias", "Select", "Slice", "Slice", "Unsqueeze",
                  "Alias", "Slice"]

EXPRS = {
    "x @ x.t()": "MmBackward0", "x @ w": "MvBackward0", "w @ w": "DotBackward0",
    "v @ x": "SqueezeBackward4", "b @ b.transpose(1, 2)": "UnsafeViewBackward0",
    "M.stack([x, x])": "StackBackward0", "M.cat([x, x])": "CatBackward0",
    "x.sum()": "SumBackward0", "x.sum(1)": "SumBackward1", "x.mean()": "MeanBackward0",
    "x.mean(1)": "MeanBackward1", "x.prod(1)": "ProdBackward1", "x.max()": "MaxBackward1",
    "x.max(1)[0]": "MaxBackward0", "x.min()": "MinBackward1",
    "x.to(M.float64)": "ToCopyBackward0", "x.double()": "ToCopyBackward0",
    "x.norm()": "LinalgVectorNormBackward0", "x.norm(dim=1)": "LinalgVectorNormBackward0",
    "x.clamp(0, 1)": "ClampBackward1", "x.clamp(min=0)": "ClampBackward1",
    "1 - x": "RsubBackward1", "x - 1": "SubBackward0", "2 ** x": "PowBackward2",
    "x ** 2": "PowBackward0", "x ** x": "PowBackward1",
}


def _inputs(M):
    x = M.randn(4, 5, requires_grad=True)
    return {"M": M, "x": x, "w": M.randn(5, requires_grad=True),
            "v": M.randn(4, requires_grad=True), "b": M.randn(3, 4, 5, requires_grad=True)}


@pytest.mark.parametrize("key,name", list(zip(KEYS, EXPECTED_INDEX)))
def test_basic_indexing_names(key, name):
    x = fiamma.randn(4, 5, 6, requires_grad=True)
    y = x[key]
    assert y.grad_fn.name() == name + "Backward0"
    assert f"grad_fn=<{name}Backward0>" in repr(y)
    y.sum().backward()  # the renamed node still runs its formula
    assert x.grad.shape == x.shape


@pytest.mark.parametrize("expr,name", list(EXPRS.items()))
def test_op_names(expr, name):
    y = eval(expr, {}, _inputs(fiamma))
    assert y.grad_fn.name() == name
    y.sum().backward()


def test_names_are_kept_after_backward_and_in_a_trace():
    x = fiamma.randn(3, 4, requires_grad=True)
    y = fiamma.stack([x[0, :3], x[:, 1]])
    y.sum().backward()
    assert y.grad_fn.name() == "StackBackward0"
    assert x.grad.sum().item() == pytest.approx(6.0)


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
def test_names_equal_pytorch():
    xt = torch.randn(4, 5, 6, requires_grad=True)
    xf = fiamma.randn(4, 5, 6, requires_grad=True)
    for k in KEYS:
        assert xf[k].grad_fn.name() == xt[k].grad_fn.name(), k
    ft, ff = _inputs(torch), _inputs(fiamma)
    for expr in EXPRS:
        assert eval(expr, {}, ff).grad_fn.name() == eval(expr, {}, ft).grad_fn.name(), expr


def test_squeeze_overload_names():
    x = fiamma.randn(4, 1, 5, requires_grad=True)
    assert x.squeeze().grad_fn.name() == "SqueezeBackward0"
    assert x.squeeze(1).grad_fn.name() == "SqueezeBackward1"
    assert x.squeeze(0).grad_fn.name() == "SqueezeBackward1"  # no size-1 dim there: a no-op
    assert x.squeeze((0, 1)).grad_fn.name() == "SqueezeBackward2"
    assert fiamma.squeeze(x, 1).grad_fn.name() == "SqueezeBackward1"
    x.squeeze(1).sum().backward()
    assert x.grad.shape == x.shape
    if torch is not None:
        t = torch.randn(4, 1, 5, requires_grad=True)
        assert [t.squeeze().grad_fn.name(), t.squeeze(1).grad_fn.name(),
                t.squeeze(0).grad_fn.name(), t.squeeze((0, 1)).grad_fn.name()] == \
            ["SqueezeBackward0", "SqueezeBackward1", "SqueezeBackward1", "SqueezeBackward2"]
