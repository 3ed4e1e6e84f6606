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
    lazy = nn.Sequential(nn.Linear(3, 4), nn.LazyLinear(2))
    with pytest.raises(RuntimeError, match=r"uninitialized parameters can't be used with "
                                           r"`DistributedDataParallel`.*1\.weight"):
        nn.parallel.DistributedDataParallel(lazy)
    lazy(fiamma.ones(1, 3))  # after a dummy forward it wraps
    nn.parallel.DistributedDataParallel(lazy)
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


def test_ddp_comm_hooks_on_two_ranks():
    proc = run_ranks(2, "comm_hooks.py", limit=240)
    assert proc.returncode == 0, show(proc)
    for r in (0, 1):
        for what in ("allreduce_hook ok", "16-bit hooks ok", "noop_hook ok", "powerSGD ok",
                     "error feedback"):
            assert f"rank {r}: {what}" in proc.stdout, show(proc)
        assert f"OK rank {r}" in proc.stdout, show(proc)


def test_comm_hook_errors_and_grad_bucket(world):
    from fiamma.distributed.algorithms.ddp_comm_hooks import (
        DDPCommHookType,
        default_hooks,
        register_ddp_comm_hook,
    )
    from fiamma.futures import Future

    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    ddp = nn.parallel.DistributedDataParallel(model)
    seen = []

    def spy(state, bucket):
        seen.append((state, bucket.index(), bucket.is_last(), bucket.buffer().numel(),
                     [tuple(g.shape) for g in bucket.gradients()],
                     [tuple(p.shape) for p in bucket.parameters()]))
        return default_hooks.allreduce_hook(None, bucket)

    ddp.register_comm_hook("my state", spy)
    ddp(fiamma.ones(2, 3)).sum().backward()
    # one bucket, parameters in reverse order (as PyTorch's)
    shapes = [(2,), (2, 4), (4,), (4, 3)]
    assert seen == [("my state", 0, True, 26, shapes, shapes)]
    with pytest.raises(RuntimeError, match="can only be called once"):
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    with pytest.raises(RuntimeError, match="can only be called once"):
        register_ddp_comm_hook(DDPCommHookType.ALLREDUCE, ddp)
    ddp = nn.parallel.DistributedDataParallel(nn.Linear(2, 2))
    with pytest.raises(TypeError, match=r"takes two arguments \(state, bucket\)"):
        ddp.register_comm_hook(None, lambda bucket: bucket)
    with pytest.raises(TypeError, match="must be callable"):
        ddp.register_comm_hook(None, 3)
    with pytest.raises(TypeError, match="register_ddp_comm_hook: expected a DDPCommHookType"):
        register_ddp_comm_hook("ALLREDUCE", ddp)
    ddp.register_comm_hook(None, lambda s, b: b.buffer())
    with pytest.raises(TypeError, match="must return a fiamma.futures.Future.*got Tensor"):
        ddp(fiamma.ones(1, 2)).sum().backward()

    def short(state, bucket):
        f = Future()
        f.set_result(bucket.buffer()[:2])
        return f

    ddp = nn.parallel.DistributedDataParallel(nn.Linear(2, 2))
    ddp.register_comm_hook(None, short)
    with pytest.raises(RuntimeError, match="tensor of 6 elements; bucket 0 got a tensor of 2"):
        ddp(fiamma.ones(1, 2)).sum().backward()
    b = dist.GradBucket(0, 1, fiamma.zeros(6), list(nn.Linear(2, 2).parameters()), [0, 4])
    with pytest.raises(ValueError, match="set_buffer: expected a tensor of 6 elements"):
        b.set_buffer(fiamma.zeros(5))


def test_powerSGD_state_checks_and_pickles(world):
    import pickle

    from fiamma.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

    with pytest.raises(ValueError, match="matrix_approximation_rank must be >= 1"):
        psgd.PowerSGDState(None, matrix_approximation_rank=0)
    state = psgd.PowerSGDState(dist.group.WORLD, start_powerSGD_iter=2)
    state.iter = 5
    back = pickle.loads(pickle.dumps(state))
    assert back.iter == 5 and back.process_group is None and back.start_powerSGD_iter == 2
    assert state.compression_stats() == (0, 0, 0)


def test_last_bucket_tail_is_split_off():
    """The parameters whose gradients come last (the first layers) get a small bucket of their
    own, so that the rest is all-reduced while their backward runs; caps still hold."""
    from fiamma.distributed._reducer import TAIL_BYTES, buckets

    ps = [fiamma.zeros(150), fiamma.zeros(6), fiamma.zeros(2400), fiamma.zeros(16),
          fiamma.zeros(48000), fiamma.zeros(120), fiamma.zeros(10)]
    got = buckets(ps, 25 << 20, 1 << 20)
    assert [b.keys for b in got] == [[6, 5, 4], [3, 2, 1, 0]]
    assert sum(b.flat.numel() for b in got) == sum(p.numel() for p in ps)
    # a bucket of one parameter, or a tail that would be more than a quarter, stays whole
    assert [b.keys for b in buckets([fiamma.zeros(10)], 1 << 20, 1 << 20)] == [[0]]
    assert [b.keys for b in buckets([fiamma.zeros(10), fiamma.zeros(10)], 1 << 20,
                                    1 << 20)] == [[1, 0]]
    big = [fiamma.zeros(TAIL_BYTES // 4 + 1), fiamma.zeros(10 * TAIL_BYTES)]
    assert [b.keys for b in buckets(big, 100 << 20, 100 << 20)] == [[1, 0]]
    # small caps: many buckets, each within the cap, every parameter once
    small = buckets(ps, 4096, 4096)
    assert sorted(k for b in small for k in b.keys) == list(range(len(ps)))
    assert all(b.flat.numel() * 4 <= 4096 or len(b.keys) == 1 for b in small)


def test_post_local_sgd_hook_and_logging_data_on_one_rank(world):
    from fiamma.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook as pl

    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)
    state = pl.PostLocalSGDState(process_group=None, subgroup=None, start_localSGD_iter=2)
    ddp.register_comm_hook(state, pl.post_localSGD_hook)
    for i in range(3):
        model.zero_grad()
        ddp(fiamma.ones(2, 3)).sum().backward()
        # one iteration per backward; the local phase (from iteration 2) makes its subgroup
        assert state.iter == i + 1 and (state.subgroup is None) == (i < 2)
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(fiamma.ones(2, 3)).sum().backward()  # over one rank every phase averages to this
    assert all(fiamma.equal(a, p.grad) for a, p in zip(got, model.parameters()))
    with pytest.raises(ValueError, match="start_localSGD_iter must be a positive int"):
        pl.PostLocalSGDState(None, None, 0)

    info = ddp._get_ddp_logging_data()
    assert (info["world_size"], info["rank"], info["module_name"]) == (1, 0, "Sequential")
    assert info["bucket_cap_bytes"] == 1024 * 1024 and info["num_parameter_tensors"] == 4
    assert info["total_parameter_size_bytes"] == (3 * 4 + 4 + 4 + 1) * 4
    assert "can_set_static_graph" not in info  # not analysed here: not claimed


def test_sync_module_states_and_c10d_names_on_two_ranks():
    proc = run_ranks(2, "sync_states.py", limit=120)
    assert proc.returncode == 0, show(proc)
    assert "OK rank 0" in proc.stdout and "OK rank 1" in proc.stdout, show(proc)


def test_default_group_before_and_after_init():
    from fiamma.distributed import distributed_c10d as c10d

    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        c10d._get_default_group()
    assert len(c10d._pg_map) == 0 and c10d.all_reduce is dist.all_reduce
    dist.init_process_group()
    try:
        assert c10d._get_default_group() is dist.group.WORLD
        assert c10d._pg_map[dist.group.WORLD] == (dist.group.WORLD.backend, None)
    finally:
        dist.destroy_process_group()
    assert len(c10d._pg_map) == 0


def test_differentiable_collectives_on_two_ranks():
    pytest.importorskip("fiamma.autograd")
    proc = run_ranks(2, "nn_functional.py", limit=120)
    assert proc.returncode == 0, show(proc)
    assert "OK rank 0" in proc.stdout and "OK rank 1" in proc.stdout, show(proc)
