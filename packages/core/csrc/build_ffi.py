"""cffi build script for fiamma._C (API mode), used by setup.py's cffi_modules.

The C sources are every ``*.c`` in this folder; the declarations cffi sees are ``fiamma_api.h``.
BLAS comes from scipy-openblas32, linked here and pre-loaded by ``fiamma._lib`` at import.
"""

import glob
import os
import sys

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))


def _openblas():
    try:
        import scipy_openblas32 as ob
    except ImportError:  # building without BLAS is not supported
        sys.exit("fiamma-core build: scipy-openblas32 is required at build time")
    return ob.get_include_dir(), ob.get_lib_dir(), ob.get_library()


def make_ffi():
    ffi = FFI()
    # fiamma_api.h first, then one api_<area>.h per kernel area (reduce, matmul, ...)
    headers = ["fiamma_api.h"] + sorted(
        os.path.basename(p) for p in glob.glob(os.path.join(HERE, "api_*.h")))
    for h in headers:
        with open(os.path.join(HERE, h)) as f:
            ffi.cdef(f.read())
    # a second name for fm_binary_contig whose wrapper keeps the GIL (see cffi_glue.h)
    ffi.cdef("int fm_binary_contig_small(int op, int dtype, int64_t n, intptr_t out, "
             "intptr_t a, intptr_t b);")
    inc, libdir, libname = _openblas()
    sources = sorted(glob.glob(os.path.join(HERE, "*.c")))
    # setuptools wants paths relative to the project root
    root = os.path.dirname(HERE)
    sources = [os.path.relpath(s, root) for s in sources]
    # a changed header (cffi_glue.h above all) rebuilds the module in an in-place build too
    depends = [os.path.relpath(h, root) for h in sorted(glob.glob(os.path.join(HERE, "*.h")))]
    ffi.set_source(
        "fiamma._C",
        "".join(f'#include "{h}"\n' for h in ["fiamma.h"] + headers[1:] + ["cffi_glue.h"]),
        sources=sources,
        depends=depends,
        include_dirs=[HERE, inc],
        library_dirs=[libdir],
        libraries=[libname, "m"],
        extra_compile_args=["-O3", "-std=gnu11", "-fno-math-errno", "-fopenmp",
                            "-Wall", "-Wno-unused-function", "-g0"],
        extra_link_args=["-fopenmp", "-Wl,-s", "-Wl,-rpath,$ORIGIN/../scipy_openblas32/lib"],
    )
    return ffi


ffibuilder = make_ffi()

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
