"""nn.SyncBatchNorm without a process group (a plain batch norm), convert_sync_batchnorm, and
its checks; the synchronised statistics on 2 ranks are tested in fiamma-distributed
(tests/workers/sync_bn.py)."""

import numpy as np
import pytest

import fiamma
from fiamma import nn


def test_without_a_group_it_is_batch_norm():
    fiamma.manual_seed(0)
    x = fiamma.randn(6, 3, 4, 5)
    bn, sbn = nn.BatchNorm2d(3, momentum=None), nn.SyncBatchNorm(3, momentum=None)
    for _ in range(2):
        assert fiamma.allclose(sbn(x), bn(x), atol=1e-6)
    assert fiamma.allclose(sbn.running_var, bn.running_var)
    assert int(sbn.num_batches_tracked) == 2
    sbn.eval(), bn.eval()
    assert fiamma.allclose(sbn(x[:1]), bn(x[:1]))
    # any rank count >= 2 dims: (N, C), (N, C, L), (N, C, D, H, W)
    for shape in [(4, 3), (4, 3, 7), (2, 3, 2, 2, 2)]:
        assert nn.SyncBatchNorm(3)(fiamma.randn(*shape)).shape == shape


def test_convert_sync_batchnorm_keeps_parameters_buffers_and_mode():
    model = nn.Sequential(nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3),
                          nn.Sequential(nn.Flatten(), nn.BatchNorm1d(12, affine=False)))
    model[1].running_mean.fill_(0.25)
    model.eval()
    weight = model[1].weight
    out = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert out is model
    assert type(model[1]) is nn.SyncBatchNorm and type(model[2][1]) is nn.SyncBatchNorm
    assert model[1].weight is weight and float(model[1].running_mean[0]) == 0.25
    assert model[2][1].weight is None and not model[2][1].affine
    assert not model[1].training
    assert sorted(model.state_dict()) == sorted(
        ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
         "1.num_batches_tracked", "2.1.running_mean", "2.1.running_var",
         "2.1.num_batches_tracked"])
    single = nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm1d(4))
    assert type(single) is nn.SyncBatchNorm and single.num_features == 4


def test_errors():
    with pytest.raises(ValueError, match=r"expected at least 2D input \(got 1D input\)"):
        nn.SyncBatchNorm(3)(fiamma.randn(3))
    with pytest.raises(ValueError, match="number of input channels should be non-zero"):
        nn.SyncBatchNorm(0)(fiamma.randn(2, 0))


@pytest.mark.parity
def test_parity_with_torch_without_a_group():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((5, 3, 4)).astype(np.float32)
    t = torch.nn.SyncBatchNorm(3)
    f = nn.SyncBatchNorm(3)
    assert repr(f) == repr(t)
    np.testing.assert_allclose(f(fiamma.from_numpy(x)).detach().numpy(),
                               t(torch.from_numpy(x)).detach().numpy(), atol=1e-5)
    assert list(f.state_dict()) == list(t.state_dict())
    np.testing.assert_allclose(f.running_var.numpy(), t.running_var.numpy(), rtol=1e-6)
