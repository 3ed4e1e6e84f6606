"""Module.to(memory_format=...) converts 4-d parameters to channels-last strides; training a
channels-last model on channels-last inputs equals the contiguous one (float64; plain SGD
steps in place)."""

import copy

import fiamma
from fiamma import nn

CL = fiamma.channels_last


def test_module_to_channels_last_trains_the_same():
    fiamma.manual_seed(0)
    x = fiamma.randn(2, 3, 8, 8, dtype=fiamma.float64)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                        nn.Linear(4 * 6 * 6, 2)).double()
    other = copy.deepcopy(net).to(memory_format=CL)
    assert other[0].weight.is_contiguous(memory_format=CL)
    assert other[4].weight.is_contiguous()  # 2-d parameters keep their layout
    assert isinstance(other[0].weight, nn.Parameter)
    for _ in range(3):
        for m, xx in ((net, x), (other, x.contiguous(memory_format=CL))):
            m.zero_grad()
            (m(xx) ** 2).mean().backward()
            with fiamma.no_grad():
                for p in m.parameters():
                    p -= 0.1 * p.grad  # in place: the channels-last strides stay
    for a, b in zip(net.parameters(), other.parameters()):
        assert float((a - b).abs().max()) < 1e-9
