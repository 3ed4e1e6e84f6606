"""DataLoader with worker processes: results, seeding, sharding, and failure behaviour (a
worker raises, is SIGKILLed, the loop is left early, the loader is deleted mid-epoch), with a
check that no shared-memory files are left behind."""

import gc
import os
import sys
import time

import pytest
from loader_datasets import (
    Augmented,
    Big,
    Failing,
    SelfSharding,
    Slow,
    Squares,
    Stream,
    Suicidal,
    WorkerIds,
    record_init,
)

import fiamma
from fiamma import data as D

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")


def _shm():
    try:
        return {f for f in os.listdir("/dev/shm") if "fiamma" in f}
    except FileNotFoundError:
        return set()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


@pytest.fixture(autouse=True)
def no_shm_leak():
    """No shared-memory file made during the test is left by this process or by a process
    that no longer exists (names carry the creator's pid: fiamma_mp_<pid>_<token>); files of
    other live processes (tests running beside these) are not ours to judge."""
    before = _shm()
    yield
    gc.collect()
    left = set()
    for name in _shm() - before:
        parts = name.split("_")
        pid = int(parts[2]) if len(parts) > 3 and parts[2].isdigit() else None
        if pid is None or pid == os.getpid() or not _alive(pid):
            left.add(name)
    assert not left


@pytest.mark.parametrize("ctx", ["forkserver", "spawn"])
def test_same_batches_as_the_main_process(ctx):
    ref = [(x.tolist(), y.tolist()) for x, y in D.DataLoader(Squares(), batch_size=6)]
    dl = D.DataLoader(Squares(), batch_size=6, num_workers=2, multiprocessing_context=ctx)
    got = [(x.tolist(), y.tolist()) for x, y in dl]
    assert got == ref


def test_out_of_order_delivery_gives_every_batch_once():
    dl = D.DataLoader(Squares(), batch_size=5, num_workers=2, in_order=False)
    ys = sorted(v for _, y in dl for v in y.tolist())
    assert ys == sorted(i * i for i in range(40))


def test_seeding_is_distinct_per_worker_and_reproducible():
    def run(seed):
        dl = D.DataLoader(Augmented(), batch_size=4, num_workers=2,
                          generator=fiamma.Generator().manual_seed(seed))
        return [row for b in dl for row in b.tolist()]

    a, b, c = run(5), run(5), run(6)
    assert a == b and a != c
    # batches 0, 2, 4 come from worker 0 and 1, 3, 5 from worker 1: their random streams differ
    w0 = [r[1:] for r in a[0:4]]
    w1 = [r[1:] for r in a[4:8]]
    assert all(x != y for x, y in zip(w0, w1))


def test_worker_info_and_init_fn():
    dl = D.DataLoader(WorkerIds(), batch_size=4, num_workers=2, worker_init_fn=record_init)
    rows = [r for b in dl for r in b.tolist()]
    assert sorted(r[0] for r in rows) == list(range(16))
    assert {r[1] for r in rows} == {0, 1} and {r[2] for r in rows} == {2}


def test_iterable_dataset_is_sharded_not_duplicated():
    dl = D.DataLoader(Stream(23), batch_size=4, num_workers=3)
    got = sorted(v for b in dl for v in b.tolist())
    assert got == list(range(23))
    dl = D.DataLoader(SelfSharding(11), batch_size=2, num_workers=2, auto_shard=False)
    assert sorted(v for b in dl for v in b.tolist()) == list(range(11))


def test_worker_exception_is_reraised_with_its_traceback():
    dl = D.DataLoader(Failing(), batch_size=4, num_workers=2)
    with pytest.raises(ValueError) as e:
        list(dl)
    msg = str(e.value)
    assert "Caught ValueError in DataLoader worker process" in msg
    assert "sample 13 is broken" in msg and "Traceback" in msg and "13" in msg


def test_killed_worker_is_reported_not_a_hang():
    dl = D.DataLoader(Suicidal(), batch_size=2, num_workers=2)
    with pytest.raises(RuntimeError, match="killed by signal: SIGKILL"):
        list(dl)


def test_timeout():
    dl = D.DataLoader(Slow(), batch_size=1, num_workers=1, timeout=0.5)
    with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
        next(iter(dl))


def test_early_break_and_deleting_the_loader_stop_the_workers():
    dl = D.DataLoader(Big(), batch_size=1, num_workers=2)
    it = iter(dl)
    next(it)
    workers = list(it._workers)
    del it
    gc.collect()
    for w in workers:
        w.join(timeout=10)
        assert not w.is_alive()
    it = iter(D.DataLoader(Big(), batch_size=2, num_workers=2))
    for _ in it:
        break
    workers = list(it._workers)
    it._shutdown()
    assert all(not w.is_alive() for w in workers)


def test_persistent_workers_serve_several_epochs():
    dl = D.DataLoader(Squares(12), batch_size=5, num_workers=2, persistent_workers=True)
    first = [y.tolist() for _, y in dl]
    pids = [w.pid for w in dl._iterator._workers]
    second = [y.tolist() for _, y in dl]
    assert first == second and [w.pid for w in dl._iterator._workers] == pids
    s = D.DataLoader(Stream(7), batch_size=3, num_workers=2, persistent_workers=True)
    assert sorted(v for b in s for v in b.tolist()) == list(range(7))
    assert sorted(v for b in s for v in b.tolist()) == list(range(7))
    dl._iterator._shutdown()
    s._iterator._shutdown()


def test_idle_workers_stay_alive():
    """Workers that wait longer than their 1 s poll (a slow training step, the pause between
    epochs of persistent workers) keep serving: under forkserver their parent process is the
    server, not the main process, and that must not read as the main process having died."""
    import time

    dl = D.DataLoader(Squares(12), batch_size=4, num_workers=2, persistent_workers=True)
    first = []
    for _, y in dl:
        first.append(y.tolist())
        time.sleep(1.3)  # longer than the workers' poll while they wait for indices
    time.sleep(1.3)
    assert [y.tolist() for _, y in dl] == first
    dl._iterator._shutdown()


def test_bad_context_name():
    with pytest.raises(ValueError, match="multiprocessing_context"):
        iter(D.DataLoader(Squares(), num_workers=1, multiprocessing_context="teleport"))


def test_batches_kept_by_the_user_stay_intact():
    """Slabs are reused only after their batch is gone: holding every batch of an epoch
    (more than the slab pool, so the fallback path runs too) must not corrupt any."""
    ref = [(x.tolist(), y.tolist()) for x, y in D.DataLoader(Squares(90), batch_size=1)]
    kept = list(D.DataLoader(Squares(90), batch_size=1, num_workers=2))
    assert [(x.tolist(), y.tolist()) for x, y in kept] == ref


def test_slabs_are_reused_when_batches_are_dropped():
    it = iter(D.DataLoader(Squares(200), batch_size=4, num_workers=2))
    for x, y in it:
        used = sum(len(t) for t in it._slabs.slabs)  # the pool (it is released at the end)
    assert 0 < used <= 8


def test_every_dtype_and_structure_survives_the_transport():
    from loader_datasets import Mixed

    ref = list(D.DataLoader(Mixed(), batch_size=3))
    got = list(D.DataLoader(Mixed(), batch_size=3, num_workers=2))
    for a, b in zip(ref, got):
        assert a["name"] == b["name"]
        for k in ("f", "b", "m", "s", "e"):
            assert a[k].dtype is b[k].dtype and a[k].shape == b[k].shape
            assert a[k].float().tolist() == b[k].float().tolist()


def test_script_without_main_guard_gets_a_hint(tmp_path):
    """A script that iterates a forkserver DataLoader at import time kills its workers (they
    re-import it); the error must say how to fix the script. (The default, fork, runs it.)"""
    import subprocess
    import sys

    script = tmp_path / "noguard.py"
    script.write_text("import fiamma\nfrom fiamma.data import DataLoader, TensorDataset\n"
                      "ds = TensorDataset(fiamma.randn(40, 3))\n"
                      "for b in DataLoader(ds, batch_size=10, num_workers=2,\n"
                      "                    multiprocessing_context='forkserver'):\n    pass\n")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    assert 'if __name__ == "__main__":' in proc.stderr.splitlines()[-1]


@pytest.mark.parametrize("ctx", ["forkserver", "fork"])
def test_dataset_tensors_reach_workers_through_shared_memory(ctx):
    """A dataset's tensors go to each forkserver worker as shared memory (not a pickled copy),
    every epoch, and the samples read from them are right; the main process's tensor keeps its
    values after being moved to shared memory. A forked worker reads the parent's memory as it
    was at the fork (copy-on-write), as in PyTorch."""
    from loader_datasets import Backed

    ds = Backed()
    loader = D.DataLoader(ds, batch_size=128, shuffle=True, num_workers=2,
                          multiprocessing_context=ctx)
    for _ in range(2):
        seen = []
        for x, shared, idx in loader:
            assert shared.all().item() == (ctx == "forkserver")
            assert x.tolist() == ds.array[idx.numpy()].astype("float32").tolist()
            seen += idx.tolist()
        assert sorted(seen) == list(range(len(ds)))
    assert ds.x.is_shared() == (ctx == "forkserver")
    assert ds.x.numpy().tolist() == ds.array.tolist()


def _run_script(tmp_path, args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=180)


_COUNTING_SCRIPT = """\
import os
import fiamma
from fiamma.data import DataLoader, Dataset

with open("imports.txt", "a") as f:       # who ran this module's top level
    f.write(f"{os.getpid()}\\n")


class Rows(Dataset):                       # defined in the main module: pickled by reference
    def __len__(self):
        return 40

    def __getitem__(self, i):
        return fiamma.full((2,), float(i))


if __name__ == "__main__":
    for epoch in range(3):
        got = sorted(v for b in DataLoader(Rows(), batch_size=4, num_workers=2,
                                           multiprocessing_context="forkserver")
                     for v in b[:, 0].tolist())
        assert got == [float(i) for i in range(40)], got
    print("ok")
"""


@pytest.mark.parametrize("how", ["path", "module"])
def test_main_module_is_imported_once_by_the_forkserver(tmp_path, how):
    """Forkserver workers start with the main module already imported (once, in the server),
    instead of re-importing it every epoch; a dataset class defined in it still works."""
    (tmp_path / "counting.py").write_text(_COUNTING_SCRIPT)
    args = ["counting.py"] if how == "path" else ["-m", "counting"]
    proc = _run_script(tmp_path, args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
    pids = (tmp_path / "imports.txt").read_text().split()
    assert len(pids) == 2, pids  # the main process and the forkserver, not 2 x 3 workers


def test_main_variable_is_ignored_outside_the_forkserver(tmp_path):
    """A process that inherits the forkserver's variable by chance must not run main."""
    import json
    import subprocess
    import sys

    from fiamma.data import _forkserver_main as fm

    (tmp_path / "victim.py").write_text("open('ran.txt', 'w').close()\n")
    spec = {"init_main_from_path": str(tmp_path / "victim.py"), "sys_path": sys.path,
            "parent": os.getpid()}
    env = dict(os.environ, **{fm._ENV: json.dumps(spec)})
    proc = subprocess.run([sys.executable, "-c", "import fiamma.data._forkserver_main as m; "
                           "import os; print(m.imported_main, m._ENV in os.environ)"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["False", "False"], proc.stderr
    assert not (tmp_path / "ran.txt").exists()


_TOP_LEVEL_SCRIPT = """\
import os
import random

import numpy as np

import fiamma
from fiamma.data import DataLoader, Dataset, get_worker_info

# OpenMP kernels run on several threads here first: libgomp's pool does not survive a fork, so
# forked workers must run them single-threaded (a worker that used the pool would hang)
fiamma.set_num_threads(2)
x = fiamma.randn(4, 16, 24, 24, generator=fiamma.Generator().manual_seed(1))
w = fiamma.randn(32, 16, 3, 3, generator=fiamma.Generator().manual_seed(2))
a = fiamma.randn(300, 300, generator=fiamma.Generator().manual_seed(3))
conv_ref = fiamma.conv2d(x, w, padding=1)
mm_ref = a @ a


class Work(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        conv_ok = fiamma.allclose(fiamma.conv2d(x, w, padding=1), conv_ref, atol=1e-4)
        mm_ok = fiamma.allclose(a @ a, mm_ref, atol=1e-3)
        return fiamma.tensor([float(i), float(get_worker_info().id), fiamma.rand(()).item(),
                              random.random(), float(np.random.rand()),
                              float(conv_ok and mm_ok), float(fiamma.get_num_threads())],
                             dtype=fiamma.float64)


# no `if __name__ == "__main__":` guard, as in many PyTorch scripts
rows = [r for b in DataLoader(Work(), batch_size=2, num_workers=2) for r in b.tolist()]
assert [r[0] for r in rows] == list(range(8)), rows
assert {r[1] for r in rows} == {0.0, 1.0}, rows
assert all(r[5] == 1.0 for r in rows), "a kernel gave a wrong result in a worker"
assert all(r[6] == 1.0 for r in rows), "workers run one thread each"
for k in (2, 3, 4):  # fiamma, random and NumPy draws: distinct across workers and samples
    assert len({r[k] for r in rows}) == 8, [r[k] for r in rows]
assert fiamma.allclose(fiamma.conv2d(x, w, padding=1), conv_ref, atol=1e-4)  # parent still fine
print("ok", os.getpid())
"""


def test_top_level_loader_without_main_guard_works(tmp_path):
    """A script that builds and iterates a worker DataLoader at module top level, with no main
    guard, runs (fork, as PyTorch on Linux): the workers are seeded apart, run fiamma's
    OpenMP kernels correctly after the parent ran them on several threads, and the process
    exits cleanly, leaving nothing behind."""
    if not sys.platform.startswith("linux"):
        pytest.skip("fork is the default start method on Linux only")
    (tmp_path / "toplevel.py").write_text(_TOP_LEVEL_SCRIPT)
    before = _shm()
    proc = _run_script(tmp_path, ["toplevel.py"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok"), proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    pid = proc.stdout.split()[1]
    assert not [n for n in _shm() - before if n.startswith(f"fiamma_mp_{pid}_")]


def test_start_method_chosen_by_the_program_is_used(tmp_path):
    """multiprocessing.set_start_method("spawn") makes the loader spawn its workers (as in
    PyTorch); without it, workers are forked on Linux."""
    if not sys.platform.startswith("linux"):
        pytest.skip("fork is the default start method on Linux only")
    script = tmp_path / "chosen.py"
    script.write_text(
        "import multiprocessing, sys\n"
        "import fiamma\n"
        "from fiamma.data import DataLoader, TensorDataset\n"
        "if __name__ == '__main__':\n"
        "    if sys.argv[1] != 'none':\n"
        "        multiprocessing.set_start_method(sys.argv[1])\n"
        "    it = iter(DataLoader(TensorDataset(fiamma.arange(8.0)), batch_size=4,\n"
        "                         num_workers=1))\n"
        "    print(it._start_method, len(list(it)))\n")
    got = [_run_script(tmp_path, ["chosen.py", m]) for m in ("spawn", "none")]
    assert [p.stdout.split() for p in got] == [["spawn", "2"], ["fork", "2"]], \
        [p.stderr for p in got]


def test_shutdown_drops_unreadable_batches_without_raising():
    """Issue 18, defect 4: shutdown drained the result queue by unpickling it, and a batch that
    could not be rebuilt (its worker had exited and taken its shared memory along) raised out
    of shutdown, replacing the worker's own error. Now nothing read while stopping can raise."""
    import multiprocessing

    from loader_datasets import Unrebuildable

    from fiamma.data import _workers as W

    res = W._Resources()
    res.result_queue = multiprocessing.get_context("fork").Queue()
    for i in range(3):
        res.result_queue.put((i, Unrebuildable()))
    time.sleep(0.2)  # let the feeder thread write them
    res.shutdown()
    assert res.done


def test_worker_error_wins_over_the_batches_in_flight():
    """A worker raises while batches that will never be read are in flight: the user gets the
    worker's ValueError with its traceback, with either sharing strategy."""
    from loader_datasets import FailingBig

    import fiamma.multiprocessing as fmp

    for strategy in ("file_system", "file_descriptor"):
        fmp.set_sharing_strategy(strategy)
        try:
            with pytest.raises(ValueError, match="sample 37 is broken") as e:
                list(D.DataLoader(FailingBig(), num_workers=2))
            assert "Traceback" in str(e.value)
        finally:
            fmp.set_sharing_strategy("file_descriptor")


def test_iterator_after_a_worker_error_is_exhausted():
    """After a worker's error the iterator is shut down: next() raises StopIteration (as a
    generator that raised), not an error about closed queues; a new iter() works."""
    dl = D.DataLoader(Failing(), batch_size=4, num_workers=2)
    it = iter(dl)
    with pytest.raises(ValueError):
        list(it)
    with pytest.raises(StopIteration):
        next(it)
    assert len(list(D.DataLoader(Squares(8), batch_size=4, num_workers=2))) == 2


def test_tensor_subclasses_keep_their_class_and_attributes():
    from loader_datasets import Labelled, Subclassed, first_sample

    for nw in (0, 2):
        got = list(D.DataLoader(Subclassed(), batch_size=1, num_workers=nw,
                                collate_fn=first_sample))
        assert [type(b["img"]) for b in got] == [Labelled] * 6
        assert [b["img"].meta["index"] for b in got] == list(range(6))
        assert got[4]["img"].meta["affine"].tolist() == (fiamma.eye(3) * 4).tolist()
        assert got[3]["img"].tolist() == [[3.0, 3.0]] * 2
        assert type(got[3]["plain"]) is fiamma.Tensor and not got[3]["plain"].__dict__
