"""State shared by ``forward_ad`` and ``Function.apply``: the active dual level (global, as in
PyTorch) and whether this thread is computing a tangent (the double-vjp passes, during which
the nodes that stand for a tangent of their own pass no gradient to their primal side)."""

import threading

level = None  # the active forward_ad level (None: none entered)


class _Local(threading.local):
    tangent_pass = 0


local = _Local()


def in_tangent_pass():
    return local.tangent_pass > 0


class tangent_pass:
    def __enter__(self):
        local.tangent_pass += 1

    def __exit__(self, *exc):
        local.tangent_pass -= 1
