"""Child-process targets for test_multiprocessing.py (a small module, so that spawned children
import little: only fiamma and this file)."""

import os
import signal
import time

import fiamma


def add_rows(w, row, times):
    """Hogwild-style: add 1 to row ``row`` of the shared ``w``, ``times`` times, in place."""
    r = w[row]
    for _ in range(times):
        r.add_(1.0)


def double_then_check(t, ready, parent_wrote, result):
    """Double ``t`` in place, then wait for the parent's write and report what is seen."""
    t.mul_(2)
    ready.set()
    parent_wrote.wait(30)
    result.put(t.tolist())


def echo(qin, qout):
    """Send back everything received until None."""
    while True:
        item = qin.get()
        if item is None:
            break
        qout.put(item)


def make_and_send(q, strategy, done):
    """Create tensors in the child (shared with ``strategy``) and send them to the parent."""
    import fiamma.multiprocessing as mp

    mp.set_sharing_strategy(strategy)
    t = fiamma.arange(12, dtype=fiamma.float32).reshape(3, 4)
    q.put((t, t[1], t.t()))
    done.wait(30)
    # the parent's in-place write is visible here
    q.put(t.sum().item())


def receive_then_raise(q, ack):
    t = q.get()
    t.add_(1)
    ack.set()
    raise RuntimeError("child failed on purpose")


def receive_then_hang(q, ack):
    t = q.get()
    t.add_(1)
    u = fiamma.ones(1000, dtype=fiamma.float64).share_memory_()  # a segment only the child has
    ack.put(u.sum().item())
    while True:
        time.sleep(1)


def create_and_hang(q, strategy):
    """Create a shared tensor nobody else maps, say so, then wait to be killed."""
    import fiamma.multiprocessing as mp

    mp.set_sharing_strategy(strategy)
    u = fiamma.ones(100).share_memory_()
    q.put(os.getpid())
    while u.sum().item() > 0:
        time.sleep(1)


def kill_self():
    os.kill(os.getpid(), signal.SIGKILL)


def draw(q, n):
    """Report the default generator's seed and the next ``n`` uniform draws."""
    q.put((fiamma.initial_seed(), fiamma.rand(n).tolist()))


def draw_from_state(state, q, n):
    fiamma.set_rng_state(state)
    q.put(fiamma.rand(n).tolist())


class Param(fiamma.Tensor):
    """A Tensor subclass defined before fiamma.multiprocessing is imported."""


def __getattr__(name):
    # a subclass created only on first use (after fiamma.multiprocessing registered its
    # reducers): it registers itself through Tensor.__init_subclass__
    if name == "Late":
        class Late(fiamma.Tensor):
            pass

        Late.__module__, Late.__qualname__ = __name__, "Late"
        globals()["Late"] = Late
        return Late
    raise AttributeError(name)


def make_full(i):
    return fiamma.full((3,), float(i))


def pipe_double(conn):
    t = conn.recv()
    t.mul_(2)
    conn.send(t[1:])
    conn.close()


def spawn_fill(i, out, value):
    """mp.spawn target: write ``value + i`` into slot ``i`` of the shared ``out``."""
    out[i] = value + i


def spawn_fail_one(i, failing, mode):
    """mp.spawn target: process ``failing`` fails (``mode``: raise, exit, kill); the others
    wait to be stopped."""
    if i == failing:
        if mode == "raise":
            raise ValueError(f"boom in process {i}")
        if mode == "exit":
            os._exit(3)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(120)


def spawn_sleep(i, seconds):
    time.sleep(seconds)
