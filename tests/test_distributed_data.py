"""fiamma.data with fiamma.distributed: DistributedSampler takes the world size and rank from
the default process group, and 2 ranks' shards partition the dataset."""

import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("fiamma.distributed")
pytest.importorskip("fiamma.data")

WORKER = """
import fiamma, fiamma.distributed as dist
from fiamma.data import DataLoader, DistributedSampler, TensorDataset
dist.init_process_group()
ds = TensorDataset(fiamma.arange(10))
sampler = DistributedSampler(ds, shuffle=True, seed=3)
assert (sampler.num_replicas, sampler.rank) == (dist.get_world_size(), dist.get_rank())
for epoch in range(2):
    sampler.set_epoch(epoch)
    mine = [int(i) for (b,) in DataLoader(ds, batch_size=2, sampler=sampler) for i in b]
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    if dist.get_rank() == 0:
        print("EPOCH", epoch, sorted(i for part in everyone for i in part), flush=True)
dist.destroy_process_group()
"""


def test_distributed_sampler_uses_the_process_group(tmp_path):
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which(
        "mpiexec")
    if mpiexec is None:
        pytest.skip("no mpiexec (pip install mpich)")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    proc = subprocess.run([mpiexec, "-n", "2", sys.executable, str(script)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "EPOCH 0 [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" in proc.stdout
    assert "EPOCH 1 [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" in proc.stdout
