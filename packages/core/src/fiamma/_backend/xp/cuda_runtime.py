"""The CUDA runtime side of the cuda backend: devices, memory statistics and pinned host memory,
over CuPy (what ``fiamma.cuda`` answers with when CUDA is available).

Memory figures come from CuPy's default memory pool, which every fiamma allocation on the GPU
goes through (CuPy's own temporaries too): ``memory_allocated`` is its ``used_bytes``,
``memory_reserved`` its ``total_bytes``, per device. CuPy keeps no peaks, so the backend keeps
them: it counts the bytes of its live storages (rounded up to the pool's 512-byte unit, as
``used_bytes`` counts them), and at each allocation the peak of ``memory_allocated`` becomes at
least that count plus the pool's other use (CuPy's own arrays: temporaries inside a primitive,
kernel argument tables) as it was when the statistics were last read or reset. Asking the pool
at each allocation instead would cost more than the op: CuPy's ``used_bytes`` walks every
block in use (a training step holds hundreds). A temporary made and freed inside one CuPy call
is not seen by the peak. The pool's reserved bytes only grow until its blocks are freed, so
their peak is read before ``empty_cache`` frees them and whenever the statistics are read.
"""

__all__ = ["RuntimeMixin", "DeviceProperties"]


class DeviceProperties:
    """What ``fiamma.cuda.get_device_properties`` returns (PyTorch's attribute names)."""

    def __init__(self, props):
        def get(k, default=0):
            v = props.get(k, default)
            return v.decode() if isinstance(v, bytes) else v

        self.name = get("name", "")
        self.major = int(get("major"))
        self.minor = int(get("minor"))
        self.total_memory = int(get("totalGlobalMem"))
        self.multi_processor_count = int(get("multiProcessorCount"))
        self.L2_cache_size = int(get("l2CacheSize"))
        self.is_integrated = bool(get("integrated"))
        self.is_multi_gpu_board = bool(get("isMultiGpuBoard"))
        self.warp_size = int(get("warpSize", 32))
        self.max_threads_per_multi_processor = int(get("maxThreadsPerMultiProcessor"))

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // (1 << 20)}MB, "
                f"multi_processor_count={self.multi_processor_count}, "
                f"L2_cache_size={self.L2_cache_size // (1 << 20)}MB)")


class RuntimeMixin:
    """Device and memory management of the CuPy backend (see the module docstring)."""

    def __init__(self):
        self._devices = {}
        self._peak = {}
        self._peak_reserved = {}
        self._props = {}
        self._live = {}   # device index -> bytes of live storages (rounded as the pool does)
        self._other = {}  # device index -> the pool's other bytes in use when last read

    # ---- devices ---------------------------------------------------------------------------
    def device_count(self):
        return self._ndevices

    def current_device(self):
        return self._rt.getDevice()

    def cuda_device(self, index=None):
        """The fiamma.device ``cuda:index`` (None: the current device), one object per index."""
        if index is None:
            index = self._rt.getDevice()
        d = self._devices.get(index)
        if d is None:
            if not 0 <= index < self._ndevices:
                raise RuntimeError(f"cuda: invalid device ordinal {index} (this machine has "
                                   f"{self._ndevices} CUDA device(s))")
            from fiamma._storage import device

            d = self._devices[index] = device("cuda", index)
        return d

    def device_index(self, device=None, op="cuda"):
        """The CUDA ordinal that ``device`` names (an int, "cuda:N", a fiamma.device; None:
        the current device)."""
        if device is None:
            return self._rt.getDevice()
        if isinstance(device, int) and not isinstance(device, bool):
            idx = device
        else:
            from fiamma._storage import device as _device

            d = _device(device)
            if d.type != "cuda":
                raise ValueError(f"{op}: expected a cuda device, got {d}")
            idx = self._rt.getDevice() if d.index is None else d.index
        if not 0 <= idx < self._ndevices:
            raise RuntimeError(f"{op}: invalid device ordinal {idx} (this machine has "
                               f"{self._ndevices} CUDA device(s))")
        return idx

    def set_device(self, device):
        self.xp.cuda.Device(self.device_index(device, "set_device")).use()

    def properties(self, device=None):
        idx = self.device_index(device, "get_device_properties")
        p = self._props.get(idx)
        if p is None:
            p = self._props[idx] = DeviceProperties(self._rt.getDeviceProperties(idx))
        return p

    def mem_get_info(self, device=None):
        with self.xp.cuda.Device(self.device_index(device, "mem_get_info")):
            free, total = self._rt.memGetInfo()
        return int(free), int(total)

    # ---- memory statistics -----------------------------------------------------------------
    def _pool_bytes(self, idx):
        pool = self.xp.get_default_memory_pool()
        # one device: it is the current one (no runtime call; this runs at every allocation)
        if self._ndevices == 1 or idx == self._rt.getDevice():
            return pool.used_bytes(), pool.total_bytes()
        with self.xp.cuda.Device(idx):
            return pool.used_bytes(), pool.total_bytes()

    _counts_live = True

    def _note_allocation(self, idx, nbytes):
        """A storage of ``nbytes`` was allocated on device ``idx`` (every fiamma allocation:
        plain arithmetic, no pool query; see the module docstring)."""
        live = self._live.get(idx, 0) + ((nbytes + 511) & ~511)
        self._live[idx] = live
        other = self._other.get(idx)
        if other is None:  # the first allocation on this device: read the pool once
            self._read_pool(idx)
        elif live + other > self._peak.get(idx, 0):
            self._peak[idx] = live + other

    def _note_free(self, idx, nbytes):
        self._live[idx] = self._live.get(idx, 0) - ((nbytes + 511) & ~511)

    def _read_pool(self, idx):
        """(used, total) of the pool now, folded into the peaks; the pool's use other than
        fiamma's storages is remembered for the peaks of the allocations that follow."""
        used, total = self._pool_bytes(idx)
        self._other[idx] = max(used - self._live.get(idx, 0), 0)
        if used > self._peak.get(idx, 0):
            self._peak[idx] = used
        if total > self._peak_reserved.get(idx, 0):
            self._peak_reserved[idx] = total
        return used, total

    def memory_allocated(self, device=None):
        return self._read_pool(self.device_index(device, "memory_allocated"))[0]

    def memory_reserved(self, device=None):
        return self._read_pool(self.device_index(device, "memory_reserved"))[1]

    def max_memory_allocated(self, device=None):
        idx = self.device_index(device, "max_memory_allocated")
        self._read_pool(idx)
        return self._peak[idx]

    def max_memory_reserved(self, device=None):
        idx = self.device_index(device, "max_memory_reserved")
        self._read_pool(idx)
        return self._peak_reserved[idx]

    def reset_peak_memory_stats(self, device=None):
        idx = self.device_index(device, "reset_peak_memory_stats")
        self._peak[idx], self._peak_reserved[idx] = self._read_pool(idx)

    def memory_stats(self, device=None):
        idx = self.device_index(device, "memory_stats")
        used, total = self._read_pool(idx)
        return {
            "allocated_bytes.all.current": used,
            "allocated_bytes.all.peak": max(self._peak.get(idx, 0), used),
            "reserved_bytes.all.current": total,
            "reserved_bytes.all.peak": max(self._peak_reserved.get(idx, 0), total),
        }

    def empty_cache(self):
        """Give CuPy's cached blocks (device and pinned host memory) back to the driver."""
        for idx in list(self._other):  # the reserved peaks before the pool shrinks
            self._read_pool(idx)
        ws = getattr(self, "_cudnn_ws", None)
        if ws:  # the cuDNN workspaces kept between calls (cudnn.py) go back too
            ws.clear()
        self.xp.get_default_memory_pool().free_all_blocks()
        self.xp.get_default_pinned_memory_pool().free_all_blocks()

    # ---- pinned host memory ------------------------------------------------------------------
    def alloc_pinned(self, nbytes):
        """Page-locked host memory of ``nbytes`` (a CuPy PinnedMemoryPointer: ``.ptr``)."""
        try:
            return self.xp.cuda.alloc_pinned_memory(max(nbytes, 1))
        except Exception as e:
            raise MemoryError(f"pin_memory: cannot allocate {nbytes} bytes of pinned host "
                              f"memory: {e}") from None

    def is_pinned_address(self, address):
        """Whether host address ``address`` lies in page-locked (CUDA host) memory."""
        if not address:
            return False
        try:
            attrs = self._rt.pointerGetAttributes(address)
        except Exception:
            return False
        return attrs.type == self._rt.cudaMemoryTypeHost
