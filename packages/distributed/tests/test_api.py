"""The API in one process (an MPI world of one): initialisation and its errors, argument
checks that name the op, work handles, groups, debug level."""

import datetime

import numpy as np
import pytest

import fiamma
import fiamma.distributed as dist


@pytest.fixture
def world():
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=30))
    yield
    dist.destroy_process_group()


def test_lifecycle():
    assert not dist.is_initialized() and dist.is_available()
    with pytest.raises(RuntimeError, match="has not been initialized"):
        dist.get_rank()
    dist.init_process_group("gloo")  # gloo is MPI on CPU
    try:
        assert dist.is_initialized() and dist.group.WORLD is dist.GroupMember.WORLD
        assert (dist.get_rank(), dist.get_world_size(), dist.get_backend()) == (0, 1, "gloo")
        with pytest.raises(RuntimeError, match="twice"):
            dist.init_process_group()
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()
    dist.init_process_group(init_method="env://")  # again, after destroy
    dist.destroy_process_group()


@pytest.mark.parametrize("kwargs,err,text", [
    ({"backend": "ucc"}, ValueError, "unknown backend 'ucc'"),
    ({"init_method": "tcp://127.0.0.1:23456"}, ValueError, "needs rank= and world_size="),
    ({"world_size": 2}, ValueError, "world_size/WORLD_SIZE is 2 but this process was not "
                                    "started by an MPI launcher"),
    ({"rank": 1, "world_size": 1}, ValueError, "rank/RANK is 1 but MPI gave this process rank 0"),
    ({"timeout": 5}, TypeError, "timeout must be a datetime.timedelta"),
])
def test_init_errors(kwargs, err, text):
    with pytest.raises(err, match=text.replace("(", r"\(").replace("/", "/")):
        dist.init_process_group(**kwargs)
    assert not dist.is_initialized()


def test_world_size_from_the_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(ValueError, match="python -m fiamma.distributed.run"):
        dist.init_process_group()


def test_argument_errors_name_the_op(world):
    with pytest.raises(ValueError, match="all_reduce: tensors must be contiguous"):
        dist.all_reduce(fiamma.ones(3, 4).t())
    with pytest.raises(TypeError, match="all_reduce: ReduceOp.AVG needs a floating point"):
        dist.all_reduce(fiamma.ones(3, dtype=fiamma.int64), op=dist.ReduceOp.AVG)
    with pytest.raises(TypeError, match="all_reduce: BAND needs an integer or bool tensor"):
        dist.all_reduce(fiamma.ones(3), op=dist.ReduceOp.BAND)
    with pytest.raises(TypeError, match="broadcast: expected a fiamma.Tensor, got ndarray"):
        dist.broadcast(np.ones(3), src=0)
    with pytest.raises(ValueError, match="broadcast: src=3 is not a rank of process group"):
        dist.broadcast(fiamma.ones(3), src=3)
    with pytest.raises(ValueError, match="all_gather: tensor_list must hold 1 tensors"):
        dist.all_gather([fiamma.ones(2), fiamma.ones(2)], fiamma.ones(2))
    with pytest.raises(ValueError, match=r"all_gather_into_tensor: output must hold world_size"):
        dist.all_gather_into_tensor(fiamma.ones(3), fiamma.ones(2))
    with pytest.raises(ValueError, match="all_to_all_single: input_split_sizes must be 1"):
        dist.all_to_all_single(fiamma.ones(2), fiamma.ones(2), [2], [1, 1])
    with pytest.raises(ValueError, match="tag must be non-negative"):
        dist.isend(fiamma.ones(1), 0, tag=-1)


def test_one_rank_results_and_work(world):
    t = fiamma.arange(4, dtype=fiamma.float32)
    w = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    assert isinstance(w, dist.Work) and w.wait() and w.is_completed() and w.is_success()
    assert w.result() == [t] and t.tolist() == [0.0, 1.0, 2.0, 3.0]
    out = fiamma.zeros(4)
    dist.reduce_scatter_tensor(out, t)
    assert out.tolist() == t.tolist()
    w = dist.isend(fiamma.full((2,), 7.0), 0)
    got = fiamma.zeros(2)
    assert dist.recv(got) == 0 and w.wait() and got.tolist() == [7.0, 7.0]
    dist.barrier()
    objs = [None]
    one = [1]
    dist.broadcast_object_list(one, src=0)
    assert one == [1]
    dist.all_gather_object(objs, ("x", 1))
    assert objs == [("x", 1)]


def test_groups(world):
    g = dist.new_group([0])
    assert dist.get_world_size(g) == 1 and dist.get_process_group_ranks(g) == [0]
    assert dist.get_global_rank(g, 0) == 0 and dist.get_group_rank(g, 0) == 0
    t = fiamma.ones(2)
    dist.all_reduce(t, group=g)
    with pytest.raises(ValueError, match="new_group: ranks must be distinct ranks in"):
        dist.new_group([0, 1])
    with pytest.warns(UserWarning, match="not a member"):
        assert dist.all_reduce(t, group=dist.GroupMember.NON_GROUP_MEMBER) is None
    dist.destroy_process_group(g)


def test_debug_level():
    assert dist.get_debug_level() == "INFO"
    with pytest.raises(ValueError, match="set_debug_level"):
        dist.set_debug_level("LOUD")
    dist.set_debug_level("OFF")
    try:
        dist.init_process_group()
        assert not dist.group.WORLD._check
        dist.destroy_process_group()
    finally:
        dist.set_debug_level("INFO")


def test_nccl_is_reported_unavailable():
    assert not dist.is_nccl_available() and dist.is_gloo_available()


def test_default_backend_for_device():
    assert dist.get_default_backend_for_device("cpu") == "gloo"
    assert dist.get_default_backend_for_device(fiamma.device("cpu")) == "gloo"
    assert dist.get_default_backend_for_device("cuda:1") == "nccl"
    with pytest.raises(ValueError, match="no backend for device 'tpu'"):
        dist.get_default_backend_for_device("tpu")


def test_smaller_api_parts():
    import os

    import fiamma

    assert dist.Backend("GLOO") == "gloo" and dist.Backend.NCCL == "nccl"
    with pytest.raises(ValueError, match="unknown backend 'tcp'"):
        dist.Backend("tcp")
    assert dist.DebugLevel.DETAIL == "DETAIL" and dist.default_pg_timeout.total_seconds() == 1800
    assert dist.supports_complex(dist.ReduceOp.SUM) and not dist.supports_complex(
        dist.ReduceOp.MAX)
    assert dist.get_pg_count() == 0
    dist.init_process_group()
    try:
        assert dist.get_pg_count() == 1
        assert dist.get_debug_level() == dist.DebugLevel.INFO
        mine, groups = dist.new_subgroups(group_size=1)
        assert mine.size() == 1 and len(groups) == 1 and dist.get_pg_count() == 2
        with pytest.raises(ValueError, match="more than one subgroup"):
            dist.new_subgroups_by_enumeration([[0], [0]])
        with pytest.raises(ValueError, match="must be divisible by group_size"):
            dist.new_subgroups(group_size=0)
        ts = [fiamma.ones(2), fiamma.full((3,), 2.0)]
        work = dist.all_reduce_coalesced(ts, async_op=True)
        assert [t.tolist() for t in work.get_future().wait()] == [[1.0, 1.0], [2.0, 2.0, 2.0]]
        outs = [[fiamma.zeros(2)]]
        dist.all_gather_coalesced(outs, [fiamma.ones(2)])
        assert outs[0][0].tolist() == [1.0, 1.0]
        assert dist.is_backend_available("gloo") and not dist.is_backend_available("ucc")
        os.environ.pop("LOCAL_RANK", None)
        assert dist.get_node_local_rank(fallback_rank=3) == 3
        with pytest.raises(RuntimeError, match="LOCAL_RANK is not in the environment"):
            dist.get_node_local_rank()
    finally:
        dist.destroy_process_group()


def test_deprecated_reduce_op_alias_warns(world):
    """``dist.reduce_op.SUM`` (the distributed tutorial's spelling) is ``ReduceOp.SUM`` with
    PyTorch's FutureWarning."""
    with pytest.warns(FutureWarning, match="`torch.distributed.reduce_op` is deprecated"):
        op = dist.reduce_op.SUM
    assert op == dist.ReduceOp.SUM
    t = fiamma.ones(2)
    with pytest.warns(FutureWarning):
        dist.all_reduce(t, op=dist.reduce_op.MAX)
    assert t.tolist() == [1.0, 1.0]


def test_pytorch_names_that_lightning_reaches():
    from fiamma.distributed import constants

    # PyTorch's ReduceOp.RedOpType is the type of the members
    assert isinstance(dist.ReduceOp.SUM, dist.ReduceOp.RedOpType)
    assert dist.ReduceOp.RedOpType is dist.ReduceOp and len(list(dist.ReduceOp)) == 8
    assert constants.default_pg_timeout == dist.default_pg_timeout
    assert constants.default_pg_nccl_timeout == dist.default_pg_timeout


def test_env_rendezvous_after_mpi_was_initialised_says_why(monkeypatch):
    # PyTorch Lightning's strategy="ddp" without a launcher: rank 0 has imported mpi4py.MPI
    # (probing for an MPI cluster) before init_process_group, so it is an MPI singleton
    from mpi4py import MPI  # noqa: F401

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29555")
    with pytest.raises(ValueError, match="MPI was initialised in this process before "
                                         "init_process_group"):
        dist.init_process_group("gloo", world_size=2, rank=0)
    assert not dist.is_initialized()
