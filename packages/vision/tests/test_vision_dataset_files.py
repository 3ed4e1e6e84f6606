"""Dataset files that lie: IDX headers whose sizes overflow or exceed the data, gzip streams that
would inflate without end, CIFAR pickles whose arrays claim more bytes than they hold. Each is
refused with an error naming the file, before memory is set aside for what the header claims."""

import gzip
import pickle
import resource
import struct

import numpy as np
import pytest

from fiamma.vision.datasets import mnist
from fiamma.vision.datasets._safe_pickle import restricted_load


def idx(code, dims, data=b""):
    return bytes([0, 0, code, len(dims)]) + struct.pack(f">{len(dims)}I", *dims) + data


@pytest.mark.parametrize("gz", [False, True])
def test_idx_sizes_are_checked_against_the_data(tmp_path, gz):
    cases = {
        # 2**31 * 2**31 * 4 is 0 in int64 (np.prod's old way, then a bare reshape ValueError)
        "overflow": (idx(0x08, [2**31, 2**31, 4]), r"shape \(2147483648, 2147483648, 4\) "
                     r"\(18446744073709551616 bytes"),
        "huge": (idx(0x08, [2**31, 2**31], b"\x00" * 10), r"\d+ bytes of data\), but the file "
                 "holds 10"),
        "zero dim": (idx(0x08, [0, 2**32 - 1]), None),
        "truncated header": (idx(0x08, [5, 5])[:9], "truncated IDX header"),
        "bad code": (idx(0x01, [1], b"\x00"), "unknown IDX type code 0x01"),
    }
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for name, (raw, expect) in cases.items():
        p = tmp_path / (name + (".gz" if gz else ""))
        p.write_bytes(gzip.compress(raw) if gz else raw)
        if expect is None:
            assert tuple(mnist.read_sn3_pascalvincent_tensor(p).shape) == (0, 2**32 - 1)
            continue
        with pytest.raises(RuntimeError, match=expect) as info:
            mnist.read_sn3_pascalvincent_tensor(p)
        assert str(p) in str(info.value)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 << 10


def test_gzip_is_not_inflated_past_the_data(tmp_path):
    # 80 MiB of zeros (80 KiB compressed) after a 10-byte IDX: refused without keeping them
    p = tmp_path / "bomb-labels.gz"
    p.write_bytes(gzip.compress(idx(0x08, [10], b"\x01" * 10) + b"\x00" * (80 << 20)))
    with pytest.raises(RuntimeError, match="more than 67108864 bytes follow"):
        mnist.read_label_file(p)
    ok = tmp_path / "ok-labels.gz"
    ok.write_bytes(gzip.compress(idx(0x08, [3], b"\x01\x02\x03")))
    assert mnist.read_label_file(ok).tolist() == [1, 2, 3]


def test_cifar_pickle_with_a_lying_array_is_refused(tmp_path):
    raw = pickle.dumps({"data": np.zeros(4, np.uint8), "labels": [0]}, protocol=2)
    i = raw.index(b"K\x04\x85")  # the array's shape (4,) in its BUILD state
    lying = raw[:i] + b"J\x00\x00\x00\x40\x85" + raw[i + 3:]
    p = tmp_path / "data_batch_1"
    p.write_bytes(lying)
    with pytest.raises(RuntimeError, match="data_batch_1"):
        restricted_load(str(p))
    p.write_bytes(raw[:len(raw) // 2])
    with pytest.raises(RuntimeError, match="data_batch_1"):
        restricted_load(str(p))
