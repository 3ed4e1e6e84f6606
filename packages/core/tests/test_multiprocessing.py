"""fiamma.multiprocessing: shared-memory tensors across processes, and their lifetime."""

import gc
import os
import signal
import subprocess
import sys
import textwrap

import mp_workers as W
import numpy as np
import pytest

import fiamma
import fiamma.multiprocessing as mp
from fiamma.multiprocessing import _shm

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="shared memory tests use /dev/shm and /proc (Linux)")

SPAWN = mp.get_context("spawn")
TIMEOUT = 60


def _foreign(name):
    """Whether a segment name was made by a live process outside this test's process tree
    (another test run on the same machine): its creator's pid follows the prefix."""
    try:
        pid = int(name[len(_shm.PREFIX):].lstrip("_").split("_")[0])
    except ValueError:
        return False
    me = os.getpid()
    while pid > 1:
        if pid == me:
            return False
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])  # the parent's pid
        except (OSError, ValueError, IndexError):
            return False  # gone: a child of this test that left its segment behind
    return True


def shm_names():
    return {n for n in os.listdir("/dev/shm") if n.startswith(_shm.PREFIX) and not _foreign(n)}


def memfds():
    """This process's open shared-memory descriptors (memfds and /dev/shm files)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/memfd:fiamma_shared") or _shm.PREFIX in target:
            out.add(fd)
    return out


@pytest.fixture
def no_leak():
    """Asserts that a test leaves neither names in /dev/shm nor shared descriptors behind."""
    gc.collect()
    names, fds = shm_names(), memfds()
    yield
    gc.collect()
    assert shm_names() - names == set()
    assert memfds() - fds == set()


@pytest.fixture(params=["file_descriptor", "file_system"])
def strategy(request):
    old = mp.get_sharing_strategy()
    mp.set_sharing_strategy(request.param)
    yield request.param
    mp.set_sharing_strategy(old)


def join(p):
    p.join(TIMEOUT)
    if p.is_alive():
        p.kill()
        p.join()
        pytest.fail("child process hung")


# ---- in one process ----------------------------------------------------------------------------
def test_api_reexported():
    for name in ("Process", "Queue", "Pool", "Pipe", "get_context", "set_start_method",
                 "get_start_method", "cpu_count", "Event"):
        assert hasattr(mp, name)
    assert mp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}
    with pytest.raises(ValueError, match="file_descriptor"):
        mp.set_sharing_strategy("bogus")


@pytest.mark.parametrize("n", [0, 1, 10, 3000, 700_000])  # 700k floats: in-place remap path
def test_share_memory_keeps_views(n, strategy, no_leak):
    t = fiamma.arange(n, dtype=fiamma.float32)
    ref = np.arange(n, dtype=np.float32)
    v = t[1::3]
    m = t.reshape(-1, 1) if n else t
    assert not t.is_shared() and not t.untyped_storage().is_shared()
    assert t.share_memory_() is t
    assert t.is_shared() and v.is_shared() and m.is_shared()
    assert t.untyped_storage() is v.untyped_storage()
    np.testing.assert_array_equal(t.numpy(), ref)
    np.testing.assert_array_equal(v.numpy(), ref[1::3])
    if n > 4:
        v[0] = -5.0  # writes through a view land in the shared storage
        m[4, 0] = -7.0
        assert t[1].item() == -5.0 and t[4].item() == -7.0
    assert t.share_memory_() is t  # idempotent
    del t, v, m


def test_large_storage_keeps_address(no_leak):
    gc.collect()
    before = fiamma.cpu_memory_stats()["allocated_bytes"]
    t = fiamma.ones(1 << 20)  # 4 MiB
    a = t.numpy()
    p = t.data_ptr()
    t.share_memory_()
    assert t.data_ptr() == p
    a[3] = 9.0  # a NumPy view taken before still aliases the tensor
    assert t[3].item() == 9.0
    del t, a
    gc.collect()  # the block went back to the allocator as private memory
    assert fiamma.cpu_memory_stats()["allocated_bytes"] == before
    u = fiamma.zeros(1 << 20)  # may reuse that block: it must not be shared any more
    assert not u.is_shared() and u.sum().item() == 0


def test_allocator_balance_small(no_leak):
    gc.collect()
    before = fiamma.cpu_memory_stats()["allocated_bytes"]
    t = fiamma.ones(10_000)
    v = t[5:]
    t.share_memory_()
    del t, v
    gc.collect()
    assert fiamma.cpu_memory_stats()["allocated_bytes"] == before


def test_small_storage_numpy_export_stays_valid(no_leak):
    t = fiamma.arange(8, dtype=fiamma.float64)
    a = t.numpy()
    t.share_memory_()
    assert a.tolist() == list(range(8))  # the old block is kept while the array lives
    t.add_(1)
    assert t.tolist() == list(range(1, 9))
    del t, a


def test_numpy_backed_tensor(no_leak):
    arr = np.arange(6, dtype=np.int16)
    t = fiamma.from_numpy(arr)
    t.share_memory_()
    assert t.is_shared() and t.tolist() == list(range(6))
    del t, arr


def test_grad_tensor_refused():
    t = fiamma.ones(3)
    try:
        t.requires_grad_(True)
    except Exception:
        pytest.skip("fiamma-autograd not installed")
    y = t * 2
    if y.grad_fn is None:
        pytest.skip("autograd did not record")
    q = SPAWN.SimpleQueue()
    with pytest.raises(RuntimeError, match="Cowardly"):
        q.put(y)


# ---- across processes --------------------------------------------------------------------------
def test_hogwild_two_spawned_workers(strategy, no_leak):
    w = fiamma.zeros(2, 16).share_memory_()
    ps = [SPAWN.Process(target=W.add_rows, args=(w, i, 50 + i)) for i in range(2)]
    for p in ps:
        p.start()
    for p in ps:
        join(p)
        assert p.exitcode == 0
    assert w[0].tolist() == [50.0] * 16 and w[1].tolist() == [51.0] * 16
    del w, ps


def test_inplace_both_ways(strategy, no_leak):
    t = fiamma.arange(6, dtype=fiamma.int64)  # not shared yet: moved to shared memory on send
    ready, parent_wrote, result = SPAWN.Event(), SPAWN.Event(), SPAWN.Queue()
    p = SPAWN.Process(target=W.double_then_check, args=(t, ready, parent_wrote, result))
    p.start()
    assert ready.wait(TIMEOUT)
    assert t.is_shared()
    assert t.tolist() == [0, 2, 4, 6, 8, 10]  # the child's write
    t[0] = 100
    parent_wrote.set()
    assert result.get(timeout=TIMEOUT) == [100, 2, 4, 6, 8, 10]  # the parent's write, seen there
    join(p)
    assert p.exitcode == 0
    del t, result


def _all_tensors():
    out = []
    for dt in (fiamma.bool, fiamma.uint8, fiamma.int8, fiamma.int16, fiamma.int32, fiamma.int64,
               fiamma.float16, fiamma.bfloat16, fiamma.float32, fiamma.float64):
        base = fiamma.arange(24).reshape(2, 3, 4).to(dt)
        out += [base, base.transpose(0, 2), base[:, 1, ::2], base[1, 2, 3], base[:0],
                fiamma.tensor(3).to(dt), fiamma.empty(0, 5, dtype=dt)]
    return out


def test_queue_round_trip_every_dtype(strategy, no_leak):
    qin, qout = SPAWN.Queue(), SPAWN.Queue()
    p = SPAWN.Process(target=W.echo, args=(qin, qout))
    p.start()
    sent = _all_tensors()
    for t in sent:
        qin.put(t)
    qin.put((sent[0], sent[1]))  # two views of one storage in one message
    big = fiamma.arange(1 << 20, dtype=fiamma.float32)  # 4 MiB: mapped where it was
    qin.put((big[::2], big.untyped_storage()))
    back = [qout.get(timeout=TIMEOUT) for _ in sent]
    pair = qout.get(timeout=TIMEOUT)
    big_back, storage_back = qout.get(timeout=TIMEOUT)
    qin.put(None)
    join(p)
    assert p.exitcode == 0
    for s, b in zip(sent, back):
        assert b.dtype == s.dtype and b.shape == s.shape and b.stride() == s.stride()
        assert b.is_shared()
        # the same memory came back: this process's own storage object, not a copy
        assert b.untyped_storage() is s.untyped_storage()
        assert b.to(fiamma.float64).tolist() == s.to(fiamma.float64).tolist()
    assert pair[0].untyped_storage() is pair[1].untyped_storage() is sent[0].untyped_storage()
    assert storage_back is big.untyped_storage() is big_back.untyped_storage()
    assert big_back.stride() == (2,) and big_back[-1].item() == (1 << 20) - 2
    del sent, back, pair, qin, qout, big, big_back, storage_back


def test_tensors_made_in_child(strategy, no_leak):
    q, done = SPAWN.Queue(), SPAWN.Event()
    p = SPAWN.Process(target=W.make_and_send, args=(q, strategy, done))
    p.start()
    t, row, tt = q.get(timeout=TIMEOUT)
    assert t.untyped_storage() is row.untyped_storage() is tt.untyped_storage()
    assert t.tolist() == np.arange(12).reshape(3, 4).tolist()
    assert tt.stride() == (1, 4) and row.tolist() == [4, 5, 6, 7]
    row.zero_()  # the child sees it: its sum drops by 22
    done.set()
    assert q.get(timeout=TIMEOUT) == 66 - 22
    join(p)
    del t, row, tt


def test_child_exception_no_leak(strategy, no_leak):
    q, ack = SPAWN.Queue(), SPAWN.Event()
    t = fiamma.zeros(5)
    p = SPAWN.Process(target=W.receive_then_raise, args=(q, ack))
    p.start()
    q.put(t)
    assert ack.wait(TIMEOUT)
    join(p)
    assert p.exitcode == 1
    assert t.tolist() == [1.0] * 5
    del t, q


def test_sigkill_child_no_leak(strategy, no_leak):
    q, ack = SPAWN.Queue(), SPAWN.Queue()
    t = fiamma.zeros(5)
    p = SPAWN.Process(target=W.receive_then_hang, args=(q, ack))
    p.start()
    q.put(t)
    assert ack.get(timeout=TIMEOUT) == 1000.0
    os.kill(p.pid, signal.SIGKILL)
    join(p)
    assert p.exitcode == -signal.SIGKILL
    assert t.tolist() == [1.0] * 5
    del t, q


def test_forkserver_and_pool(no_leak):
    ctx = mp.get_context("forkserver")
    w = fiamma.zeros(3, 4).share_memory_()
    with ctx.Pool(2) as pool:
        pool.starmap(W.add_rows, [(w, 0, 3), (w, 2, 5)])
    assert w.sum(1).tolist() == [12.0, 0.0, 20.0]
    del w


def test_fork_shares_shared_tensors(no_leak):
    ctx = mp.get_context("fork")
    w = fiamma.zeros(2, 3).share_memory_()
    p = ctx.Process(target=W.add_rows, args=(w, 1, 4))
    p.start()
    join(p)
    assert p.exitcode == 0 and w[1].tolist() == [4.0] * 3
    del w


def test_killed_creator_swept_at_exit(tmp_path):
    """A child that created a named segment nobody else mapped is SIGKILLed: the parent's exit
    sweep removes the name (file_system; file_descriptor never has names)."""
    before = shm_names()
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import fiamma.multiprocessing as mp
        import mp_workers as W
        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            mp.set_sharing_strategy("file_system")
            q = ctx.Queue()
            p = ctx.Process(target=W.create_and_hang, args=(q, "file_system"))
            p.start()
            pid = q.get(timeout=60)
            names = [n for n in os.listdir("/dev/shm") if n.startswith("fiamma_mp_%d_" % pid)]
            assert len(names) == 1, names
            os.kill(pid, signal.SIGKILL)
            p.join()
            print("ok")
    """)
    f = tmp_path / "parent.py"
    f.write_text(script)
    r = subprocess.run([sys.executable, str(f)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
    assert shm_names() - before == set()


# ---- random state across processes -------------------------------------------------------------
def test_forked_child_continues_parent_stream():
    """As in PyTorch, fork does not reseed: a forked child draws what the parent draws next
    (reseed workers yourself). The generator lock is replaced in the child, so a fork taken
    while another thread held it does not deadlock."""
    import fiamma._random as R

    ctx = mp.get_context("fork")
    fiamma.manual_seed(1234)
    fiamma.rand(3)
    q = ctx.SimpleQueue()
    R._lock.acquire()  # as if another thread were drawing at the moment of the fork
    try:
        p = ctx.Process(target=W.draw, args=(q, 5))
        p.start()
    finally:
        R._lock.release()
    join(p)
    assert p.exitcode == 0
    seed, child = q.get()
    assert seed == 1234
    assert child == fiamma.rand(5).tolist()


def test_spawned_child_default_seed_and_state_transfer():
    q = SPAWN.SimpleQueue()
    p = SPAWN.Process(target=W.draw, args=(q, 2))
    p.start()
    seed, _ = q.get()
    join(p)
    assert seed == 67280421310721  # a fresh process starts from PyTorch's default seed
    fiamma.manual_seed(99)
    fiamma.randn(7)
    state = fiamma.get_rng_state()
    p = SPAWN.Process(target=W.draw_from_state, args=(state, q, 6))
    p.start()
    child = q.get()
    join(p)
    assert child == fiamma.rand(6).tolist()  # the state restores the stream in another process
    g = fiamma.Generator()
    s = g.seed()
    assert g.initial_seed() == s and 0 <= s < 2 ** 64


def test_tensor_subclasses_are_shared(no_leak):
    assert "Late" not in vars(W)  # created below, after the reducers were registered
    qin, qout = SPAWN.Queue(), SPAWN.Queue()
    p = SPAWN.Process(target=W.echo, args=(qin, qout))
    p.start()
    a = fiamma.ones(3)._as_subclass(W.Param)
    b = fiamma.zeros(2)._as_subclass(W.Late)
    qin.put((a, b))
    a2, b2 = qout.get(timeout=TIMEOUT)
    qin.put(None)
    join(p)
    assert type(a2) is W.Param and type(b2) is W.Late
    assert a.is_shared() and b.is_shared()
    assert a2.untyped_storage() is a.untyped_storage()
    assert b2.untyped_storage() is b.untyped_storage()
    del a, b, a2, b2


def test_pool_results_and_pipe(no_leak):
    with SPAWN.Pool(1) as pool:
        out = pool.map(W.make_full, range(4))
    assert [t.tolist() for t in out] == [[float(i)] * 3 for i in range(4)]
    assert all(t.is_shared() for t in out)
    a, b = SPAWN.Pipe()
    t = fiamma.arange(4, dtype=fiamma.int32)
    p = SPAWN.Process(target=W.pipe_double, args=(b,))
    p.start()
    a.send(t)
    tail = a.recv()
    join(p)
    assert t.tolist() == [0, 2, 4, 6] and tail.untyped_storage() is t.untyped_storage()
    a.close()
    b.close()
    del out, t, tail


# ---- named segments at exit and across fork (issue 18) ------------------------------------------
_LIFETIME_SCRIPT = """
import os, sys, time
import multiprocessing
import fiamma
import fiamma.multiprocessing as mp

mp.set_sharing_strategy("file_system")
case = sys.argv[1]
t = fiamma.arange(6.0).share_memory_()   # a named segment this process maps
name = [n for n in os.listdir("/dev/shm") if n.startswith("fiamma_mp_%d_" % os.getpid())][0]
print(name, flush=True)


def child(conn):
    conn.send(t.tolist())                 # the inherited mapping works in the child
    conn.recv()                           # wait until the parent has let go


if case == "alive_at_exit":
    pass                                  # t is still alive when the interpreter exits
elif case == "fork_then_parent_lets_go":
    a, b = multiprocessing.Pipe()
    p = multiprocessing.get_context("fork").Process(target=child, args=(b,))
    p.start()
    assert a.recv() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    del t                                 # the parent lets go while the child still maps it
    import gc; gc.collect()
    assert os.path.exists("/dev/shm/" + name)   # the child holds it: not unlinked under it
    a.send("done")
    p.join()
    time.sleep(0.2)
    # the child was the last holder: it unlinked the name when it exited
    assert not os.path.exists("/dev/shm/" + name), "left by the child"
print("ok", flush=True)
"""


@pytest.mark.parametrize("case", ["alive_at_exit", "fork_then_parent_lets_go"])
def test_named_segment_lifetime_at_exit_and_across_fork(tmp_path, case):
    """file_system: a name this process still maps at exit is unlinked (the exit hook unlocks
    first: a mapping keeps the file description, and so its lock, alive); a forked child is a
    holder of its own (not a sharer of the parent's lock), so whoever lets go last unlinks."""
    f = tmp_path / "lifetime.py"
    f.write_text(_LIFETIME_SCRIPT)
    r = subprocess.run([sys.executable, str(f), case], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.split()[-1] == "ok", r.stderr
    name = r.stdout.split()[0]
    assert not os.path.exists("/dev/shm/" + name)
