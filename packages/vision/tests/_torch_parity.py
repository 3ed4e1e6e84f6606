"""Checks of a fiamma model against its torchvision twin, shared by the model parity tests:
copy the twin's state dict in, compare eval outputs, and compare one cross-entropy training
step's loss and parameter gradients. Callers import torch first (pytest.importorskip)."""
import numpy as np

import fiamma


def load_from_torch(fm, tm, strict_keys=False):
    """Copy the torch module ``tm``'s state dict into the fiamma module ``fm`` (by key, as
    copies); with ``strict_keys``, first check that both name the same entries in order."""
    sd = tm.state_dict()
    if strict_keys:
        assert list(fm.state_dict()) == list(sd)
    fm.load_state_dict({k: fiamma.from_numpy(v.numpy().copy()) for k, v in sd.items()})
    return fm


def assert_eval_matches(fm, tm, x, atol=1e-4, rtol=1e-7):
    """fm and tm (in eval mode, without grad) give the same output for the NumPy input x."""
    import torch
    with torch.no_grad():
        want = tm.eval()(torch.from_numpy(x)).numpy()
    with fiamma.no_grad():
        got = fm.eval()(fiamma.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, atol=atol, rtol=rtol)


def assert_train_grads_match(fm, tm, x, y, rtol=1e-12, rel_atol=1e-11):
    """Cross entropy of fm(x) and tm(x) against labels y: the losses agree to rtol, and every
    parameter's gradient to rel_atol times the largest torch gradient (some are zero up to
    rounding, e.g. biases before a norm)."""
    import torch
    tl = torch.nn.functional.cross_entropy(tm(torch.from_numpy(x)), torch.from_numpy(y))
    fl = fiamma.nn.functional.cross_entropy(fm(fiamma.from_numpy(x)), fiamma.from_numpy(y))
    np.testing.assert_allclose(fl.item(), tl.item(), rtol=rtol)
    tl.backward()
    fl.backward()
    scale = max(np.abs(p.grad.numpy()).max() for p in tm.parameters())
    fg = dict(fm.named_parameters())
    for n, p in tm.named_parameters():
        np.testing.assert_allclose(fg[n].grad.numpy(), p.grad.numpy(), atol=rel_atol * scale,
                                   err_msg=n)
