"""DistributedDataParallel on 2 ranks equals one process on the whole batch (float64, several
SGD steps; with and without no_sync accumulation; one bucket and many); unused parameters;
checkpoints from rank 0 load in a plain model. The checks run in tests/workers/ddp.py."""

import pytest
from _launch import run_ranks, show

import fiamma
import fiamma.distributed as dist
from fiamma import nn


def test_ddp_two_ranks_equal_one_process_on_the_full_batch(tmp_path):
    ckpt = tmp_path / "model.pt"
    proc = run_ranks(2, "ddp.py", ckpt, limit=180)
    assert proc.returncode == 0, show(proc)
    assert "OK rank 0" in proc.stdout and "OK rank 1" in proc.stdout, show(proc)
    assert "named: DistributedDataParallel: the previous iteration's backward did not " \
           "produce gradients for these parameters: spare.weight" in proc.stdout
    state = fiamma.load(str(ckpt))
    assert sorted(state) == ["conv.bias", "conv.weight", "fc1.bias", "fc1.weight", "fc2.bias",
                             "fc2.weight", "seen", "spare.bias", "spare.weight"]


@pytest.fixture
def world():
    dist.init_process_group()
    yield
    dist.destroy_process_group()


def test_ddp_one_rank_and_its_errors(world):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    ddp = nn.parallel.DistributedDataParallel(model)
    assert ddp.module is model and sorted(ddp.state_dict())[0] == "module.0.bias"
    ddp(fiamma.ones(2, 3)).sum().backward()
    expect = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(fiamma.ones(2, 3)).sum().backward()  # the average over one rank is the gradient
    for a, b in zip(expect, model.parameters()):
        assert fiamma.equal(a, b.grad)
    ddp(fiamma.ones(2, 3))  # a forward without backward (evaluation with grad on) is fine
    ddp(fiamma.ones(2, 3)).sum().backward()
    with pytest.raises(RuntimeError, match="doesn't have any parameter that requires"):
        nn.parallel.DistributedDataParallel(nn.ReLU())
    with pytest.raises(ValueError, match="bucket_cap_mb must be positive"):
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2), bucket_cap_mb=0)
    with pytest.raises(ValueError, match="device_ids must name one device"):
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2), device_ids=[0, 1])


def test_sync_batchnorm_on_two_ranks_equals_batchnorm_on_the_whole_batch():
    proc = run_ranks(2, "sync_bn.py", limit=180)
    assert proc.returncode == 0, show(proc)
    assert "OK rank 0" in proc.stdout and "OK rank 1" in proc.stdout, show(proc)


def test_ddp_join_uneven_inputs():
    proc = run_ranks(2, "join.py", limit=180)
    assert proc.returncode == 0, show(proc)
    for r in (0, 1):
        assert f"OK rank {r}" in proc.stdout, show(proc)
        for d in (True, False):
            assert f"rank {r}: join divide_by_initial_world_size={d} ok" in proc.stdout, \
                show(proc)
