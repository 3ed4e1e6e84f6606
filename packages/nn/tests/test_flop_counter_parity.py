"""``FlopCounterMode`` (core's fiamma.utils.flop_counter) over nn layers, forward and backward:
the per-op counts PyTorch's FlopCounterMode gives for the same layers and shapes."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.utils.flop_counter import FlopCounterMode

# (layers, input shape, whether the input requires grad)
CASES = {
    "conv2d_train": (lambda m: m.Sequential(m.Conv2d(1, 8, 3, padding=1), m.Flatten(),
                                            m.Linear(512, 10)), (2, 1, 8, 8), False),
    "conv2d_stride_input_grad": (lambda m: m.Sequential(m.Conv2d(3, 6, 3, stride=2), m.ReLU(),
                                                        m.Conv2d(6, 4, 3, padding=1)),
                                 (2, 3, 11, 11), True),
    "conv1d": (lambda m: m.Conv1d(3, 5, 4, stride=2), (2, 3, 17), True),
    "conv3d": (lambda m: m.Conv3d(2, 3, 2), (1, 2, 5, 5, 5), True),
    "conv_transpose2d": (lambda m: m.ConvTranspose2d(4, 3, 3, stride=2), (2, 4, 5, 5), True),
    "linear": (lambda m: m.Linear(7, 3), (5, 7), True),
}


def _fiamma_counts(name):
    make, shape, need = CASES[name]
    x = fiamma.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32),
                      requires_grad=need)
    m = make(nn)
    with FlopCounterMode(display=False) as fc:
        m(x).sum().backward()
    return fc.get_flop_counts()["Global"]


def test_conv2d_forward_and_backward_counts():
    pytest.importorskip("fiamma.autograd")
    # forward 2*(2*8*8*8)*(1*3*3); the weight's gradient the same; the linear layer's forward
    # and its two gradient products 2*2*10*512 each (the input needs no gradient: no conv
    # input gradient)
    assert _fiamma_counts("conv2d_train") == {"aten.convolution": 18432,
                                              "aten.convolution_backward": 18432,
                                              "aten.addmm": 20480, "aten.mm": 40960}


@pytest.mark.parity
@pytest.mark.parametrize("name", sorted(CASES))
def test_counts_match_pytorch(name):
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode as TorchCounter

    make, shape, need = CASES[name]
    x = torch.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32),
                     requires_grad=need)
    m = make(torch.nn)
    with TorchCounter(display=False) as fc:
        m(x).sum().backward()
    ref = {str(k): v for k, v in fc.get_flop_counts()["Global"].items()}  # "aten.mm", ...
    assert _fiamma_counts(name) == ref
