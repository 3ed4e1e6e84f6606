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


_CHILD = r"""
import json, sys
from fiamma.vision.datasets import mnist
from fiamma.vision.datasets._safe_pickle import restricted_load
cases = json.load(open(sys.argv[1]))
with open(sys.argv[2], "w") as out:
    for path, kind in cases:
        out.write(json.dumps({"start": path}) + "\n"); out.flush()
        try:
            if kind == "idx":
                mnist.read_sn3_pascalvincent_tensor(path, strict=False).sum()
            else:
                restricted_load(path)
            r = {"ok": True}
        except Exception as e:
            r = {"ok": False, "type": type(e).__name__, "msg": str(e)[:300]}
        r["path"] = path
        out.write(json.dumps(r) + "\n"); out.flush()
"""


def test_mutated_idx_and_cifar_files_in_a_child(tmp_path):
    import json
    import random
    import subprocess
    import sys

    rng = random.Random(7)
    bases = {"idx": idx(0x08, [6, 4, 4], bytes(range(96))),
             "idx16": idx(0x0B, [3, 5], bytes(30)),
             "cifar": pickle.dumps({"data": np.arange(48, dtype=np.uint8).reshape(2, 24),
                                    "labels": [1, 2]}, protocol=2)}
    cases = []
    for i in range(300):
        name = rng.choice(list(bases))
        raw = bytearray(bases[name])
        how = rng.randrange(3)
        if how == 0:
            raw = raw[:rng.randrange(len(raw))]
        elif how == 1:
            for _ in range(rng.randint(1, 4)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
        else:
            j = rng.randrange(max(1, len(raw) - 4))
            raw[j:j + 4] = rng.choice([0, 1, 2**31, 2**32 - 1, 0x7FFFFFFF]).to_bytes(4, "big")
        gz = name != "cifar" and rng.random() < 0.3
        p = tmp_path / f"f{i}{'.gz' if gz else ''}"
        p.write_bytes(gzip.compress(bytes(raw)) if gz else bytes(raw))
        cases.append((str(p), "pickle" if name == "cifar" else "idx"))
    spec, report = tmp_path / "cases.json", tmp_path / "report.jsonl"
    spec.write_text(json.dumps(cases))
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(spec), str(report)],
                          capture_output=True, text=True, timeout=120)
    lines = [json.loads(x) for x in report.read_text().splitlines()]
    done = [x for x in lines if "start" not in x]
    assert proc.returncode == 0 and len(done) == len(cases), (lines[-1:], proc.stderr[-2000:])
    bad = [x for x in done if not x["ok"] and (x["type"] != "RuntimeError"
                                               or x["path"] not in x["msg"])]
    assert not bad, bad[:5]
