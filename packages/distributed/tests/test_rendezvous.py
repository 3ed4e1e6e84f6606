"""Stores, and worlds formed through a store rendezvous (init_method tcp:// / file://, store=,
env:// with MASTER_ADDR) by ranks started as plain processes (no mpiexec around them), each
bounded by a timeout. tests/workers/rendezvous.py holds the ranks' checks."""

import datetime
import os
import socket
import subprocess
import sys
import time

import pytest
from _launch import WORKERS, env, mpiexec

import fiamma.distributed as dist
from fiamma.distributed import _shm_sweep

SHORT = datetime.timedelta(seconds=0.3)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ranks(mode, n, address=None, prefix=(), ranks=None, limit=90, sweep=True):
    """Start ranks as separate processes; returns [(exit code, output)] per rank. ``sweep``:
    remove the shared-memory segments the ranks left (False: leave that to fiamma)."""
    address = address or f"127.0.0.1:{free_port()}"
    before = _shm_sweep.segments()
    procs = [subprocess.Popen([*prefix, sys.executable, str(WORKERS / "rendezvous.py"), mode,
                               str(r), str(n), address], env=env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for r in (range(n) if ranks is None else ranks)]
    out = []
    deadline = time.monotonic() + limit
    try:
        for p in procs:
            try:
                text, _ = p.communicate(timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:
                p.kill()
                text, _ = p.communicate()
            out.append((p.returncode, text))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if sweep:
            _shm_sweep.remove_orphans(before)
    return out


def show(results):
    return "\n".join(f"--- rank {r}: exit {code}\n{text}" for r, (code, text) in
                     enumerate(results))


def assert_ok(results):
    for r, (code, text) in enumerate(results):
        assert code == 0 and f"OK rank {r}" in text, show(results)


# ---- stores -------------------------------------------------------------------------------

def exercise(store):
    store.set("a", "1")
    assert store.get("a") == b"1"
    assert store.add("a", 4) == 5 and store.add("fresh", -2) == -2
    store.set("b", b"\x00\xff")
    assert store.get("b") == b"\x00\xff"
    assert store.check(["a", "b"]) and not store.check(["a", "nope"])
    assert store.compare_set("b", "wrong", "x") == b"\x00\xff"
    assert store.compare_set("b", b"\x00\xff", "x") == b"x"
    assert store.compare_set("new", "", "made") == b"made"
    store.append("log", "ab")
    store.append("log", "cd")
    assert store.get("log") == b"abcd"
    store.multi_set(["m1", "m2"], ["1", "2"])
    assert store.multi_get(["m1", "m2"]) == [b"1", b"2"]
    assert store.delete_key("m1") and not store.delete_key("m1")
    assert store.num_keys() == 6  # a fresh b new log m2
    with pytest.raises(dist.DistStoreError, match=r"wait: timed out after .* \['never'\]"):
        store.wait(["a", "never"], SHORT)
    store.set_timeout(SHORT)
    with pytest.raises(dist.DistStoreError, match="never"):
        store.get("never")
    with pytest.raises(dist.DistStoreError, match="not an integer"):
        store.add("log", 1)
    with pytest.raises(TypeError, match="key must be a str"):
        store.set(1, "x")
    with pytest.raises(TypeError, match="value must be str or bytes"):
        store.set("k", 3)


def test_hash_store():
    exercise(dist.HashStore())


def test_file_store(tmp_path):
    exercise(dist.FileStore(str(tmp_path / "store"), 1))
    other = dist.FileStore(str(tmp_path / "store"))  # a second opener sees the same keys
    assert other.get("log") == b"abcd"


def test_tcp_store_master_and_client():
    master = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False)
    try:
        client = dist.TCPStore("127.0.0.1", master.port, 2)
        exercise(client)
        assert master.get("log") == b"abcd" and master.port > 0
    finally:
        master.close()
    with pytest.raises(dist.DistStoreError, match="lost the connection"):
        client.get("a")


def test_prefix_store():
    base = dist.HashStore()
    exercise(dist.PrefixStore("job", base))
    assert base.get("job/log") == b"abcd" and not base.check(["log"])


def test_tcp_store_connect_timeout():
    with pytest.raises(dist.DistStoreError, match="could not connect"):
        dist.TCPStore("127.0.0.1", free_port(), timeout=SHORT)


# ---- worlds from a rendezvous ---------------------------------------------------------------

def test_tcp_three_plain_processes():
    assert_ok(start_ranks("tcp", 3))


def test_file_init_removes_its_file(tmp_path):
    path = tmp_path / "rendezvous"
    assert_ok(start_ranks("file", 2, address=str(path)))
    assert not path.exists()


@pytest.mark.parametrize("mode", ["env", "store"])
def test_env_master_addr_and_store_argument(mode):
    assert_ok(start_ranks(mode, 2))


def test_each_rank_its_own_mpiexec():
    # every rank an MPI world of one under a process manager: joined through MPI ports
    assert_ok(start_ranks("mpiexec-each", 3, prefix=(mpiexec(), "-n", "1")))


def test_mpich_singleton_is_refused_on_every_rank():
    results = start_ranks("early-mpi", 2)
    for code, text in results:
        assert code != 0, show(results)
    assert "pmodels/mpich#7805" in results[0][1] and "mpiexec -n 1" in results[0][1], \
        show(results)
    assert "pmodels/mpich#7805" in results[1][1], show(results)


def test_ranks_started_differently_are_told_so():
    results = start_ranks("mixed", 2)
    for code, text in results:
        assert code != 0 and "the ranks disagree on how to form the MPI world: ranks [0]" in \
            text, show(results)


def test_missing_rank_times_out_naming_it():
    t0 = time.monotonic()
    (code, text), = start_ranks("die", 2, ranks=[0], limit=60)
    assert code != 0 and "timed out during the rendezvous" in text, text
    assert "fiamma/rendezvous/rank1" in text, text
    assert time.monotonic() - t0 < 30


def test_rank_that_dies_after_init():
    results = start_ranks("die", 2, limit=60)
    code, text = results[0]
    assert code != 0 and "rank 0 timed out" in text and "all_reduce #" in text, show(results)
    assert results[1][0] == 3, show(results)


def test_two_worlds_at_once_on_one_machine():
    # each world's process manager names its key-value space (and so MPICH's node segment)
    # itself: with one fixed name, concurrent worlds shared a segment and MPI_Init failed
    import threading
    results = {}
    threads = [threading.Thread(target=lambda k=k: results.__setitem__(k, start_ranks("tcp", 2)))
               for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(2):
        assert_ok(results[k])


def test_world_with_a_dead_rank_leaves_no_segment():
    before = _shm_sweep.segments()
    results = start_ranks("die", 2, limit=60, sweep=False)
    assert results[1][0] == 3, show(results)
    deadline = time.monotonic() + 20  # the process manager sweeps when it exits
    while _shm_sweep.segments() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _shm_sweep.segments() - before
    _shm_sweep.remove_orphans(before)
    assert not left, left


def test_init_method_errors():
    with pytest.raises(ValueError, match="needs rank= and world_size="):
        dist.init_process_group(init_method="tcp://127.0.0.1:1")
    with pytest.raises(ValueError, match="rank 2 is not in"):
        dist.init_process_group(init_method="tcp://127.0.0.1:1", rank=2, world_size=2)
    with pytest.raises(ValueError, match="must be tcp://host:port"):
        dist.init_process_group(init_method="tcp://nohost", rank=0, world_size=1)
    with pytest.raises(ValueError, match="expected env://, tcp://host:port or file"):
        dist.init_process_group(init_method="udp://x:1", rank=0, world_size=1)
    with pytest.raises(ValueError, match="mutually exclusive"):
        dist.init_process_group(init_method="env://", store=dist.HashStore())
    with pytest.raises(ValueError, match="store= needs rank= and world_size="):
        dist.init_process_group(store=dist.HashStore())
    assert not dist.is_initialized()


def test_world_of_one_through_a_store():
    # a world of one through a store forms without a process manager (this process's MPI
    # may already be up: then MPI_COMM_WORLD is the world)
    dist.init_process_group(store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert dist.get_world_size() == 1
    finally:
        dist.destroy_process_group()
    assert not os.environ.get("PMI_FD")
