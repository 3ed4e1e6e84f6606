"""A stand-in for ``cupy.cuda.nccl`` (CuPy's NCCL binding, same names and signatures) that
runs each call at once over MPI on host memory, for the stand-in CuPy of core's tests
(packages/core/tests/_fake_cupy.py), whose "device" memory is host memory. It lets the CPU run
the NCCL backend's own plumbing: unique id exchange, pointers and counts, datatypes and ops,
streams and events, groupStart/groupEnd of sends and receives, DDP's buckets. A GPU run
(benchmarks/gpu/nccl_check.py) checks the real thing."""

import ctypes
import types

import numpy as np

NP = {0: np.int8, 1: np.uint8, 2: np.int32, 3: np.uint32, 4: np.int64, 5: np.uint64,
      6: np.float16, 7: np.float32, 8: np.float64, 9: np.uint16}


def make(calls):
    from mpi4py import MPI

    from fiamma.distributed import _mpi

    nccl = types.ModuleType("fake_nccl")
    nccl.available = True
    names = ["NCCL_INT8", "NCCL_UINT8", "NCCL_INT32", "NCCL_UINT32", "NCCL_INT64",
             "NCCL_UINT64", "NCCL_FLOAT16", "NCCL_FLOAT32", "NCCL_FLOAT64", "NCCL_BFLOAT16"]
    for i, n in enumerate(names):
        setattr(nccl, n, i)
    for i, n in enumerate(["NCCL_SUM", "NCCL_PROD", "NCCL_MAX", "NCCL_MIN", "NCCL_AVG"]):
        setattr(nccl, n, i)
    group = []

    def view(ptr, count, dt):
        t = NP[dt]
        nbytes = count * np.dtype(t).itemsize
        if nbytes == 0:
            return np.empty(0, t)
        return np.frombuffer((ctypes.c_char * nbytes).from_address(ptr), t)

    def reduce_all(rows, dt, op):
        if dt == 9:  # bfloat16 bits
            import fiamma

            x = _mpi.to_float32(rows, fiamma.bfloat16)
        else:
            x = rows
        out = {0: np.sum, 1: np.prod, 2: np.max, 3: np.min, 4: np.sum}[op](x, axis=0)
        if op == 4:
            out = out / rows.shape[0]
        if dt == 9:
            res = np.empty(out.shape, np.uint16)
            _mpi.from_float32(out.astype(np.float32), fiamma.bfloat16, res)
            return res
        return out.astype(rows.dtype)

    class NcclCommunicator:
        def __init__(self, ndev, commId, rank):
            # CuPy 14's communicator takes the bytes get_unique_id made, nothing else
            if not isinstance(commId, bytes):
                raise TypeError("Argument 'commId' has incorrect type (expected bytes, got "
                                f"{type(commId).__name__})")
            assert len(commId) == 128
            self.c = MPI.COMM_WORLD.Dup()
            assert (self.c.Get_size(), self.c.Get_rank()) == (ndev, rank)
            calls.append(("init", ndev, rank))

        def _gather(self, a):
            rows = np.empty((self.c.Get_size(),) + a.shape, a.dtype)
            self.c.Allgather(np.ascontiguousarray(a), rows)
            return rows

        def allReduce(self, sendbuf, recvbuf, count, datatype, op, stream):  # noqa: N802
            calls.append(("allReduce", count, datatype, op, stream))
            out = reduce_all(self._gather(view(sendbuf, count, datatype).copy()), datatype, op)
            view(recvbuf, count, datatype)[...] = out

        def reduce(self, sendbuf, recvbuf, count, datatype, op, root, stream):
            calls.append(("reduce", count, datatype, op, root))
            out = reduce_all(self._gather(view(sendbuf, count, datatype).copy()), datatype, op)
            if self.c.Get_rank() == root:
                view(recvbuf, count, datatype)[...] = out

        def broadcast(self, sendbuff, recvbuff, count, datatype, root, stream):
            calls.append(("broadcast", count, datatype, root))
            a = view(sendbuff, count, datatype).copy()
            self.c.Bcast(a, root=root)
            view(recvbuff, count, datatype)[...] = a

        def allGather(self, sendbuf, recvbuf, count, datatype, stream):  # noqa: N802
            calls.append(("allGather", count, datatype))
            rows = self._gather(view(sendbuf, count, datatype).copy())
            view(recvbuf, count * self.c.Get_size(), datatype)[...] = rows.reshape(-1)

        def reduceScatter(self, sendbuf, recvbuf, recvcount, datatype, op, stream):  # noqa: N802
            calls.append(("reduceScatter", recvcount, datatype, op))
            n = self.c.Get_size()
            out = reduce_all(self._gather(view(sendbuf, recvcount * n, datatype).copy()),
                             datatype, op)
            r = self.c.Get_rank()
            view(recvbuf, recvcount, datatype)[...] = out[r * recvcount:(r + 1) * recvcount]

        def send(self, sendbuf, count, datatype, peer, stream):
            calls.append(("send", count, datatype, peer))
            req = self.c.Isend(view(sendbuf, count, datatype).copy(), dest=peer, tag=7)
            group.append(req) if group and group[0] == "open" else req.Wait()

        def recv(self, recvbuf, count, datatype, peer, stream):
            calls.append(("recv", count, datatype, peer))
            req = self.c.Irecv(view(recvbuf, count, datatype), source=peer, tag=7)
            group.append(req) if group and group[0] == "open" else req.Wait()

        def check_async_error(self):
            pass

        def abort(self):
            calls.append(("abort",))

        def destroy(self):
            calls.append(("destroy",))

    def groupStart():  # noqa: N802
        group[:] = ["open"]

    def groupEnd():  # noqa: N802
        reqs = group[1:]
        group[:] = []
        MPI.Request.Waitall(reqs)

    nccl.NcclCommunicator = NcclCommunicator
    nccl.groupStart, nccl.groupEnd = groupStart, groupEnd
    nccl.get_unique_id = lambda: bytes(range(128))
    return nccl
