"""The DataLoader fault matrix (issue 18): over both sharing strategies and the fork and
forkserver start methods, a worker raises, is SIGKILLed, the loop breaks early, the iterator is
dropped mid-epoch, persistent workers are left at exit, samples have inconsistent shapes or are
not tensors, a timeout passes, Ctrl-C hits the main process. Each must end without a hang, with
the right error, and with no new /dev/shm entry (the ``fiamma_mp_*`` names of the process and
its workers, and the queues' named semaphores).

The cases run in child processes (fault_cases.py): all children start at once, so the matrix
costs about as long as its slowest child; a hung case is killed by the child's watchdog, which
prints every thread's stack.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /dev/shm")

HERE = Path(__file__).parent
STRATEGIES = ["file_descriptor", "file_system"]
CONTEXTS = ["fork", "forkserver"]

# case -> (exception type or None, what its message must contain)
CASES = {
    "worker_raises": ("ValueError", ["Caught ValueError in DataLoader worker process",
                                     "sample 7 is broken", "Traceback", "__getitem__"]),
    "worker_raises_batches_kept": ("ValueError", ["sample 37 is broken", "Traceback"]),
    "worker_sigkilled": ("RuntimeError", ["killed by signal: SIGKILL"]),
    "early_break": (None, []),
    "iterator_dropped": (None, []),
    "persistent_break": (None, []),
    "inconsistent_shapes": ("RuntimeError", ["Caught RuntimeError in DataLoader worker",
                                             "Traceback"]),
    "non_tensor_sample": ("TypeError", ["Caught TypeError in DataLoader worker", "Traceback"]),
    "timeout": ("RuntimeError", ["timed out after 0.5 seconds"]),
    "keyboard_interrupt": ("KeyboardInterrupt", []),
    "more_batches_kept_than_slabs": (None, []),
}
EXIT_CASES = ["exit_persistent", "exit_mid_epoch"]
CHILD_TIMEOUT_S = 240

_runs = {}


def _launch(strategy, ctx, cases):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return subprocess.Popen([sys.executable, str(HERE / "fault_cases.py"), strategy, ctx,
                             ",".join(cases)], cwd=HERE, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _results(strategy, ctx, kind):
    """The parsed output of the child for (strategy, ctx, kind); every child of the matrix is
    started on the first call."""
    if not _runs:
        for s in STRATEGIES:
            for c in CONTEXTS:
                _runs[s, c, "in"] = _launch(s, c, list(CASES))
                _runs[s, c, "exit"] = _launch(s, c, EXIT_CASES)
    proc = _runs[strategy, ctx, kind]
    if not isinstance(proc, tuple):
        try:
            out, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        time.sleep(0.3)  # let the kernel finish tearing the process tree down
        rows = {}
        for line in out.splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                rows[row["case"]] = row
        _runs[strategy, ctx, kind] = proc = (rows, err, proc.returncode)
    return proc


def _leftovers(row):
    pids = {row["pid"], *row["workers"]}
    sems = {"sem." + s.lstrip("/") for s in row["sems"]}
    left = []
    for n in os.listdir("/dev/shm"):
        if n in sems:
            left.append(n)
        elif n.startswith("fiamma_mp_"):
            parts = n.split("_")
            if len(parts) > 3 and parts[2].isdigit() and int(parts[2]) in pids:
                left.append(n)
    return left


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("case", list(CASES))
def test_fault(case, strategy, ctx):
    rows, err, code = _results(strategy, ctx, "in")
    assert case in rows, f"case {case} did not report (exit code {code}):\n{err[-3000:]}"
    row = rows[case]
    want, parts = CASES[case]
    got = row["error"]
    if want is None:
        assert got is None, got
    else:
        assert got is not None and got["type"] == want, got
        for p in parts:
            assert p in got["msg"], got["msg"]
    assert row["left"] == [], f"left in /dev/shm while the process lives on: {row['left']}"


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_workers_left_at_exit(strategy, ctx):
    """A persistent loader and an iterator mid-epoch still alive at interpreter exit: their
    workers are stopped (not killed half-way), the process exits 0 promptly, and nothing is
    left in /dev/shm."""
    rows, err, code = _results(strategy, ctx, "exit")
    assert code == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    for case in EXIT_CASES:
        assert rows[case]["error"] is None
        assert _leftovers(rows[case]) == []
