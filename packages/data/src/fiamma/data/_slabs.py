"""Batches from workers through reusable shared-memory slabs.

Sending each batch's tensors through ``fiamma.multiprocessing`` costs one shared file and one
descriptor hand-over (an authenticated connection to the sender) per tensor, per batch: more
than computing a small batch. Instead each worker keeps a pool of shared slabs. It copies a
batch's tensors into a free slab and sends only (slab, offsets, dtypes, shapes); a slab travels
as a shared tensor once, the first time it is used. In the main process the batch's tensors are
views of one region of the slab; when the last of them (and of any view of them) dies, a
release object flips the slab's flag in a small shared array back to free, and the worker may
reuse it. A worker that finds no free slab makes a new one (up to MAX_SLABS), then falls back
to sending tensors the ordinary way.
"""

import numpy as np

import fiamma

MAX_SLABS = 32
_ALIGN = 64
_MIN_SLAB = 1 << 20


def new_flags():
    """The shared array of slab states a worker and the main process use (0 free, 1 busy)."""
    return fiamma.zeros(MAX_SLABS, dtype=fiamma.int32).share_memory_()


class _Ref:
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i


def _map(obj, leaf, fn):
    """``obj`` with every ``leaf(x)`` element replaced by ``fn(x)``, through dicts, named
    tuples, tuples and lists (other objects are left as they are)."""
    if leaf(obj):
        return fn(obj)
    if isinstance(obj, dict):
        items = ((k, _map(v, leaf, fn)) for k, v in obj.items())
        return dict(items) if type(obj) is dict else type(obj)(items)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_map(v, leaf, fn) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(v, leaf, fn) for v in obj)
    return obj


def _strip(obj, out):
    """``obj`` with its tensors replaced by _Ref placeholders (appended to ``out``)."""
    def take(t):
        if t.requires_grad or t.device.type != "cpu":
            raise _Unpackable
        out.append(t)
        return _Ref(len(out) - 1)

    return _map(obj, lambda x: isinstance(x, fiamma.Tensor), take)


def _fill(obj, tensors):
    return _map(obj, lambda x: isinstance(x, _Ref), lambda r: tensors[r.i])


class _Unpackable(Exception):
    pass


class Packed:
    """What a worker sends instead of a batch: the slab, where each tensor lies in it, and the
    batch's structure with placeholders."""

    __slots__ = ("worker", "slab_id", "slab", "layout", "structure")

    def __init__(self, worker, slab_id, slab, layout, structure):
        self.worker, self.slab_id, self.slab = worker, slab_id, slab
        self.layout, self.structure = layout, structure


class WorkerSlabs:
    """The worker's side: a pool of slabs and the shared flags."""

    def __init__(self, worker_id, flags):
        self.worker_id = worker_id
        self.flags = flags.numpy()  # a NumPy view: a flag flips without a C call (GIL kept)
        self.slabs = []

    def pack(self, batch):
        """A Packed for ``batch``, or None when it has no tensors or cannot use a slab."""
        tensors = []
        try:
            structure = _strip(batch, tensors)
        except _Unpackable:
            return None
        if not tensors:
            return None
        layout, total = [], 0
        for t in tensors:
            total = -(-total // _ALIGN) * _ALIGN
            nbytes = t.numel() * t.element_size()
            layout.append((total, nbytes, t.dtype, tuple(t.shape)))
            total += nbytes
        slab_id, new = self._slab_for(total)
        if slab_id is None:
            return None
        slab = self.slabs[slab_id]
        for (off, nbytes, dt, shape), t in zip(layout, tensors):
            if nbytes:
                slab[off:off + nbytes].view(dt).view(shape).copy_(t)
        self.flags[slab_id] = 1
        # a tensor subclass (MONAI's MetaTensor) comes back as its class, with its attributes
        extras = [None if type(t) is fiamma.Tensor and not t.__dict__ else
                  (type(t), dict(t.__dict__)) for t in tensors]
        return Packed(self.worker_id, slab_id, slab if new else None,
                      [(off, nbytes, dt.name, shape, extra)
                       for (off, nbytes, dt, shape), extra in zip(layout, extras)],
                      structure)

    def _slab_for(self, nbytes):
        free = self.flags.tolist()
        best = None
        for i, s in enumerate(self.slabs):
            if not free[i] and s.numel() >= nbytes and (best is None or
                                                       s.numel() < self.slabs[best].numel()):
                best = i
        if best is not None:
            return best, False
        if len(self.slabs) >= MAX_SLABS:
            return None, False
        size = max(_MIN_SLAB, -(-nbytes // _MIN_SLAB) * _MIN_SLAB)
        self.slabs.append(fiamma.empty(size, dtype=fiamma.uint8).share_memory_())
        return len(self.slabs) - 1, True


class _Release:
    """Marks a slab free when the last tensor of its batch is gone."""

    __slots__ = ("flags", "slab_id")

    def __init__(self, flags, slab_id):
        self.flags, self.slab_id = flags, slab_id

    def __del__(self):
        try:
            self.flags[self.slab_id] = 0
        except Exception:  # interpreter shutdown: nothing left to tell
            pass


class _Region:
    """The slab's memory as seen by NumPy, carrying the release object with it."""

    def __init__(self, slab, release):
        self._slab, self._release = slab, release
        self.__array_interface__ = {"data": (slab.data_ptr(), False),
                                    "shape": (slab.numel(),), "typestr": "|u1", "version": 3}


class MainSlabs:
    """The main process's side: the slabs of every worker and their flags."""

    def __init__(self, flags):
        self.flags = [f.numpy() for f in flags]  # one shared flags tensor per worker (views)
        self.slabs = [dict() for _ in flags]

    def close(self):
        """Forget every slab and flag (the iterator is shut down): their shared memory goes
        as soon as no batch the user still holds refers to it."""
        self.flags = []
        self.slabs = []

    def discard(self, packed):
        """A batch nobody will read: keep its slab registered and mark it free again."""
        if packed.slab is not None:
            self.slabs[packed.worker][packed.slab_id] = packed.slab
        self.flags[packed.worker][packed.slab_id] = 0

    def unpack(self, packed):
        table = self.slabs[packed.worker]
        if packed.slab is not None:
            table[packed.slab_id] = packed.slab
        slab = table[packed.slab_id]
        region = np.asarray(_Region(slab, _Release(self.flags[packed.worker], packed.slab_id)))
        base = fiamma.from_numpy(region)
        tensors = []
        for off, nbytes, dtname, shape, extra in packed.layout:
            dt = getattr(fiamma, dtname)
            t = base[off:off + nbytes].view(dt).view(shape)
            if extra is not None:
                cls, state = extra
                if cls is not fiamma.Tensor:
                    t = t.as_subclass(cls)
                t.__dict__.update(state)
            tensors.append(t)
        return _fill(packed.structure, tensors)
