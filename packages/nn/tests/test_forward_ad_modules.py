"""Forward AD with nn.Modules (PyTorch's forward-AD tutorial patterns) and fiamma.functorch."""

import warnings

import numpy as np
import pytest

import fiamma
import fiamma.autograd.forward_ad as fwAD
from fiamma import functorch as ft, nn
from fiamma.func import functional_call

D = fiamma.float64


def _mlp():
    fiamma.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)).double()


def _fd(model, params, tangents, x, eps=1e-6):
    hi = functional_call(model, {k: p + eps * tangents[k] for k, p in params.items()}, (x,))
    lo = functional_call(model, {k: p - eps * tangents[k] for k, p in params.items()}, (x,))
    return ((hi - lo) / (2 * eps)).detach()


def _setup():
    model = _mlp()
    x = fiamma.randn(5, 4, dtype=D)
    params = {k: p.detach().clone() for k, p in model.named_parameters()}
    g = fiamma.Generator().manual_seed(3)
    tangents = {k: fiamma.randn(*p.shape, generator=g, dtype=D) for k, p in params.items()}
    return model, x, params, tangents


def test_module_attributes_replaced_by_duals():
    model, x, params, tangents = _setup()
    expected = _fd(model, params, tangents, x)
    real = dict(model.named_parameters())
    with fwAD.dual_level():
        for name, p in real.items():
            mod_name, _, attr = name.rpartition(".")
            mod = model.get_submodule(mod_name)
            delattr(mod, attr)
            setattr(mod, attr, fwAD.make_dual(p, tangents[name]))
        out = model(x)
        jvp = fwAD.unpack_dual(out).tangent
    np.testing.assert_allclose(jvp.detach().numpy(), expected.numpy(), rtol=1e-6, atol=1e-8)


def test_functional_call_with_dual_params():
    model, x, params, tangents = _setup()
    expected = _fd(model, params, tangents, x)
    with fwAD.dual_level():
        duals = {k: fwAD.make_dual(p, tangents[k]) for k, p in model.named_parameters()}
        out = functional_call(model, duals, x)
        jvp = fwAD.unpack_dual(out).tangent
    np.testing.assert_allclose(jvp.detach().numpy(), expected.numpy(), rtol=1e-6, atol=1e-8)
    # the module's own parameters are back and carry no tangent
    assert all(isinstance(p, nn.Parameter) for p in model.parameters())


def test_dual_input_through_module_with_buffers():
    fiamma.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU()).double().eval()
    model[1].running_mean.normal_()
    model[1].running_var.uniform_(0.5, 2.0)
    x = fiamma.randn(6, 3, dtype=D)
    t = fiamma.randn(6, 3, dtype=D)
    with fwAD.dual_level():
        out = model(fwAD.make_dual(x, t))
        jvp = fwAD.unpack_dual(out).tangent
    eps = 1e-6
    expected = (model(x + eps * t) - model(x - eps * t)) / (2 * eps)
    np.testing.assert_allclose(jvp.detach().numpy(), expected.detach().numpy(), rtol=1e-6,
                               atol=1e-8)


def test_functorch_make_functional_with_buffers_and_jvp():
    fiamma.manual_seed(2)
    model = nn.Linear(5, 5)
    x = fiamma.randn(16, 5)
    with pytest.warns(FutureWarning, match="deprecated"):
        func, params, buffers = ft.make_functional_with_buffers(model)
    assert len(params) == 2 and buffers == ()
    assert params[0] is not model.weight and fiamma.equal(params[0], model.weight)
    np.testing.assert_allclose(func(params, buffers, x).detach().numpy(),
                               model(x).detach().numpy())
    tangents = tuple(fiamma.rand_like(p) for p in params)
    with pytest.warns(FutureWarning, match="functorch.jvp"):
            out, jvp_out = ft.jvp(lambda p: func(p, buffers, x), (params,), (tangents,))
    expected = x @ tangents[0].T + tangents[1]
    np.testing.assert_allclose(jvp_out.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    # other parameters are used when given
    zeros = tuple(fiamma.zeros_like(p) for p in params)
    assert float(func(zeros, buffers, x).abs().sum()) == 0.0


def test_functorch_make_functional_and_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        func, params = ft.make_functional(nn.Linear(2, 3), disable_autograd_tracking=True)
        assert not params[0].requires_grad
        assert func(params, fiamma.ones(1, 2)).shape == (1, 3)
        with pytest.raises(RuntimeError, match="has buffers"):
            ft.make_functional(nn.BatchNorm1d(2))
        with pytest.raises(RuntimeError, match="expected 2 parameters, got 1"):
            func(params[:1], fiamma.ones(1, 2))
        bn = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)).eval()
        f2, p2, b2 = ft.make_functional_with_buffers(bn)
        assert len(p2) == 4 and len(b2) == 3
        x = fiamma.randn(4, 2)
        np.testing.assert_allclose(f2(p2, b2, x).detach().numpy(), bn(x).detach().numpy(),
                                   rtol=1e-6)
        models = [nn.Linear(3, 2) for _ in range(4)]
        fm, ps, bs = ft.combine_state_for_ensemble(models)
        assert ps[0].shape == (4, 2, 3) and bs == ()
        ys = ft.vmap(fm, in_dims=(0, 0, None))(ps, bs, fiamma.ones(1, 3))
        for i, m in enumerate(models):
            np.testing.assert_allclose(ys[i].detach().numpy(), m(fiamma.ones(1, 3)).detach()
                                       .numpy(), rtol=1e-6)


def test_functorch_transforms_warn_and_compute():
    x = fiamma.tensor([1.0, 2.0])
    with pytest.warns(FutureWarning, match="functorch.grad is deprecated"):
        g = ft.grad(lambda a: (a ** 3).sum())(x)
    assert g.tolist() == [3.0, 12.0]
    with pytest.warns(FutureWarning, match="functorch.jvp is deprecated"):
        _, t = ft.jvp(lambda a: a ** 2, (x,), (fiamma.ones(2),))
    assert t.tolist() == [2.0, 4.0]
    with pytest.warns(FutureWarning, match="functorch.vmap is deprecated"):
        assert ft.vmap(lambda a: a * 2)(x).tolist() == [2.0, 4.0]
    with pytest.warns(FutureWarning, match="functorch.hessian is deprecated"):
        h = ft.hessian(lambda a: (a ** 3).sum())(x)
    assert h.tolist() == [[6.0, 0.0], [0.0, 12.0]]


@pytest.mark.parity
def test_parity_linear_forward_ad_with_torch():
    torch = pytest.importorskip("torch")
    import torch.autograd.forward_ad as tfw

    model, x, params, tangents = _setup()
    with fwAD.dual_level():
        duals = {k: fwAD.make_dual(p, tangents[k]) for k, p in params.items()}
        ours = fwAD.unpack_dual(functional_call(model, duals, x)).tangent.detach().numpy()
    tmodel = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(),
                                 torch.nn.Linear(6, 3)).double()
    tp = {k: torch.from_numpy(p.numpy().copy()) for k, p in params.items()}
    tt = {k: torch.from_numpy(t.numpy().copy()) for k, t in tangents.items()}
    with tfw.dual_level():
        tduals = {k: tfw.make_dual(tp[k], tt[k]) for k in tp}
        theirs = tfw.unpack_dual(torch.func.functional_call(
            tmodel, tduals, torch.from_numpy(x.numpy().copy()))).tangent.numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode,kw", [("RNN", {}), ("RNN", {"nonlinearity": "relu"}),
                                     ("LSTM", {"proj_size": 2}), ("GRU", {}),
                                     ("LSTM", {"num_layers": 2})])
def test_recurrent_layers_dual_inputs_and_weights(mode, kw):
    # dual input and dual recurrent weight: the layers must not use their one-product
    # recurrent-weight node under forward AD (its backward reads states filled in later)
    fiamma.manual_seed(0)
    model = getattr(nn, mode)(4, 3, **kw).double()
    params = {k: p.detach().clone() for k, p in model.named_parameters()}
    g = fiamma.Generator().manual_seed(1)
    x = fiamma.randn(5, 2, 4, generator=g, dtype=D)
    tx = fiamma.randn(5, 2, 4, generator=g, dtype=D)
    tangents = {k: fiamma.randn(*p.shape, generator=g, dtype=D) for k, p in params.items()}
    with fwAD.dual_level():
        duals = {k: fwAD.make_dual(p, tangents[k]) for k, p in params.items()}
        out = functional_call(model, duals, (fwAD.make_dual(x, tx),))[0]
        tan = fwAD.unpack_dual(out).tangent
    eps = 1e-6

    def at(s):
        ps = {k: p + s * tangents[k] for k, p in params.items()}
        return functional_call(model, ps, (x + s * tx,))[0]

    fd = (at(eps) - at(-eps)) / (2 * eps)
    np.testing.assert_allclose(tan.numpy(), fd.detach().numpy(), rtol=1e-5, atol=1e-7)
