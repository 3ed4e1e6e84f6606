"""The ``*_object`` collectives: picklable Python objects, sent as uint8 tensors over the tensor
collectives (so they have the same timeouts and checks). As in PyTorch, unpickling runs code
from the sender: use them only between trusted processes."""

from __future__ import annotations

import pickle

import numpy as np

import fiamma
from fiamma.distributed._collectives import all_gather_into_tensor, broadcast
from fiamma.distributed._p2p import recv, send
from fiamma.distributed._state import resolve


def _to_tensor(obj):
    data = pickle.dumps(obj)
    return fiamma.from_numpy(np.frombuffer(data, dtype=np.uint8).copy())


def _from_tensor(t, n):
    return pickle.loads(t[:n].numpy().tobytes())


def all_gather_object(object_list, obj, group=None):
    """``object_list[r]`` becomes rank r's ``obj`` (``object_list`` holds world_size items)."""
    g = resolve(group, "all_gather_object")
    if g is None:
        return
    if len(object_list) != g.size():
        raise ValueError(f"all_gather_object: object_list must hold {g.size()} items (the "
                         f"group's size), got {len(object_list)}")
    data = _to_tensor(obj)
    sizes = fiamma.zeros(g.size(), dtype=fiamma.int64)
    all_gather_into_tensor(sizes, fiamma.tensor([data.numel()], dtype=fiamma.int64), group)
    longest = int(sizes.max().item())
    padded = fiamma.zeros(longest, dtype=fiamma.uint8)
    padded[:data.numel()] = data
    out = fiamma.empty(g.size() * longest, dtype=fiamma.uint8)
    all_gather_into_tensor(out, padded, group)
    for r in range(g.size()):
        object_list[r] = _from_tensor(out[r * longest:(r + 1) * longest], int(sizes[r].item()))


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    """Rank ``dst``'s ``object_gather_list[r]`` becomes rank r's ``obj``."""
    g = resolve(group, "gather_object")
    if g is None:
        return
    mine = g.rank() == g._group_rank(dst, "gather_object", "dst")
    if mine and (object_gather_list is None or len(object_gather_list) != g.size()):
        raise ValueError(f"gather_object: on rank dst, object_gather_list must hold {g.size()} "
                         "items")
    everything = [None] * g.size()
    all_gather_object(everything, obj, group)
    if mine:
        object_gather_list[:] = everything


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Every rank's ``object_list`` becomes (in place) rank ``src``'s."""
    g = resolve(group, "broadcast_object_list")
    if g is None:
        return
    from fiamma.distributed._collectives import _root

    root = _root(g, "broadcast_object_list", src, group_src, "src")
    size = fiamma.zeros(1, dtype=fiamma.int64)
    if g.rank() == root:
        data = _to_tensor(list(object_list))
        size[0] = data.numel()
    broadcast(size, group=group, group_src=root)
    if g.rank() != root:
        data = fiamma.empty(int(size.item()), dtype=fiamma.uint8)
    broadcast(data, group=group, group_src=root)
    if g.rank() != root:
        got = _from_tensor(data, int(size.item()))
        if len(got) != len(object_list):
            raise ValueError(f"broadcast_object_list: rank {g._ranks[root]} sent {len(got)} "
                             f"objects, this rank's object_list holds {len(object_list)}")
        object_list[:] = got


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=0,
                        group=None):
    """``scatter_object_output_list[0]`` of rank r becomes rank ``src``'s
    ``scatter_object_input_list[r]``."""
    g = resolve(group, "scatter_object_list")
    if g is None:
        return
    root = g._group_rank(src, "scatter_object_list", "src")
    if g.rank() == root and (scatter_object_input_list is None
                             or len(scatter_object_input_list) != g.size()):
        raise ValueError(f"scatter_object_list: on rank src, scatter_object_input_list must "
                         f"hold {g.size()} items")
    if len(scatter_object_output_list) < 1:
        raise ValueError("scatter_object_list: scatter_object_output_list must hold at least "
                         "one item")
    items = list(scatter_object_input_list) if g.rank() == root else [None] * g.size()
    broadcast_object_list(items, src=src, group=group)
    scatter_object_output_list[0] = items[g.rank()]


def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None):
    """Send the objects of ``object_list`` to rank ``dst``."""
    data = _to_tensor(list(object_list))
    send(fiamma.tensor([data.numel()], dtype=fiamma.int64), dst, group, group_dst=group_dst)
    send(data, dst, group, group_dst=group_dst)


def recv_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Fill ``object_list`` (in place) with the objects a rank sent; returns the sender's rank."""
    size = fiamma.zeros(1, dtype=fiamma.int64)
    who = recv(size, src, group, group_src=group_src)
    data = fiamma.empty(int(size.item()), dtype=fiamma.uint8)
    recv(data, who, group)
    got = _from_tensor(data, int(size.item()))
    if len(got) != len(object_list):
        raise ValueError(f"recv_object_list: rank {who} sent {len(got)} objects, object_list "
                         f"holds {len(object_list)}")
    object_list[:] = got
    return who
