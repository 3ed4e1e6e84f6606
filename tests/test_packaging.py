"""Packaging checks that run against the INSTALLED fiamma distributions.

`nox -s wheels` runs this file against every wheel installed together in a clean venv, with
FIAMMA_WHEELHOUSE pointing at the wheelhouse; `nox -s "tests(package='root')"` runs it against
core's wheel plus the local checkouts of the other packages. The wheel-content checks skip when
no wheelhouse is found.
"""

import importlib.metadata as md
import importlib.util
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import fiamma

# DESIGN.md: sibling subpackage -> the distribution that ships it
SIBLINGS = {
    "autograd": "fiamma-autograd",
    "nn": "fiamma-nn",
    "fx": "fiamma-nn",
    "func": "fiamma-nn",
    "ao": "fiamma-nn",
    "quantization": "fiamma-nn",
    "functorch": "fiamma-nn",
    "optim": "fiamma-optim",
    "data": "fiamma-data",
    "vision": "fiamma-vision",
    "audio": "fiamma-audio",
    "distributed": "fiamma-distributed",
    "distributions": "fiamma-distributions",
    "jit": "fiamma-export",
    "onnx": "fiamma-export",
    "export": "fiamma-export",
}
REPO = Path(__file__).resolve().parents[1]


def _wheelhouse():
    env = os.environ.get("FIAMMA_WHEELHOUSE")
    folder = Path(env) if env else REPO / "wheelhouse"
    return folder if folder.is_dir() and any(folder.glob("fiamma*.whl")) else None


def _wheels():
    folder = _wheelhouse()
    if folder is None:
        pytest.skip("no wheelhouse with fiamma wheels (run `nox -s wheels`)")
    return sorted(folder.glob("fiamma*.whl"))


def _wheel_dist(path):
    return path.name.split("-")[0].replace("_", "-")


def _fiamma_dists():
    """Installed distributions named fiamma-* (.dist-info only: a source checkout may hold a
    build's leftover .egg-info, which is not an installation)."""
    found = {}
    for d in md.distributions():
        name = (d.metadata["Name"] or "").lower().replace("_", "-")
        if name.startswith("fiamma-") and str(getattr(d, "_path", "")).endswith(".dist-info"):
            found[name] = d
    return found


def _core_version():
    dist = _fiamma_dists().get("fiamma-core")
    if dist is None:
        pytest.skip("fiamma-core is not installed as a distribution (source run)")
    return dist.version


def _python(code, tmp_path):
    """Run ``code`` in a fresh interpreter in ``tmp_path``; return its stdout."""
    env = dict(os.environ)
    if env.get("PYTHONPATH"):  # a source run: keep its entries valid from another directory
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p)
                                            for p in env["PYTHONPATH"].split(os.pathsep) if p)
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"python -c {code!r} failed:\n{res.stderr}"
    return res.stdout.strip()


def test_import_fiamma_in_a_fresh_interpreter(tmp_path):
    out = _python("import fiamma; print(fiamma.__name__, fiamma.Tensor.__name__)", tmp_path)
    assert out == "fiamma Tensor"


def test_version_is_core_version():
    assert fiamma.__version__ == _core_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)?", fiamma.__version__)
    checkout = REPO / "packages/core/src/fiamma/_version.py"
    if checkout.exists():  # the checkout we were built from says the same
        text = checkout.read_text()
        assert f'"{fiamma.__version__}"' in text or f"'{fiamma.__version__}'" in text


@pytest.mark.parametrize("name", sorted(SIBLINGS))
def test_sibling_attribute(name):
    installed = importlib.util.find_spec(f"fiamma.{name}") is not None
    if installed:
        mod = getattr(fiamma, name)
        # fiamma.quantization is fiamma.ao.quantization under PyTorch's older path
        assert mod.__name__ in (f"fiamma.{name}", f"fiamma.ao.{name}")
        return
    with pytest.raises(AttributeError, match=re.escape(SIBLINGS[name])):
        getattr(fiamma, name)
    assert not hasattr(fiamma, name)


def test_unknown_attribute_raises_attribute_error():
    with pytest.raises(AttributeError, match="no_such_thing"):
        _ = fiamma.no_such_thing


def test_import_does_not_pull_heavy_or_sibling_modules(tmp_path):
    heavy = ["torch", "cupy", "pytest", "hypothesis", "_pytest"]
    heavy += [f"fiamma.{s}" for s in SIBLINGS]
    out = _python(
        "import sys, fiamma\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r} or m in {heavy!r}))",
        tmp_path)
    assert out == "[]", f"`import fiamma` imported {out}"


def test_only_core_ships_the_namespace_init_installed():
    _core_version()
    for name, dist in _fiamma_dists().items():
        files = {f.as_posix() for f in (dist.files or [])}
        if name == "fiamma-core":
            assert "fiamma/__init__.py" in files
        else:
            assert "fiamma/__init__.py" not in files, f"{name} ships fiamma/__init__.py"


def test_wheels_namespace_layout():
    wheels = _wheels()
    assert any(_wheel_dist(w) == "fiamma-core" for w in wheels), "no fiamma-core wheel"
    for w in wheels:
        dist = _wheel_dist(w)
        names = zipfile.ZipFile(w).namelist()
        code = [n for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))]
        if dist == "fiamma-core":
            assert "fiamma/__init__.py" in names
            continue
        # its subpackages: fiamma/<name>/ (fiamma-export ships fiamma/jit/, fiamma/onnx/ and
        # fiamma/export/,
        # fiamma-nn fiamma/nn/, fiamma/fx/ and fiamma/func/)
        subs = tuple(f"fiamma/{k}/" for k, d in SIBLINGS.items() if d == dist) or \
            (f"fiamma/{dist[len('fiamma-'):]}/",)
        assert "fiamma/__init__.py" not in names, f"{w.name} ships fiamma/__init__.py"
        stray = [n for n in code if not n.startswith(subs)]
        assert not stray, f"{w.name} ships files outside {subs}: {stray[:5]}"


def test_core_wheel_has_the_compiled_module_and_no_tests():
    core = [w for w in _wheels() if _wheel_dist(w) == "fiamma-core"]
    assert len(core) == 1, f"expected one fiamma-core wheel, found {[w.name for w in core]}"
    names = zipfile.ZipFile(core[0]).namelist()
    assert [n for n in names if re.fullmatch(r"fiamma/_C\..*(so|pyd)", n)], \
        "the compiled fiamma._C extension is missing from the wheel"
    tests = [n for n in names if "/tests/" in n or n.split("/")[-1].startswith("test_")]
    assert not tests, f"test files in the wheel: {tests[:5]}"
    sources = [n for n in names if n.endswith((".c", ".h", ".o"))]
    assert not sources, f"C sources or objects in the wheel: {sources[:5]}"


def test_pure_python_wheels_are_pure():
    for w in _wheels():
        if _wheel_dist(w) != "fiamma-core":
            assert w.name.endswith("-py3-none-any.whl"), f"{w.name} is not a pure-Python wheel"


def test_sibling_requirements_are_compatible_ranges():
    for w in _wheels():
        with zipfile.ZipFile(w) as zf:
            meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            text = zf.read(meta).decode()
        for line in re.findall(r"^Requires-Dist: (fiamma-.*)$", text, flags=re.M):
            spec = line.split(";")[0]
            assert ">=" in spec and "<" in spec.replace("<=", ""), \
                f"{w.name}: sibling requirement {line!r} is not a range like >=0.1,<0.2"


def test_compiled_extension_is_loaded_from_the_installed_package():
    from fiamma import _C

    path = Path(_C.__file__)
    assert path.parent == Path(fiamma.__file__).parent
    assert path.suffix in (".so", ".pyd")
