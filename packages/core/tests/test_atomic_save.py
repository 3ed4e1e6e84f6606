"""A save killed mid-write (SIGKILL: no handler runs) leaves its temporary file; the next save to
the same target removes it, and never removes the temporary of a writer still at work."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import fiamma
from fiamma.serialization import atomic_write, remove_stale_temporaries

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and flock are POSIX")

_SAVER = textwrap.dedent("""
    import sys
    import fiamma
    big = fiamma.ones(16 << 20)  # 64 MiB: each save takes long enough to be caught mid-write
    while True:
        fiamma.save({"w": big}, sys.argv[1])
""")


def _temporaries(folder):
    return sorted(n for n in os.listdir(folder) if n.endswith(".tmp"))


def _kill_mid_save(target):
    folder = os.path.dirname(target)
    child = subprocess.Popen([sys.executable, "-c", _SAVER, target])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            names = _temporaries(folder)
            if names and os.path.getsize(os.path.join(folder, names[0])) > 0:
                break
            time.sleep(0.001)
        else:
            pytest.fail("the saving child never started writing")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    return child.pid


def test_next_save_removes_the_temporary_of_a_killed_save(tmp_path):
    target = str(tmp_path / "model.pt")
    fiamma.save({"w": fiamma.zeros(2)}, target)  # an old checkpoint, which must survive
    pid = _kill_mid_save(target)
    stale = _temporaries(tmp_path)
    # before the fix this file stayed forever (and one more with every killed save)
    assert len(stale) == 1 and stale[0].startswith(f".model.pt.{pid}."), stale
    assert fiamma.load(target)["w"].tolist() == [0.0, 0.0]  # the target is intact
    fiamma.save({"w": fiamma.ones(3)}, target)
    assert _temporaries(tmp_path) == []
    assert fiamma.load(target)["w"].tolist() == [1.0, 1.0, 1.0]
    # safetensors.save_file writes the same way
    pid = _kill_mid_save(target)
    assert len(_temporaries(tmp_path)) == 1
    fiamma.safetensors.save_file({"w": fiamma.ones(1)}, target)
    assert _temporaries(tmp_path) == []


def test_a_live_writers_temporary_is_kept(tmp_path):
    target = str(tmp_path / "x.pt")
    with atomic_write(target) as fp:  # this process is writing x.pt right now
        fp.write(b"partial")
        mine = _temporaries(tmp_path)
        assert len(mine) == 1
        # another process saving the same target leaves it alone (pid alive, lock held)
        code = ("import sys, fiamma; from fiamma.serialization import remove_stale_temporaries"
                " as r; print(len(r(sys.argv[1])))")
        out = subprocess.run([sys.executable, "-c", code, target], capture_output=True,
                             text=True, check=True).stdout
        assert out.strip() == "0"
        assert remove_stale_temporaries(target) == []
        assert _temporaries(tmp_path) == mine
    assert _temporaries(tmp_path) == []
    # names that only look alike (another target, not our pattern) are never touched
    for n in (".x.pt.tmp", ".x.pt.1.zz.tmp", ".y.pt.999999999.0123abcd.tmp", "x.pt.1.a.tmp"):
        (tmp_path / n).write_bytes(b"")
    assert remove_stale_temporaries(target) == []
    assert len(_temporaries(tmp_path)) == 4
