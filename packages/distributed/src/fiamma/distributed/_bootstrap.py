"""What the launcher's mpiexec starts on every rank: it sets torchrun's environment from the MPI
launcher's (RANK, LOCAL_RANK, WORLD_SIZE, ...), runs the training program as a child process
and, when the child fails (an exit code, a signal), writes the failure record that the launcher
reads to name the rank that failed first. It imports nothing heavy and never initialises MPI
(the child does; the PMI connection is passed on to it)."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time

# (rank, size, local rank, local size) as MPICH/Hydra, Open MPI and Slurm export them
_LAUNCHERS = (
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
)


def rank_environment(env):
    """torchrun's variables for this process, from the MPI launcher's."""
    for rk, sz, lr, ls in _LAUNCHERS:
        if rk in env and sz in env:
            rank, size = int(env[rk]), int(env[sz])
            local = int(env.get(lr, rank))
            local_size = int(env.get(ls, "").split("(")[0] or env.get("LOCAL_WORLD_SIZE", size))
            break
    else:
        raise RuntimeError("fiamma.distributed._bootstrap: no MPI launcher variables (PMI_RANK, "
                           "OMPI_COMM_WORLD_RANK, SLURM_PROCID); it must be started by mpiexec")
    return {"RANK": str(rank), "WORLD_SIZE": str(size), "LOCAL_RANK": str(local),
            "LOCAL_WORLD_SIZE": str(local_size), "GROUP_RANK": str(rank // local_size),
            "GROUP_WORLD_SIZE": str(max(size // local_size, 1)), "ROLE_NAME": "default",
            "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(size),
            # (run.py's --max-restarts sets both for each attempt)
            "TORCHELASTIC_RESTART_COUNT": env.get("TORCHELASTIC_RESTART_COUNT", "0"),
            "TORCHELASTIC_MAX_RESTARTS": env.get("TORCHELASTIC_MAX_RESTARTS", "0")}


def _die_with_parent():
    """In the child: get SIGKILL when this wrapper dies (mpiexec kills the wrappers)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the child outlives a killed wrapper
        pass


def _write(folder, name, record):
    if not folder:
        return
    try:
        fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:  # the rank recorded its own failure first (or no folder)
        return
    with os.fdopen(fd, "w") as f:
        json.dump(record, f)


def _relay(stream, tail, keep=4096):
    """Copy the child's stderr to ours as it comes, keeping its last ``keep`` bytes."""
    out = sys.stderr.buffer
    while True:
        chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
        if not chunk:
            return
        out.write(chunk)
        out.flush()
        tail.append(chunk)
        while sum(map(len, tail)) > keep and len(tail) > 1:
            tail.pop(0)


def _last_line(tail):
    lines = b"".join(tail).decode(errors="replace").strip().splitlines()
    return lines[-1].strip()[:500] if lines else ""


def _recorded(path):
    """The message an ``@record`` entry point wrote, if any."""
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return str(json.load(f)["message"]["message"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def main(argv):
    mode, command = argv[0], argv[1:]
    env = dict(os.environ)
    env.update(rank_environment(env))
    rank = int(env["RANK"])
    if env.pop("FIAMMA_LAUNCH_LOCAL_RANK_ARG", None) == "1" and command:
        # python -m fiamma.distributed.launch without --use-env: the script gets
        # --local-rank=N before its own arguments (torch.distributed.launch's convention)
        command = [command[0], f"--local-rank={env['LOCAL_RANK']}", *command[1:]]
    if mode == "python":
        command = [sys.executable, *command]
    elif mode == "module":
        command = [sys.executable, "-m", *command]
    folder = env.get("FIAMMA_DIST_FAILURE_DIR")
    error_file = os.path.join(folder, f"error-{rank}.json") if folder else None
    if error_file and "TORCHELASTIC_ERROR_FILE" not in env:  # (for @record)
        env["TORCHELASTIC_ERROR_FILE"] = error_file
    fds = tuple(int(env[k]) for k in ("PMI_FD",) if env.get(k, "").isdigit())
    child = subprocess.Popen(command, env=env, pass_fds=fds, preexec_fn=_die_with_parent,
                             stderr=subprocess.PIPE)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    tail = []
    relay = threading.Thread(target=_relay, args=(child.stderr, tail), daemon=True)
    relay.start()
    code = child.wait()
    relay.join(timeout=5)
    now = time.time()
    if code != 0:
        what = (f"killed by signal {signal.Signals(-code).name}" if code < 0
                else f"exited with code {code}")
        last = _recorded(error_file) or _last_line(tail)
        if last:
            what += f"; its last error output: {last}"
        _write(folder, f"rank-{rank}.json", {"rank": rank, "time": now, "kind": "exit",
                                             "text": what})
    _write(folder, f"done-{rank}.json", {"rank": rank, "time": now, "code": code})
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
