"""What another process sends to rebuild a shared tensor (segment name, byte size, shape, stride,
offset) is checked against the segment actually there before it is mapped or viewed."""

import os
import secrets
import sys

import pytest

import fiamma
from fiamma import Tensor
from fiamma.multiprocessing import _reductions, _shm

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="shared memory through /dev/shm and memfd")


def test_a_name_outside_the_pattern_is_never_opened():
    for name in ("../../etc/passwd", "fiamma_mp_1_zz", "other", "fiamma_mp_1_" + "0" * 16 + "/x"):
        with pytest.raises(RuntimeError, match="not a fiamma shared-memory name"):
            _shm.rebuild_from_name(name, 4)


def test_sizes_beyond_the_segment_are_refused():
    name = f"{_shm.PREFIX}{os.getpid()}_{secrets.token_hex(8)}"
    path = os.path.join(_shm.SHM_DIR, name)
    with open(path, "wb") as f:
        f.write(b"\x00" * 16)
    st = None
    try:
        with pytest.raises(RuntimeError, match=f"'{name}' holds 16 bytes.*claims 1048576"):
            _shm.rebuild_from_name(name, 1 << 20)
        st = _shm.rebuild_from_name(name, 16)  # the true size maps
        assert st.nbytes == 16
    finally:
        del st
        if os.path.exists(path):
            os.unlink(path)
    fd = os.memfd_create("t", os.MFD_CLOEXEC)
    os.ftruncate(fd, 16)
    with pytest.raises(RuntimeError, match="holds 16 bytes.*claims 4096"):
        _shm.rebuild_from_fd(fd, 4096)
    with pytest.raises(RuntimeError, match="invalid storage size"):
        _shm.rebuild_from_fd(os.dup(0), -1)


def test_a_layout_reaching_past_the_storage_is_refused():
    t = fiamma.arange(4, dtype=fiamma.float32)
    t.share_memory_()
    st = t._storage
    ok = _reductions._rebuild_tensor(Tensor, st, "float32", (2,), (2,), 1, False)
    assert ok.tolist() == [1.0, 3.0]
    for shape, stride, offset in (((5,), (1,), 0), ((2,), (3,), 1), ((1,), (1,), 4),
                                  ((2,), (-1,), 1), ((2, 2), (1,), 0)):
        with pytest.raises(RuntimeError, match="fiamma.multiprocessing"):
            _reductions._rebuild_tensor(Tensor, st, "float32", shape, stride, offset, False)
    assert _reductions._rebuild_tensor(Tensor, st, "float32", (0, 2**62), (1, 1), 4,
                                       False).numel() == 0
