"""The pattern of PyTorch's DDP tutorial, unmodified under ``python -m fiamma.run``:
``torch.multiprocessing.spawn`` starts one process per rank, each calls
``init_process_group("gloo", rank=rank, world_size=n)`` with MASTER_ADDR/MASTER_PORT set by the
program (no launcher), trains a DDP model one step, and the ranks' parameters agree."""

import os
import socket
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("fiamma.distributed")
pytest.importorskip("fiamma.optim")

PROGRAM = textwrap.dedent('''
    import os, sys
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    def setup(rank, world_size):
        os.environ["MASTER_ADDR"] = "localhost"
        os.environ["MASTER_PORT"] = sys.argv[1]
        dist.init_process_group("gloo", rank=rank, world_size=world_size)

    def demo_basic(rank, world_size):
        setup(rank, world_size)
        torch.manual_seed(rank)  # different data on each rank
        model = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 5))
        ddp_model = DDP(model)
        optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
        for _ in range(3):
            optimizer.zero_grad()
            loss = nn.MSELoss()(ddp_model(torch.randn(20, 10)), torch.randn(20, 5))
            loss.backward()
            optimizer.step()
        gathered = [torch.zeros_like(model[0].weight) for _ in range(world_size)]
        dist.all_gather(gathered, model[0].weight.detach())
        same = all(torch.equal(gathered[0], g) for g in gathered)
        on_fiamma = hasattr(torch.version, "fiamma")
        print(f"rank {rank} fiamma={on_fiamma} same={same}", flush=True)
        dist.destroy_process_group()

    if __name__ == "__main__":
        mp.spawn(demo_basic, args=(2,), nprocs=2, join=True)
''')


def free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def env():
    e = dict(os.environ)
    e.setdefault("OMP_NUM_THREADS", "1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
              "MASTER_PORT"):  # an outer job's launcher variables must not leak in
        e.pop(k, None)
    return e


def test_ddp_tutorial_with_mp_spawn_runs_under_the_runner(tmp_path):
    script = tmp_path / "ddp_spawn.py"
    script.write_text(PROGRAM)
    proc = subprocess.run([sys.executable, "-m", "fiamma.run", str(script), str(free_port())],
                          capture_output=True, text=True, timeout=240, env=env(),
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in (0, 1):
        assert f"rank {rank} fiamma=True same=True" in proc.stdout, proc.stdout + proc.stderr
