"""What the detection models' torchvision-parity tests share (test_vision_detection*.py):
the check of one training step against torchvision's.

    from _detection_checks import assert_same_training_step
"""

import numpy as np


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
