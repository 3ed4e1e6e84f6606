"""torch.distributed.tensor, torch.distributed.device_mesh and torch.distributed.fsdp at their
PyTorch paths: the names libraries test against (nothing is a DTensor, a DeviceMesh or an FSDP
module), real placement types, and a clear NotImplementedError where one is made."""

import pytest

import fiamma
from fiamma.distributed import device_mesh, fsdp, tensor
from fiamma.distributed.fsdp import fully_sharded_data_parallel as fsdp_mod


def test_nothing_is_a_dtensor():
    assert issubclass(tensor.DTensor, fiamma.Tensor)
    for t in (fiamma.ones(2), fiamma.nn.Parameter(fiamma.zeros(1)), fiamma.tensor(3)):
        assert not isinstance(t, tensor.DTensor)


@pytest.mark.parametrize("make", [
    lambda: tensor.DTensor(), lambda: tensor.DTensor.from_local(fiamma.ones(2)),
    lambda: tensor.distribute_tensor(fiamma.ones(2)),
    lambda: tensor.distribute_module(fiamma.nn.Linear(2, 2))])
def test_making_a_dtensor_raises(make):
    with pytest.raises(NotImplementedError, match="no distributed tensor"):
        make()


def test_placements():
    s, r, p = tensor.Shard(1), tensor.Replicate(), tensor.Partial()
    assert all(isinstance(x, tensor.Placement) for x in (s, r, p))
    assert s.is_shard() and s.is_shard(1) and not s.is_shard(0) and not s.is_replicate()
    assert r.is_replicate() and not r.is_shard() and not r.is_partial()
    assert p.is_partial() and p.is_partial("sum") and not p.is_partial("max")
    assert p.reduce_op == "sum" and tensor.Partial("max").reduce_op == "max"
    assert s == tensor.Shard(1) and s != tensor.Shard(0) and r == tensor.Replicate()
    assert len({s, tensor.Shard(1), r, tensor.Replicate(), p}) == 3
    assert repr(s) == "Shard(dim=1)" and repr(r) == "Replicate()"
    with pytest.raises(TypeError, match="Shard"):
        tensor.Shard("0")


def test_device_mesh_raises():
    assert tensor.DeviceMesh is device_mesh.DeviceMesh
    with pytest.raises(NotImplementedError, match="device mesh"):
        device_mesh.DeviceMesh("cpu", [0])
    with pytest.raises(NotImplementedError, match="init_device_mesh"):
        device_mesh.init_device_mesh("cpu", (1,))


def test_fsdp_names():
    m = fiamma.nn.Linear(2, 2)
    assert fsdp.FullyShardedDataParallel is fsdp_mod.FullyShardedDataParallel
    assert issubclass(fsdp.FullyShardedDataParallel, fiamma.nn.Module)
    assert not isinstance(m, fsdp.FullyShardedDataParallel)
    with pytest.raises(NotImplementedError, match="FullyShardedDataParallel"):
        fsdp.FullyShardedDataParallel(m)
    with pytest.raises(NotImplementedError, match="fully_shard"):
        fsdp.fully_shard(m)
    with pytest.raises(NotImplementedError):
        fsdp.FSDPModule()
    # PyTorch's members and values
    assert [s.name for s in fsdp.ShardingStrategy][:4] == [
        "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD"]
    assert fsdp_mod.StateDictType.FULL_STATE_DICT.value == 1
    assert fsdp.BackwardPrefetch.BACKWARD_PRE.value == 1
    assert fsdp.CPUOffload().offload_params is False
    assert fsdp.MixedPrecision(param_dtype=fiamma.float16).param_dtype is fiamma.float16


def test_eager_submodules_read_as_attributes():
    # PyTorch's torch.distributed imports these at start-up; libraries name them in
    # annotations (diffusers: torch.distributed.device_mesh.DeviceMesh | None)
    import fiamma.distributed as dist

    assert dist.device_mesh.DeviceMesh is dist.DeviceMesh
    assert dist.init_device_mesh is dist.device_mesh.init_device_mesh
    assert dist.distributed_c10d.__name__ == "fiamma.distributed.distributed_c10d"
    assert dist.algorithms.__name__ == "fiamma.distributed.algorithms"
    with pytest.raises(AttributeError, match="no attribute 'not_a_module'"):
        dist.not_a_module


def test_fsdp_wrap_policies():
    # torch.distributed.fsdp.wrap (diffusers.training_utils imports transformer_auto_wrap_policy)
    import functools

    from fiamma import nn
    from fiamma.distributed.fsdp import wrap as W

    layer, lin = nn.TransformerEncoderLayer(8, 2), nn.Linear(2, 2)
    pol = functools.partial(W.transformer_auto_wrap_policy,
                            transformer_layer_cls={nn.TransformerEncoderLayer})
    assert pol(layer, recurse=False, nonwrapped_numel=0) is True
    assert pol(lin, recurse=False, nonwrapped_numel=0) is False
    assert pol(lin, recurse=True, nonwrapped_numel=0) is True
    assert W.transformer_auto_wrap_policy(lin, False, 0, nn.Linear) is True  # a single class
    s = W.size_based_auto_wrap_policy
    assert s(lin, False, 100, min_num_params=100) and not s(lin, False, 99, min_num_params=100)
    assert not s(nn.ModuleList([lin]), False, 10**9)  # excluded from wrapping by default
    mha = nn.MultiheadAttention(4, 2)
    assert not s(mha, True, 10**9) and s(mha, False, 10**9)  # a forced leaf: no descent
    assert W.lambda_auto_wrap_policy(lin, False, 0, lambda m: isinstance(m, nn.Linear))
    assert W.ModuleWrapPolicy({nn.Linear})(lin, False) and not W.ModuleWrapPolicy({nn.ReLU})(
        lin, False)
    assert W.CustomPolicy(lambda m: {"x": 1})(lin, False) and W.always_wrap_policy(lin, False, 0)
    assert W.wrap(lin) is lin  # outside enable_wrap: unchanged
    with W.enable_wrap(wrapper_cls=lambda m, **kw: (m, kw), flag=1):
        assert W.wrap(lin, other=2) == (lin, {"flag": 1, "other": 2})
    assert W.wrap(lin) is lin
