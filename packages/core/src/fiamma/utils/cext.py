"""Your own C kernels on fiamma tensors: compile C with cffi, check tensors, pass raw pointers.

Three pieces:

* ``load(name, cdef, source)`` compiles ``source`` (C) into a cffi API-mode extension exposing
  the declarations in ``cdef``, caches it (keyed by a hash of everything that affects the build;
  rebuilt only when that changes; safe when several processes build at once) and returns its
  ``lib``.
* ``pointer(t, dtype=...)`` checks one tensor (CPU, dtype, contiguity) and returns a typed C
  pointer to its first element (``float *`` for float32; ``uint16_t *`` for float16/bfloat16).
* ``kernel(fn, args)`` wraps a C function: it checks every tensor argument against its spec
  (dtype, shape with named dimensions, contiguity, device), allocates outputs, passes pointers
  and sizes, and raises errors that name the kernel and the argument. A backward can be
  registered for autograd with ``@k.backward``.

Example (a fused ``y = a*x + b``)::

    import fiamma
    from fiamma.utils import cext

    lib = cext.load("axpb", cdef="void axpb(const float *x, float *y, int64_t n, float a, "
                    "float b);", source='''
        #include <stdint.h>
        void axpb(const float *x, float *y, int64_t n, float a, float b) {
            for (int64_t i = 0; i < n; i++) y[i] = a * x[i] + b;
        }''')
    axpb = cext.kernel(lib.axpb, [cext.In("x", fiamma.float32), cext.Out("y", like="x"),
                                  cext.Numel("x"), cext.Scalar("a"), cext.Scalar("b")])
    y = axpb(fiamma.arange(4.0), 2.0, 1.0)       # tensor([1., 3., 5., 7.])

cffi releases the GIL around the C call, so kernels run in parallel with other Python threads;
C must not call back into Python.
"""

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import shutil
import sys
import sysconfig
import tempfile
import threading

import fiamma
from fiamma import _dtype as D
from fiamma._backend.cpu import c_pointer as _c_pointer
from fiamma._tensor import Tensor

__all__ = ["load", "pointer", "address", "c_type", "kernel", "Kernel", "In", "InOut", "Out",
           "Scalar", "Numel", "Dim", "default_build_directory"]

_C_TYPES = {
    "bool": "_Bool", "uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t",
    "int32": "int32_t", "int64": "int64_t", "float16": "uint16_t", "bfloat16": "uint16_t",
    "float32": "float", "float64": "double", "uint16": "uint16_t", "uint32": "uint32_t",
    "uint64": "uint64_t",
}
_loaded = {}
_load_lock = threading.Lock()


# ---- building ---------------------------------------------------------------------------------
def default_build_directory():
    """Where ``load`` caches extensions: $FIAMMA_EXTENSIONS_DIR, else
    $XDG_CACHE_HOME/fiamma/cext, else ~/.cache/fiamma/cext."""
    d = os.environ.get("FIAMMA_EXTENSIONS_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fiamma", "cext")


def _compiler():
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shutil.which(cc.split()[0]) if cc.split() else None


@contextlib.contextmanager
def _captured_output(path):
    """Send this process's fds 1 and 2 (the compiler's output) to ``path`` for a while."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


def load(name, cdef, source, *, extra_compile_args=(), extra_link_args=(), include_dirs=(),
         libraries=(), library_dirs=(), define_macros=(), build_directory=None, verbose=False):
    """Compile C ``source`` exposing the declarations in ``cdef`` and return the ``lib``.

    ``cdef`` holds plain C declarations that cffi can parse (no ``#include``, no macros with
    bodies); ``source`` is the full C text (it may ``#include`` headers). The result is cached
    in ``build_directory`` (default: ``default_build_directory()``) under a name that includes
    a hash of the sources, the options and the Python/cffi versions: the first call compiles
    (and holds a file lock, so concurrent processes build once), later calls just load it.
    ``extra_compile_args`` defaults to ``-O3`` when empty. Compilation errors raise
    RuntimeError with the compiler's output.

    >>> from fiamma.utils import cext
    >>> lib = cext.load("twice", "int twice(int);", "int twice(int x) { return 2 * x; }")
    >>> lib.twice(21)
    42
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"cext.load: name must be a Python identifier, got {name!r}")
    import cffi

    extra_compile_args = list(extra_compile_args) or ["-O3"]
    opts = {
        "extra_compile_args": extra_compile_args, "extra_link_args": list(extra_link_args),
        "include_dirs": [os.path.abspath(p) for p in include_dirs],
        "libraries": list(libraries), "library_dirs": [os.path.abspath(p) for p in library_dirs],
        "define_macros": [tuple(m) for m in define_macros],
    }
    h = hashlib.sha256()
    for part in (name, cdef, source, repr(sorted(opts.items())), sys.version, cffi.__version__,
                 sysconfig.get_platform()):
        h.update(part.encode())
        h.update(b"\0")
    modname = f"_fiamma_cext_{name}_{h.hexdigest()[:16]}"
    with _load_lock:
        mod = _loaded.get(modname)
        if mod is not None:
            return mod.lib
        bdir = os.path.abspath(build_directory or default_build_directory())
        os.makedirs(bdir, exist_ok=True)
        so_path = os.path.join(bdir, modname + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
        if not os.path.exists(so_path):
            lock_fd = os.open(os.path.join(bdir, modname + ".lock"), os.O_RDWR | os.O_CREAT,
                              0o600)
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX)
                if not os.path.exists(so_path):  # another process may have built it meanwhile
                    _build(name, modname, cdef, source, opts, bdir, so_path, verbose)
            finally:
                os.close(lock_fd)
        spec = importlib.util.spec_from_file_location(modname, so_path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _loaded[modname] = mod
        return mod.lib


def _build(name, modname, cdef, source, opts, bdir, so_path, verbose):
    import cffi

    if _compiler() is None:
        raise RuntimeError(f"cext.load({name!r}): no C compiler found (set CC or install "
                           "gcc/clang)")
    builder = cffi.FFI()
    try:
        builder.cdef(cdef)
    except Exception as e:
        raise RuntimeError(f"cext.load({name!r}): cffi can't parse cdef: {e}") from None
    builder.set_source(modname, source, **opts)
    tmp = tempfile.mkdtemp(prefix=modname + ".", dir=bdir)
    log = os.path.join(tmp, "build.log")
    try:
        try:
            if verbose:
                built = builder.compile(tmpdir=tmp, verbose=True)
            else:
                with _captured_output(log):
                    built = builder.compile(tmpdir=tmp, verbose=False)
        except Exception as e:
            out = ""
            if os.path.exists(log):
                with open(log, errors="replace") as f:
                    out = f.read()
            raise RuntimeError(f"cext.load({name!r}): compilation failed: {e}\n{out}") from None
        os.replace(built, so_path)  # atomic: a reader sees no file or a whole one
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- pointers ---------------------------------------------------------------------------------
def c_type(dtype):
    """The C element type used for ``dtype`` (``"float"`` for float32, ``"uint16_t"`` for the
    16-bit floats, ``"_Bool"`` for bool)."""
    return _C_TYPES[dtype.name]


def _dtypes(dtype):
    if dtype is None:
        return None
    if isinstance(dtype, D.dtype):
        return (dtype,)
    return tuple(dtype)


def _names(dts):
    return " or ".join(str(d) for d in dts)


def _check(t, where, dtype=None, contiguous=True, writable=False):
    if not isinstance(t, Tensor):
        raise TypeError(f"{where}: expected a fiamma.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise RuntimeError(f"{where}: expected a CPU tensor, got one on {t.device}")
    dts = _dtypes(dtype)
    if dts is not None and t.dtype not in dts:
        raise TypeError(f"{where}: expected dtype {_names(dts)}, got {t.dtype}")
    if contiguous and not t.is_contiguous() and t.numel():
        raise ValueError(f"{where}: expected a contiguous tensor, got shape "
                         f"{tuple(t.shape)} with strides {t.stride()} (call .contiguous())")
    if writable and t.requires_grad and t.grad_fn is None and fiamma.is_grad_enabled():
        raise RuntimeError(f"{where}: a leaf tensor that requires grad can't be written in "
                           "place")


def address(t, dtype=None, contiguous=True, writable=False, name="tensor"):
    """The address (int) of ``t``'s first element, after the checks of ``pointer``."""
    _check(t, f"cext.address({name})", dtype, contiguous, writable)
    return t.data_ptr()


def pointer(t, dtype=None, contiguous=True, writable=False, name="tensor"):
    """A typed C pointer (cffi cdata) to the first element of ``t``.

    Checks that ``t`` is a CPU tensor, of ``dtype`` (a dtype or a tuple of them) when given,
    contiguous unless ``contiguous=False`` (then read ``t.stride()`` yourself), and, with
    ``writable=True``, not a leaf requiring grad. Errors name ``name``. The pointer is valid
    while ``t`` is alive.

    >>> import fiamma
    >>> from fiamma.utils import cext
    >>> p = cext.pointer(fiamma.tensor([1.5, 2.5]), fiamma.float32)
    >>> p[1]
    2.5
    """
    _check(t, f"cext.pointer({name})", dtype, contiguous, writable)
    return _c_pointer(_C_TYPES[t.dtype.name] + " *", t.data_ptr())


# ---- kernels ----------------------------------------------------------------------------------
class _Arg:
    passed = True    # the caller passes it
    returned = False


class In(_Arg):
    """A tensor input: C receives a pointer to its first element.

    ``dtype``: a dtype, a tuple of them, or None (any); ``shape``: a tuple of ints, names
    (dimensions with the same name must agree across arguments) or None (any size);
    ``contiguous``: required unless False (C then needs the strides: pass them yourself).
    """

    writable = False

    def __init__(self, name, dtype=None, shape=None, contiguous=True):
        self.name = name
        self.dtype = _dtypes(dtype)
        self.shape = None if shape is None else tuple(shape)
        self.contiguous = contiguous


class InOut(In):
    """A tensor the kernel writes in place (its version counter is bumped after the call)."""

    writable = True


class Out(_Arg):
    """An output allocated by the wrapper and returned: ``like="x"`` (shape and dtype of input
    ``x``), or ``shape=`` (ints and dimension names bound by the inputs) and ``dtype=``."""

    passed = False
    returned = True

    def __init__(self, name, dtype=None, shape=None, like=None, zero=False):
        if like is None and (shape is None or dtype is None):
            raise ValueError(f"cext.Out({name!r}): give like=<input name> or both shape= and "
                             "dtype=")
        self.name = name
        self.dtype = dtype
        self.shape = None if shape is None else tuple(shape)
        self.like = like
        self.zero = zero


class Scalar(_Arg):
    """A number passed as is (cffi converts it to the C parameter's type)."""

    def __init__(self, name):
        self.name = name


class Numel(_Arg):
    """Not passed by the caller: the element count of tensor argument ``of``."""

    passed = False

    def __init__(self, of):
        self.name = f"numel({of})"
        self.of = of


class Dim(_Arg):
    """Not passed by the caller: the size of a named dimension (from a ``shape`` spec) or of
    dimension ``dim`` of tensor argument ``of``."""

    passed = False

    def __init__(self, name_or_of, dim=None):
        self.of = name_or_of
        self.dim = dim
        self.name = name_or_of if dim is None else f"{name_or_of}.size({dim})"


class Kernel:
    """A checked call of a C function on tensors; see ``kernel``."""

    def __init__(self, fn, args, name=None, check_status=False):
        self.fn = fn
        self.args = list(args)
        self.name = name or getattr(fn, "__name__", "kernel")
        self.check_status = check_status
        self._backward = None
        self._function = None
        names = [a.name for a in self.args if isinstance(a, (In, Out, Scalar))]
        if len(set(names)) != len(names):
            raise ValueError(f"cext.kernel({self.name}): argument names repeat: {names}")
        self._params = [a for a in self.args if a.passed]
        self._tensors = {a.name: a for a in self.args if isinstance(a, (In, Out))}
        for a in self.args:
            if isinstance(a, Numel) or (isinstance(a, Dim) and a.dim is not None):
                if a.of not in self._tensors:
                    raise ValueError(f"cext.kernel({self.name}): {a.name} refers to no tensor "
                                     "argument")
            if isinstance(a, Out) and a.like is not None and a.like not in self._tensors:
                raise ValueError(f"cext.kernel({self.name}): Out({a.name!r}, like={a.like!r}) "
                                 "refers to no tensor argument")

    def __repr__(self):
        sig = ", ".join(a.name for a in self._params)
        return f"<cext.kernel {self.name}({sig})>"

    # autograd -----------------------------------------------------------------------------
    def backward(self, fn):
        """Register ``fn(ctx, *grad_outputs)`` as this kernel's backward (decorator).

        It returns one gradient per argument the caller passes (None for scalars or inputs
        that need none). ``ctx.kernel_inputs`` holds the caller's arguments,
        ``ctx.kernel_outputs`` the outputs, and ``ctx.saved_tensors`` the tensor inputs.
        Needs fiamma-autograd.
        """
        self._backward = fn
        self._function = None
        return fn

    def _wants_grad(self, values):
        if not fiamma.is_grad_enabled():
            return False
        return any(isinstance(v, Tensor) and v.requires_grad for v in values)

    def _autograd_function(self):
        if self._function is not None:
            return self._function
        if self._backward is None:
            raise RuntimeError(f"cext kernel {self.name}: an input requires grad but no backward "
                               f"is registered (decorate one with @{self.name}.backward, or call "
                               "it on detached tensors / under fiamma.no_grad())")
        try:
            Function = fiamma.autograd.Function
        except AttributeError:
            Function = None
        if Function is None:
            raise RuntimeError(f"cext kernel {self.name}: an input requires grad, which needs "
                               "fiamma.autograd.Function (pip install fiamma-autograd)")
        k = self

        class _KernelFunction(Function):
            @staticmethod
            def forward(ctx, *values):
                outs = k._run(values)
                ctx.kernel_inputs = values
                ctx.kernel_outputs = outs
                ctx.save_for_backward(*[v for v in values if isinstance(v, Tensor)])
                return outs

            @staticmethod
            def backward(ctx, *grads):
                g = k._backward(ctx, *grads)
                return g if isinstance(g, tuple) else (g,)

        _KernelFunction.__name__ = _KernelFunction.__qualname__ = f"{self.name}_backward"
        self._function = _KernelFunction
        return _KernelFunction

    # calling ------------------------------------------------------------------------------
    def __call__(self, *values):
        if len(values) != len(self._params):
            sig = ", ".join(a.name for a in self._params)
            raise TypeError(f"{self.name}({sig}): expected {len(self._params)} arguments, got "
                            f"{len(values)}")
        if self._wants_grad(values):
            return self._autograd_function().apply(*values)
        return self._run(values)

    def _run(self, values):
        where = self.name
        given = {}
        dims = {}
        for a, v in zip(self._params, values):
            if isinstance(a, In):
                _check(v, f"{where}: argument {a.name!r}", a.dtype, a.contiguous, a.writable)
                if a.shape is not None:
                    self._match_shape(a, v, dims)
            given[a.name] = v
        outs = []
        for a in self.args:
            if isinstance(a, Out):
                if a.like is not None:
                    ref = given[a.like]
                    shape, dt = tuple(ref.shape), a.dtype or ref.dtype
                else:
                    shape = tuple(self._dim_value(s, dims, a) for s in a.shape)
                    dt = a.dtype
                maker = fiamma.zeros if a.zero else fiamma.empty
                given[a.name] = maker(shape, dtype=dt)
                outs.append(given[a.name])
        cargs = []
        for a in self.args:
            if isinstance(a, (In, Out)):
                t = given[a.name]
                cargs.append(_c_pointer(_C_TYPES[t.dtype.name] + " *", t.data_ptr()))
            elif isinstance(a, Scalar):
                cargs.append(given[a.name])
            elif isinstance(a, Numel):
                cargs.append(given[a.of].numel())
            elif isinstance(a, Dim):
                if a.dim is None:
                    cargs.append(self._dim_value(a.of, dims, a))
                else:
                    cargs.append(given[a.of].size(a.dim))
        try:
            rc = self.fn(*cargs)
        except TypeError as e:
            raise TypeError(f"{where}: the C function rejected the arguments ({e}); check that "
                            "the argument specs follow the C parameter order") from None
        for a in self._params:
            if isinstance(a, InOut):
                given[a.name]._bump()
        if self.check_status and rc:
            raise RuntimeError(f"{where}: the kernel returned error status {rc}")
        if not outs:
            return rc if not self.check_status else None
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _match_shape(self, a, v, dims):
        shape = tuple(v.shape)
        if len(shape) != len(a.shape):
            raise ValueError(f"{self.name}: argument {a.name!r} must have {len(a.shape)} "
                             f"dimensions {a.shape}, got shape {shape}")
        for i, (want, got) in enumerate(zip(a.shape, shape)):
            if want is None:
                continue
            if isinstance(want, str):
                seen = dims.setdefault(want, (got, a.name))
                if seen[0] != got:
                    raise ValueError(f"{self.name}: argument {a.name!r} has size {got} in "
                                     f"dimension {i} ({want!r}), but {want!r} is {seen[0]} from "
                                     f"argument {seen[1]!r}")
            elif want != got:
                raise ValueError(f"{self.name}: argument {a.name!r} must have size {want} in "
                                 f"dimension {i}, got shape {shape}")

    def _dim_value(self, s, dims, a):
        if isinstance(s, int):
            return s
        if s not in dims:
            raise ValueError(f"{self.name}: {a.name!r} uses dimension {s!r}, which no input "
                             "shape names")
        return dims[s][0]


def kernel(fn, args, name=None, check_status=False):
    """Wrap C function ``fn`` (from ``load``) as a checked call on tensors.

    ``args`` lists the C parameters in order: ``In``/``InOut`` (tensors the caller passes; C
    gets a typed pointer), ``Out`` (allocated and returned; C gets a pointer), ``Scalar``
    (passed through), ``Numel``/``Dim`` (sizes the wrapper fills in). The wrapper takes the
    caller's arguments (In, InOut, Scalar, in order) and returns the outputs (one tensor, a
    tuple, or the C return value when there are none). ``check_status=True`` raises when the
    C function returns non-zero. With fiamma-autograd installed, a backward registered with
    ``@k.backward`` makes the kernel differentiable; without one, calling it on tensors that
    require grad raises an error (only then).

    >>> import fiamma
    >>> lib = load("relu", "void relu(const float *x, float *y, long long n);",
    ...            "void relu(const float *x, float *y, long long n) {"
    ...            "    for (long long i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0; }")
    >>> relu = kernel(lib.relu, [In("x", fiamma.float32), Out("y", like="x"), Numel("x")])
    >>> relu(fiamma.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """
    return Kernel(fn, args, name=name, check_status=check_status)
