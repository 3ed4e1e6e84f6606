"""ZeroRedundancyOptimizer (fiamma-distributed wrapping fiamma-optim) on 2 ranks: the checks
of tests/dist_workers/zero.py, run under ``python -m fiamma.distributed.run``."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")
pytest.importorskip("fiamma.distributed")
pytest.importorskip("fiamma.optim")

WORKER = Path(__file__).resolve().parent / "dist_workers" / "zero.py"


def test_zero_redundancy_optimizer_on_two_ranks():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    proc = subprocess.run([sys.executable, "-m", "fiamma.distributed.run", "--nproc-per-node",
                           "2", str(WORKER)], capture_output=True, text=True, timeout=300,
                          env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    for r in (0, 1):
        for what in ("ddp + zero == ddp + adam", "lr scheduler ok", "state dicts ok",
                     "add_param_group ok"):
            assert f"rank {r}: {what}" in out, out[-4000:]
        assert f"OK rank {r}" in out, out[-4000:]


def test_zero_single_rank_errors():
    import fiamma
    import fiamma.distributed as dist
    from fiamma import optim
    from fiamma.distributed.optim import ZeroRedundancyOptimizer

    dist.init_process_group()
    try:
        w = fiamma.nn.Parameter(fiamma.ones(3))
        with pytest.raises(ValueError, match="overlap_with_ddp=True is not supported"):
            ZeroRedundancyOptimizer([w], optim.SGD, overlap_with_ddp=True, lr=0.1)
        with pytest.raises(TypeError, match="optimizer_class must be an optimizer class"):
            ZeroRedundancyOptimizer([w], "SGD", lr=0.1)
        z = ZeroRedundancyOptimizer([w], optim.SGD, lr=0.1)
        w.grad = fiamma.ones(3)
        z.step()
        assert w.tolist() == pytest.approx([0.9] * 3)
        with pytest.raises(RuntimeError, match="has not been consolidated"):
            z.state_dict()
        z.consolidate_state_dict()
        assert z.state_dict()["param_groups"][0]["params"] == [0]
        with pytest.raises(ValueError, match="saved parameter groups do not match"):
            z.load_state_dict({"state": {}, "param_groups": []})
    finally:
        dist.destroy_process_group()
