/* Glue for the cffi-generated wrappers of fiamma._C (included by the set_source preamble of
 * build_ffi.py, after cffi's own header and before the wrappers; never by the kernels).
 *
 * A cffi call from Python costs ~150-190 ns, and a small op makes one or more of them, so three
 * parts of every generated wrapper are replaced here:
 *
 *  - Argument conversion. cffi converts a Python int to int64_t through a function of its
 *    backend that, for an int wider than 30 bits (every address we pass), goes through a
 *    byte-array conversion. Here an exact int is converted with
 *    PyLong_AsLongLongAndOverflow, and anything else (an int subclass, an object with
 *    __index__, a float, an int out of range) is handed to cffi's own converter, so accepted
 *    values and error messages stay cffi's.
 *  - errno. cffi saves and restores errno around each call for ffi.errno, which fiamma never
 *    reads: skipped.
 *  - The GIL. cffi releases it around every call (a mutex unlock and lock, ~35 ns). The
 *    wrappers named in FM_KEEP_GIL (calls whose work is bounded and small: the allocator, the
 *    operator fast path on blocks of the small-block pool) keep it; every other call still
 *    releases it, so long kernels let other Python threads run. Each wrapper decides once, by
 *    its name, and remembers.
 *
 * Everything is guarded by #ifdef on cffi's macro names: if a cffi release renamed them, the
 * build would keep cffi's own behaviour. */
#ifndef FIAMMA_CFFI_GLUE_H
#define FIAMMA_CFFI_GLUE_H

#include <string.h>

#if defined(_cffi_to_c_i64) && defined(_cffi_to_c_i32)
static long long fm_cffi_to_i64(PyObject *o) {
    if (PyLong_CheckExact(o)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (!overflow) return v;
    }
    return ((long long (*)(PyObject *))_cffi_exports[7])(o);
}

static int fm_cffi_to_i32(PyObject *o) {
    if (PyLong_CheckExact(o)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (!overflow && v >= INT32_MIN && v <= INT32_MAX) return (int)v;
    }
    return ((int (*)(PyObject *))_cffi_exports[5])(o);
}
#undef _cffi_to_c_i64
#define _cffi_to_c_i64 fm_cffi_to_i64
#undef _cffi_to_c_i32
#define _cffi_to_c_i32 fm_cffi_to_i32
#endif

#if defined(_cffi_restore_errno) && defined(_cffi_save_errno)
#undef _cffi_restore_errno
#define _cffi_restore_errno() ((void)0)
#undef _cffi_save_errno
#define _cffi_save_errno() ((void)0)
#endif

/* wrappers that keep the GIL (cffi names them _cffi_f_<function>) */
static const char *const FM_KEEP_GIL[] = {
    "_cffi_f_fm_alloc", "_cffi_f_fm_free", "_cffi_f_fm_binary_contig_small",
};

static int fm_keep_gil(const char *wrapper) {
    for (size_t i = 0; i < sizeof FM_KEEP_GIL / sizeof FM_KEEP_GIL[0]; i++)
        if (strcmp(wrapper, FM_KEEP_GIL[i]) == 0) return 1;
    return 0;
}

#undef Py_BEGIN_ALLOW_THREADS
#undef Py_END_ALLOW_THREADS
#define Py_BEGIN_ALLOW_THREADS                                                \
    {                                                                         \
        static int fm_keep_ = -1;                                             \
        PyThreadState *fm_save_ = NULL;                                       \
        if (fm_keep_ < 0) {                                                   \
            fm_keep_ = fm_keep_gil(__func__);                                 \
        }                                                                     \
        if (!fm_keep_) {                                                      \
            fm_save_ = PyEval_SaveThread();                                   \
        }
#define Py_END_ALLOW_THREADS                                                  \
        if (fm_save_) {                                                       \
            PyEval_RestoreThread(fm_save_);                                   \
        }                                                                     \
    }

/* fm_binary_contig under a second name, for the operator fast path's small calls (cffi makes a
 * wrapper per name; that one keeps the GIL) */
#define fm_binary_contig_small fm_binary_contig

#endif
