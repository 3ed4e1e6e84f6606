"""``python -m fiamma.distributed.run``: torchrun's command line on an MPI launcher.

    python -m fiamma.distributed.run --nproc-per-node 2 train.py --epochs 3

starts ``mpiexec -n 2`` over a small per-rank wrapper that exports torchrun's environment
(RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, ...)
and runs ``python train.py --epochs 3``. The MPI launcher forms the world, so
``init_process_group()`` needs no rendezvous. When a rank fails, mpiexec ends the others and
this launcher exits non-zero, naming the rank that failed first and how. With
``--max-restarts N`` (torchrun's flag) a failed job is instead started again, every rank anew
(MPI worlds cannot replace one rank), up to N times; each attempt's ranks see its number in
TORCHELASTIC_RESTART_COUNT, and a script resumes from its own checkpoint.

Several nodes: MPI starts every node's ranks from one place, so run the launcher once, on the
first node, with an MPI hostfile: ``--nnodes 2 --nproc-per-node 8 --hostfile hosts``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid

from fiamma.distributed import _shm_sweep


def _parser():
    p = argparse.ArgumentParser(
        prog="python -m fiamma.distributed.run",
        description="Start N processes of a training script on MPI, with torchrun's flags "
                    "and environment.")
    p.add_argument("--nnodes", default="1", help="number of nodes (N or N:N)")
    p.add_argument("--nproc-per-node", "--nproc_per_node", default="1",
                   help="processes per node: a number, or 'cpu'/'auto' (one per CPU core)")
    p.add_argument("--node-rank", "--node_rank", type=int, default=0)
    p.add_argument("--master-addr", "--master_addr", default="127.0.0.1")
    p.add_argument("--master-port", "--master_port", type=int, default=None,
                   help="exported as MASTER_PORT (default: a free port on one node, 29500 on "
                        "several)")
    p.add_argument("--standalone", action="store_true", help="one node (the default here)")
    p.add_argument("--rdzv-backend", "--rdzv_backend", default="static")
    p.add_argument("--rdzv-endpoint", "--rdzv_endpoint", default="")
    p.add_argument("--rdzv-id", "--rdzv_id", default=None)
    p.add_argument("--max-restarts", "--max_restarts", type=int, default=0)
    p.add_argument("--hostfile", default=None,
                   help="an MPI hostfile naming the nodes (needed with --nnodes > 1)")
    p.add_argument("--mpiexec", default=None,
                   help="the mpiexec to use (default: the one beside this Python, then PATH)")
    p.add_argument("-m", "--module", action="store_true",
                   help="run the script argument as a module (python -m)")
    p.add_argument("--no-python", "--no_python", action="store_true",
                   help="run the script argument as a program, not with Python")
    p.add_argument("training_script")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def _error(msg):
    sys.stderr.write(f"fiamma.distributed.run: error: {msg}\n")
    return 2


def find_mpiexec(explicit=None):
    if explicit:
        return explicit
    found = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which(
        "mpiexec")
    if found is None:
        raise FileNotFoundError("no mpiexec found beside this Python or on PATH: install an MPI "
                                "library (`pip install mpich`) or pass --mpiexec")
    return found


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _flavour(mpiexec):
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    return "openmpi" if "Open MPI" in out or "OpenRTE" in out else "hydra"


def command(args, mpiexec, flavour, nprocs, nnodes, env_names):
    """The mpiexec command line that starts every rank."""
    if args.no_python:
        mode, target = "exec", [args.training_script]
    elif args.module:
        mode, target = "module", [args.training_script]
    else:
        mode, target = "python", [args.training_script]
    total = nprocs * nnodes
    cmd = [mpiexec]
    if flavour == "openmpi":
        cmd += ["-n", str(total), "--oversubscribe"]
        if args.hostfile:
            cmd += ["--hostfile", args.hostfile, "--npernode", str(nprocs)]
        for name in env_names:
            cmd += ["-x", name]
    else:
        cmd += ["-n", str(total)]
        if args.hostfile:
            cmd += ["-f", args.hostfile, "-ppn", str(nprocs)]
    return cmd + [sys.executable, "-m", "fiamma.distributed._bootstrap", mode, *target,
                  *args.training_script_args]


def _report(folder, world):
    """Name the rank that failed first; the exit status to return (0: none failed)."""
    fails = []
    for path in glob.glob(os.path.join(folder, "rank-*.json")):
        with open(path) as f:
            fails.append(json.load(f))
    done = {}
    for path in glob.glob(os.path.join(folder, "done-*.json")):
        with open(path) as f:
            rec = json.load(f)
            done[rec["rank"]] = rec
    if fails:
        fails.sort(key=lambda r: r["time"])
        first = fails[0]
        others = sorted(r["rank"] for r in fails[1:])
        also = f"; ranks {others} failed after it" if others else ""
        sys.stderr.write(f"fiamma.distributed.run: rank {first['rank']} (of {world}) failed "
                         f"first: {first['text']}{also}\n")
        return 1
    unfinished = [r for r in range(world) if r not in done]
    if unfinished:
        early = min(done.values(), key=lambda r: r["time"]) if done else None
        why = (f" (rank {early['rank']} had exited, with code {early['code']}, while they were "
               "still running)" if early else "")
        sys.stderr.write(f"fiamma.distributed.run: ranks {unfinished} (of {world}) were ended "
                         f"before they finished{why}\n")
        return 1
    return 0


def main(argv=None, extra_env=None, prog=None):
    parser = _parser()
    if prog:
        parser.prog = prog
    args = parser.parse_args(argv)
    extra_env = dict(extra_env or {})
    nnodes = args.nnodes.split(":")
    if len(nnodes) > 2 or (len(nnodes) == 2 and nnodes[0] != nnodes[1]):
        return _error(f"--nnodes {args.nnodes}: elastic ranges are not supported (MPI worlds "
                      "have a fixed size)")
    nnodes = int(nnodes[0])
    nproc = args.nproc_per_node
    nproc = os.cpu_count() if nproc in ("cpu", "auto") else int(nproc)
    if nproc < 1 or nnodes < 1:
        return _error("--nproc-per-node and --nnodes must be positive")
    if args.max_restarts < 0:
        return _error(f"--max-restarts must be >= 0, got {args.max_restarts}")
    if nnodes > 1:
        if args.node_rank != 0:
            return _error("with MPI, the launcher on the first node starts the ranks of every "
                          "node (through --hostfile); do not run it on the other nodes")
        if not args.hostfile:
            return _error("--nnodes > 1 needs --hostfile (an MPI hostfile naming the nodes)")
    if args.rdzv_endpoint:
        host, _, port = args.rdzv_endpoint.rpartition(":")
        args.master_addr = host or args.master_addr
        args.master_port = int(port) if port else args.master_port
    try:
        mpiexec = find_mpiexec(args.mpiexec)
    except FileNotFoundError as e:
        return _error(str(e))
    run_id = args.rdzv_id or uuid.uuid4().hex[:12]
    if "OMP_NUM_THREADS" not in os.environ and nproc > 1:
        extra_env.setdefault("OMP_NUM_THREADS", "1")
        sys.stderr.write("fiamma.distributed.run: setting OMP_NUM_THREADS=1 for each process "
                         "(set it yourself to use more threads per rank)\n")
    flavour = _flavour(mpiexec)
    for attempt in range(args.max_restarts + 1):
        # a fresh port per attempt: the failed job's may linger in TIME_WAIT
        port = args.master_port or (_free_port() if nnodes == 1 else 29500)
        code = _attempt(args, mpiexec, flavour, nproc, nnodes, port, run_id, attempt,
                        extra_env)
        if code in (0, 130) or attempt == args.max_restarts:
            return code
        sys.stderr.write(f"fiamma.distributed.run: restarting every rank (restart "
                         f"{attempt + 1} of at most {args.max_restarts})\n")
    return code


def _attempt(args, mpiexec, flavour, nproc, nnodes, port, run_id, attempt, extra_env):
    """One mpiexec job; its exit status (the failing rank named on stderr)."""
    folder = tempfile.mkdtemp(prefix="fiamma-run-")
    env = {"MASTER_ADDR": args.master_addr, "MASTER_PORT": str(port),
           "FIAMMA_DIST_FAILURE_DIR": folder, **extra_env, "TORCHELASTIC_RUN_ID": run_id,
           "TORCHELASTIC_RESTART_COUNT": str(attempt),
           "TORCHELASTIC_MAX_RESTARTS": str(args.max_restarts)}
    cmd = command(args, mpiexec, flavour, nproc, nnodes, list(env))
    shm_before = _shm_sweep.segments()
    try:
        code = subprocess.call(cmd, env={**os.environ, **env})
        status = _report(folder, nproc * nnodes)
    except KeyboardInterrupt:
        return 130
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        _shm_sweep.remove_orphans(shm_before)
    if status:
        return status
    if code:
        sys.stderr.write(f"fiamma.distributed.run: mpiexec exited with code {code}\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
