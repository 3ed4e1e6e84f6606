"""fiamma.nn.parallel: DataParallel is a pass-through on one device; DistributedDataParallel
comes from fiamma-distributed (or an error naming it)."""

import importlib.util

import pytest

import fiamma
from fiamma import nn


def test_data_parallel_calls_the_module_and_prefixes_state_dict_keys():
    inner = nn.Linear(3, 2)
    model = nn.DataParallel(inner)
    x = fiamma.randn(5, 3)
    assert model.module is inner and fiamma.equal(model(x), inner(x))
    assert list(model.state_dict()) == ["module.weight", "module.bias"]
    plain = nn.Linear(3, 2)
    nn.parallel.DataParallel(plain).load_state_dict(model.state_dict())
    assert fiamma.equal(plain.weight, inner.weight)
    model(x).sum().backward()
    assert inner.weight.grad is not None
    assert nn.DataParallel(inner, device_ids=[0]).device_ids == [0]


def test_data_parallel_errors():
    with pytest.raises(ValueError, match="one device per process"):
        nn.DataParallel(nn.Linear(2, 2), device_ids=[0, 1])
    with pytest.raises(TypeError, match="DataParallel: module must be an nn.Module"):
        nn.DataParallel(lambda x: x)


def test_distributed_data_parallel_is_found_or_named():
    if importlib.util.find_spec("fiamma.distributed") is None:
        with pytest.raises(AttributeError, match="pip install fiamma-distributed"):
            nn.parallel.DistributedDataParallel
    else:
        assert nn.parallel.DistributedDataParallel.__name__ == "DistributedDataParallel"
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        nn.parallel.Nope
