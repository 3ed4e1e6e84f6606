"""What the detection models' torchvision-parity tests share (test_vision_detection*.py):
torchvision's weights copied in and both models run in eval mode, the check of one image's
detections, and the check of one training step against torchvision's.

    from _detection_checks import assert_same_training_step
"""

import numpy as np

import fiamma


def eval_with_same_weights(torch, tm, fm, imgs):
    """``fm`` gets torchvision's ``tm``'s weights by key (both name the same entries in
    order); both go to float64 and eval mode. Returns ``(tm, fm, torchvision's detections,
    fiamma's)`` on the NumPy images ``imgs``."""
    assert list(fm.state_dict()) == list(tm.state_dict())
    fm.load_state_dict({k: fiamma.from_numpy(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})
    fm, tm = fm.double(), tm.double()
    tm.eval()
    fm.eval()
    with torch.no_grad():
        to = tm([torch.from_numpy(i) for i in imgs])
    with fiamma.no_grad():
        fo = fm([fiamma.from_numpy(i) for i in imgs])
    return tm, fm, to, fo


def assert_same_detections(a, b):
    """One image's detections, torchvision's ``a`` and fiamma's ``b``: as many boxes (some),
    boxes equal to 1e-8, scores to 1e-10, labels exactly."""
    assert len(b["boxes"]) == len(a["boxes"]) > 0
    np.testing.assert_allclose(b["boxes"].numpy(), a["boxes"].numpy(), atol=1e-8)
    np.testing.assert_allclose(b["scores"].numpy(), a["scores"].numpy(), atol=1e-10)
    np.testing.assert_array_equal(b["labels"].numpy(), a["labels"].numpy())


def assert_same_training_step(tl, fl, tm, fm, loss_rtol, grad_atol=1e-6):
    """torchvision's losses ``tl`` (model ``tm``) and fiamma's ``fl`` (model ``fm``, same
    weights and inputs) have the same names and values; after ``backward`` of their sums, the
    same parameters have gradients, equal relative to each gradient's largest magnitude.
    Gradients that are zero in exact arithmetic (a norm's shift followed by another
    training-mode norm, a softmax-minus-one-hot bias) are rounding noise in both libraries:
    those below 1e-3 of the model's largest gradient are only checked to stay that small."""
    assert set(tl) == set(fl)
    for k in tl:
        np.testing.assert_allclose(fl[k].item(), tl[k].item(), rtol=loss_rtol, err_msg=k)
    sum(tl.values()).backward()
    sum(fl.values()).backward()
    tg = {n: p.grad for n, p in tm.named_parameters() if p.grad is not None}
    fg = {n: p.grad for n, p in fm.named_parameters() if p.grad is not None}
    assert set(tg) == set(fg) and len(fg) > 10, set(tg) ^ set(fg)
    gmax = max(g.abs().max().item() for g in tg.values())
    for n, g in tg.items():
        scale = max(g.abs().max().item(), 1e-12)
        if scale < 1e-3 * gmax:
            assert fg[n].abs().max().item() < 1e-3 * gmax, n
            continue
        np.testing.assert_allclose(fg[n].numpy() / scale, g.numpy() / scale, atol=grad_atol,
                                   err_msg=n)
