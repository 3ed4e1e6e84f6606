"""The programs of PyTorch's "Writing Distributed Applications" tutorial (in its idiom, not its
text): ranks started with ``torch.multiprocessing.Process`` (forked), each calling
``init_process_group("gloo", rank=, world_size=)`` with MASTER_ADDR/MASTER_PORT; blocking and
non-blocking point-to-point, ``all_reduce`` on a ``new_group`` with the deprecated
``dist.reduce_op``, a ring all-reduce written with ``isend``/``recv``, scatter/gather and a
hand-written synchronous SGD (gradients averaged with all_reduce), run under
``python -m fiamma.run``; every printed value is checked against what the ranks must print."""

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
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.optim as optim
    from torch.multiprocessing import Process

    def p2p(rank, size):
        t = torch.zeros(1)
        if rank == 0:
            t += 1
            dist.send(tensor=t, dst=1)
        else:
            dist.recv(tensor=t, src=0)
        u = torch.zeros(1)
        req = dist.isend(tensor=u + 2, dst=1) if rank == 0 else dist.irecv(tensor=u, src=0)
        req.wait()
        print(f"p2p {rank} {t.item()} {u.item() if rank else 2.0}", flush=True)

    def group_sum(rank, size):
        group = dist.new_group([0, 1])
        t = torch.ones(1) * (rank + 1)
        dist.all_reduce(t, op=dist.reduce_op.SUM, group=group)
        print(f"sum {rank} {t.item()}", flush=True)

    def ring(rank, size):
        send = torch.arange(4.) * (rank + 1)
        send_buff, recv_buff, accum = send.clone(), send.clone(), send.clone()
        left, right = (rank - 1 + size) % size, (rank + 1) % size
        for i in range(size - 1):
            if i % 2 == 0:
                req = dist.isend(send_buff, right)
                dist.recv(recv_buff, left)
                accum[:] += recv_buff[:]
            else:
                req = dist.isend(recv_buff, right)
                dist.recv(send_buff, left)
                accum[:] += send_buff[:]
            req.wait()
        print(f"ring {rank} {accum.tolist()}", flush=True)

    def scatter_gather(rank, size):
        recv = torch.zeros(2)
        chunks = [torch.tensor([1., 2.]), torch.tensor([3., 4.])] if rank == 0 else None
        dist.scatter(recv, scatter_list=chunks, src=0)
        out = [torch.zeros(2) for _ in range(size)] if rank == 0 else None
        dist.gather(recv * 10, gather_list=out, dst=0)
        print(f"sg {rank} {recv.tolist()} {[o.tolist() for o in out] if out else None}",
              flush=True)

    def sgd(rank, size):
        torch.manual_seed(1234)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
        g = torch.Generator().manual_seed(7)
        x, y = torch.randn(32, 8, generator=g), torch.randint(0, 3, (32,), generator=g)
        mine = slice(rank * 16, rank * 16 + 16)  # each rank its half of the batch
        for _ in range(3):
            opt.zero_grad()
            F.cross_entropy(model(x[mine]), y[mine]).backward()
            for p in model.parameters():
                dist.all_reduce(p.grad.data, op=dist.ReduceOp.SUM)
                p.grad.data /= float(size)
            opt.step()
        torch.manual_seed(1234)  # one process on the whole batch must agree
        ref = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        ropt = optim.SGD(ref.parameters(), lr=0.1, momentum=0.5)
        for _ in range(3):
            ropt.zero_grad()
            F.cross_entropy(ref(x), y).backward()
            ropt.step()
        err = max((a - b).abs().max().item() for a, b in zip(model.parameters(),
                                                             ref.parameters()))
        print(f"sgd {rank} {err < 1e-5}", flush=True)

    def run(rank, size):
        for fn in (p2p, group_sum, ring, scatter_gather, sgd):
            fn(rank, size)
        dist.barrier()

    def init_process(rank, size, fn, backend="gloo"):
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = sys.argv[1]
        dist.init_process_group(backend, rank=rank, world_size=size)
        fn(rank, size)
        dist.destroy_process_group()

    if __name__ == "__main__":
        size = 2
        processes = []
        for rank in range(size):
            p = Process(target=init_process, args=(rank, size, run))
            p.start()
            processes.append(p)
        for p in processes:
            p.join()
        print("exit codes", [p.exitcode for p in processes])
''')


def free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_dist_tutorial_programs_run_under_the_runner(tmp_path):
    script = tmp_path / "dist_tuto.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    proc = subprocess.run([sys.executable, "-m", "fiamma.run", str(script), str(free_port())],
                          capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "exit codes [0, 0]" in proc.stdout, out
    want = ["p2p 0 1.0 2.0", "p2p 1 1.0 2.0", "sum 0 3.0", "sum 1 3.0",
            "ring 0 [0.0, 3.0, 6.0, 9.0]", "ring 1 [0.0, 3.0, 6.0, 9.0]",
            "sg 0 [1.0, 2.0] [[10.0, 20.0], [30.0, 40.0]]", "sg 1 [3.0, 4.0] None",
            "sgd 0 True", "sgd 1 True"]
    for line in want:
        assert line in proc.stdout, out
