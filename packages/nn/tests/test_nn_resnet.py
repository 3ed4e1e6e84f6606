"""A ResNet-18 written once against the torch.nn API (nn_models.py): the fiamma build trains
and evaluates; (parity) PyTorch's model saved with torch.save loads by state_dict into the
fiamma build and gives the same logits and gradients."""

import nn_models
import numpy as np
import pytest

import fiamma
from fiamma import nn

try:
    import torch
except ImportError:
    torch = None


def _randomise_bn(model, named_buffers, rng, to_tensor):
    """Non-trivial running statistics, so eval mode exercises them."""
    for name, buf in named_buffers(model):
        if name.endswith("running_mean"):
            buf.copy_(to_tensor(rng.normal(0, 0.1, tuple(buf.shape)).astype(np.float32)))
        elif name.endswith("running_var"):
            buf.copy_(to_tensor(rng.uniform(0.5, 1.5, tuple(buf.shape)).astype(np.float32)))


def test_resnet18_structure_and_training_step():
    fiamma.manual_seed(0)
    model = nn_models.resnet18(nn, num_classes=10)
    sd = model.state_dict()
    # torchvision's resnet18: 62 parameters, 60 BatchNorm buffers (20 BN layers x 3)
    assert len(list(model.parameters())) == 62
    assert len(sd) == 122
    assert tuple(sd["layer2.0.downsample.0.weight"].shape) == (128, 64, 1, 1)
    assert sd["bn1.num_batches_tracked"].dtype == fiamma.int64
    x = fiamma.randn(2, 3, 64, 64)
    out = model(x)
    assert tuple(out.shape) == (2, 10)
    loss = nn.functional.cross_entropy(out, fiamma.tensor([1, 7]))
    loss.backward()
    assert all(p.grad is not None and bool(fiamma.isfinite(p.grad).all())
               for p in model.parameters())
    assert int(model.bn1.num_batches_tracked) == 1
    model.eval()
    with fiamma.no_grad():
        a, b = model(x), model(x)
    np.testing.assert_array_equal(a.numpy(), b.numpy())  # eval is deterministic


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
def test_resnet18_checkpoint_from_pytorch_gives_same_logits(tmp_path):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    tmodel = nn_models.resnet18(torch.nn)
    with torch.no_grad():
        _randomise_bn(tmodel, lambda m: m.named_buffers(), rng, torch.from_numpy)
    path = tmp_path / "resnet18.pt"
    torch.save(tmodel.state_dict(), path)

    fmodel = nn_models.resnet18(nn)
    result = fmodel.load_state_dict(fiamma.load(path))
    assert not result.missing_keys and not result.unexpected_keys
    assert list(fmodel.state_dict()) == list(tmodel.state_dict())

    x = rng.standard_normal((2, 3, 96, 96)).astype(np.float32)
    tmodel.eval()
    fmodel.eval()
    with torch.no_grad():
        tl = tmodel(torch.from_numpy(x)).numpy()
    with fiamma.no_grad():
        fl = fmodel(fiamma.tensor(x)).numpy()
    scale = np.abs(tl).max()
    np.testing.assert_allclose(fl, tl, rtol=1e-4, atol=1e-5 * scale)
    assert (fl.argmax(1) == tl.argmax(1)).all()

    # one training-mode step: the same loss, gradients and updated running statistics
    tmodel.train()
    fmodel.train()
    target = np.array([3, 999])
    tloss = torch.nn.functional.cross_entropy(tmodel(torch.from_numpy(x)),
                                              torch.from_numpy(target))
    floss = nn.functional.cross_entropy(fmodel(fiamma.tensor(x)), fiamma.tensor(target))
    tloss.backward()
    floss.backward()
    np.testing.assert_allclose(floss.item(), tloss.item(), rtol=1e-4)
    tparams = dict(tmodel.named_parameters())
    for name, p in fmodel.named_parameters():
        g, tg = p.grad.numpy(), tparams[name].grad.numpy()
        np.testing.assert_allclose(g, tg, rtol=1e-3, atol=1e-4 * np.abs(tg).max() + 1e-7,
                                   err_msg=name)
    tbufs = dict(tmodel.named_buffers())
    for name, b in fmodel.named_buffers():
        np.testing.assert_allclose(b.numpy(), tbufs[name].numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)
