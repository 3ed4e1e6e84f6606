"""fiamma.run and fiamma._torch_alias: unmodified PyTorch programs run with torch -> fiamma.

Each program runs in a fresh interpreter (``python -m fiamma.run ...``), as a user runs it.
Real PyTorch may be installed beside fiamma: the runner must shadow it.
"""

import os
import subprocess
import sys
import textwrap

import pytest

import fiamma
from fiamma import _torch_alias


def run(tmp_path, code, *args, name="prog.py", runner_args=None):
    script = tmp_path / name
    script.write_text(textwrap.dedent(code))
    cmd = [sys.executable, "-m", "fiamma.run", *(runner_args or [str(script)]), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_main_semantics_argv_and_identity(tmp_path):
    r = run(tmp_path, """
        import sys, os
        import torch, fiamma
        import torch.special  # a core submodule: core's tests run without the siblings
        print(__name__, sys.argv[1:], os.path.basename(sys.argv[0]))
        print(sys.path[0] == os.path.dirname(os.path.realpath(__file__)))
        print(torch.Tensor is fiamma.Tensor, torch.tensor is fiamma.tensor)
        print(torch.__version__, fiamma.__version__ == torch.version.fiamma)
        print(torch.__version__ >= "2.0", torch.__version__ < (3,), torch.version.cuda)
        print(torch.float32 is fiamma.float32, torch.linalg is fiamma.linalg)
        print(torch.randn(2, 3).sum(0).shape == (3,))
        """, "--lr", "0.1")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "__main__ ['--lr', '0.1'] prog.py"
    assert lines[1:] == ["True", "True True", f"{_torch_alias.TORCH_VERSION} True",
                         "True True None", "True True", "True"]


def test_submodules_are_fiammas_modules(tmp_path):
    r = run(tmp_path, """
        import torch.linalg, torch.fft, torch.special, torch.multiprocessing
        import torch.version
        import fiamma
        print(torch.linalg is fiamma.linalg, torch.fft is fiamma.fft,
              torch.multiprocessing is fiamma.multiprocessing)
        from torch.linalg import norm
        print(norm is fiamma.linalg.norm, torch.version.__version__ == torch.__version__)
        """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True"] * 5


def test_missing_module_is_a_named_gap_and_catchable(tmp_path):
    r = run(tmp_path, """
        try:
            import torch.no_such_module
        except ImportError as e:
            print(type(e).__name__, e.name)
            print(e)
        import torch.no_such_module
        """)
    assert r.returncode == 1
    out = r.stdout.splitlines()
    assert out[0] == "FiammaModuleNotFoundError torch.no_such_module"
    assert "fiamma has no 'fiamma.no_such_module'" in out[1] and "gap" in out[1]
    assert "FiammaModuleNotFoundError" in r.stderr and "gap in fiamma" in r.stderr
    assert "fiamma.run:" not in r.stderr  # the message says it once


def test_missing_attribute_is_a_named_gap(tmp_path):
    r = run(tmp_path, """
        import torch
        print(hasattr(torch, "no_such_function"))
        try:
            torch.no_such_function
        except AttributeError as e:
            print(type(e).__name__, e)
        """)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "False"
    assert out[1].startswith("FiammaAttributeError module 'torch' has no attribute "
                             "'no_such_function': fiamma has no fiamma.no_such_function")


def test_uncaught_gap_in_a_fiamma_object_gets_a_note(tmp_path):
    r = run(tmp_path, """
        import torch
        torch.zeros(2).no_such_method()
        """)
    assert r.returncode == 1
    assert "AttributeError" in r.stderr
    assert "fiamma.run: fiamma._tensor.Tensor.no_such_method is a gap" in r.stderr


def test_program_errors_are_not_called_gaps(tmp_path):
    r = run(tmp_path, """
        class A: pass
        A().missing
        """)
    assert r.returncode == 1 and "AttributeError" in r.stderr
    assert "gap" not in r.stderr


def test_exit_status_and_stdin_like_python(tmp_path):
    r = run(tmp_path, "import sys; sys.exit(3)\n")
    assert r.returncode == 3
    r = subprocess.run([sys.executable, "-m", "fiamma.run", str(tmp_path / "nope.py")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "can't open file" in r.stderr
    r = subprocess.run([sys.executable, "-m", "fiamma.run"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "usage" in r.stderr


def test_module_and_code_forms(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text("import sys, torch\nprint(__name__, sys.argv[1:], "
                                  "torch.__name__, torch.ones(2).sum().item())\n")
    r = run(tmp_path, "", "x", runner_args=["-m", "mypkg.train"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "__main__ ['x'] torch 2.0"
    r = run(tmp_path, "", "y", runner_args=["-c", "import sys, torch; print(sys.argv, "
                                            "torch.Tensor.__name__)"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['-c', 'y'] Tensor"


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_child_processes_see_the_aliasing(tmp_path, method):
    r = run(tmp_path, f"""
        import multiprocessing as mp
        import torch

        def child(q):
            import torch.linalg
            import fiamma
            q.put((torch.__version__, torch.Tensor is fiamma.Tensor, torch.__name__))

        if __name__ == "__main__":
            ctx = mp.get_context({method!r})
            q = ctx.Queue()
            ps = [ctx.Process(target=child, args=(q,)) for _ in range(2)]
            for p in ps:
                p.start()
            got = [q.get(timeout=60) for _ in ps]
            for p in ps:
                p.join()
            print(got, [p.exitcode for p in ps])
        """)
    assert r.returncode == 0, r.stderr
    v = _torch_alias.TORCH_VERSION
    assert r.stdout.strip() == f"[('{v}', True, 'torch'), ('{v}', True, 'torch')] [0, 0]"


def test_grandchildren_see_the_aliasing(tmp_path):
    r = run(tmp_path, """
        import multiprocessing as mp
        import torch

        def grandchild(q):
            import torch
            q.put(torch.Tensor.__module__)

        def child(q):
            p = mp.get_context("spawn").Process(target=grandchild, args=(q,))
            p.start()
            p.join()

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            p = ctx.Process(target=child, args=(q,))
            p.start()
            print(q.get(timeout=60))
            p.join()
        """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "fiamma._tensor"


def test_install_uninstall_in_process():
    import multiprocessing.spawn as spawn

    saved = {k: v for k, v in sys.modules.items() if k.partition(".")[0] == "torch"}
    for k in saved:
        del sys.modules[k]
    original = spawn.get_preparation_data
    try:
        _torch_alias.install()
        _torch_alias.install()  # idempotent
        assert _torch_alias.is_installed()
        import torch

        assert torch.Tensor is fiamma.Tensor and torch.__name__ == "torch"
        assert sys.modules["torch"] is torch
        d = spawn.get_preparation_data("x")
        assert "fiamma_torch_alias" in d
    finally:
        _torch_alias.uninstall()
        sys.modules.update(saved)
    assert not _torch_alias.is_installed()
    assert spawn.get_preparation_data is original
    assert "torch" not in sys.modules or sys.modules["torch"] is saved.get("torch")


def test_target_names_and_versions():
    t = _torch_alias.target_name
    assert t("torch") == "fiamma"
    assert t("torch.utils.data.sampler") == "fiamma.utils.data.sampler"
    assert t("torchvision.transforms.functional") == "fiamma.vision.transforms.functional"
    assert t("torchaudio.functional") == "fiamma.audio.functional"
    assert t("torchtext") is None and t("numpy") is None
    v = _torch_alias.APIVersion("2.13.0")
    assert v == "2.13" and v >= (2, 1) and v < "2.13.1" and v > "1.13.1+cu117"
    assert v != "2.12.0" and not (v == object()) and str(v) == "2.13.0"
    assert {v: 1}["2.13.0"] == 1


def test_reprs_and_type_names_are_torchs_under_the_runner(tmp_path):
    # ported scripts print shapes and dtypes and compare x.type() with 'torch.FloatTensor'
    r = run(tmp_path, """
        import torch
        x = torch.ones(2, dtype=torch.float64)
        print(x.shape, x.dtype, x.type(), x.type() == "torch.DoubleTensor")
        print(repr(torch.zeros(1, dtype=torch.int16)))
        print(x.untyped_storage is not None, torch.ones(1).storage().type())
        """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "torch.Size([2]) torch.float64 torch.DoubleTensor True",
        "tensor([0], dtype=torch.int16)", "True torch.FloatStorage"]
    # without the runner, fiamma's own names
    assert repr(fiamma.ones(2).shape) == "fiamma.Size([2])" and fiamma.ones(1).type() == \
        "fiamma.FloatTensor"


# hides every real torch/torchvision/torchaudio distribution from importlib.metadata, as on a
# machine where only fiamma is installed
_HIDE_REAL_TORCH = """
    import importlib.machinery, importlib.metadata as md
    _find = importlib.machinery.PathFinder.find_distributions
    def _hidden(context=md.DistributionFinder.Context()):
        return [d for d in _find(context)
                if d.metadata["Name"].lower() not in ("torch", "torchvision", "torchaudio")]
    importlib.machinery.PathFinder.find_distributions = staticmethod(_hidden)
"""


def test_metadata_answers_for_torch_when_no_real_distribution(tmp_path):
    r = run(tmp_path, textwrap.dedent(_HIDE_REAL_TORCH) + textwrap.dedent("""
        import importlib.util
        print(md.version("torch"))
        d = md.distribution("torch")
        print(d.metadata["Name"], "fiamma" in d.metadata["Summary"], d.files)
        print(len([x for x in md.distributions() if x.metadata["Name"] == "torch"]))
        print(importlib.util.find_spec("torch") is not None)
        print(md.packages_distributions().get("torch"), md.requires("torch"))
        try:
            md.version("no-such-dist-fiamma")
        except md.PackageNotFoundError:
            print("missing ok")
        """))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [_torch_alias.TORCH_VERSION, "torch True None", "1", "True",
                                     "['torch'] None", "missing ok"]


def test_metadata_of_a_real_distribution_wins(tmp_path):
    # where a distribution of that name is installed, importlib.metadata finds it, not fiamma's;
    # where none is (a machine with only fiamma), the runner's stand-in answers, once
    import importlib.metadata as md

    try:
        md.distribution("torch")
        expect = ["False", "1"]
    except md.PackageNotFoundError:
        expect = ["True", "1"]
    r = run(tmp_path, """
        import importlib.metadata as md
        try:
            real = md.distribution("torch")
        except md.PackageNotFoundError:
            print("no real torch")
        else:
            print("fiamma" in (real.metadata["Summary"] or ""),
                  len([x for x in md.distributions() if x.metadata["Name"] == "torch"]))
        """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == expect


def test_metadata_finder_leaves_with_uninstall(tmp_path):
    # in a child: install() drops a real torch already imported from sys.modules, which this
    # process (where other tests import torch) must keep
    code = textwrap.dedent(_HIDE_REAL_TORCH) + textwrap.dedent("""
        import sys
        from fiamma import _torch_alias
        _torch_alias.install()
        print(md.version("torch"), _torch_alias._dist_finder in sys.meta_path)
        _torch_alias.uninstall()
        print(_torch_alias._dist_finder in sys.meta_path)
        try:
            md.version("torch")
        except md.PackageNotFoundError:
            print("gone")
        """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [_torch_alias.TORCH_VERSION, "True", "False", "gone"]
