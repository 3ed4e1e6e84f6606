"""Build the cuda backend's kernels (fiamma/_backend/xp/cuda_kernels.py) for the CPU: the same
CUDA sources compiled as C++20 over a small emulation of the CUDA execution model (one host
thread per CUDA thread, the blocks of a grid in turn, __syncthreads and the warp shuffles as
barriers, atomics under a lock), as a shared library that fiamma_cuda_emu.py drives through
ctypes. This lets machines without a GPU (CI) check the kernels' arithmetic and indexing
against the CPU backend; it checks nothing of CuPy's own argument passing or of real GPU
timing, which only benchmarks/gpu/run.sh on a GPU does.

    python tools/cuda_emu/build.py OUT.so        (needs g++ with C++20 <barrier>)

It also builds OUT_cudnn.so from fake_cudnn.c: a stand-in libcudnn (reference convolutions
over host memory) that fiamma_cuda_emu.py points FIAMMA_CUDNN_LIB at, so the cuda backend's
cuDNN binding (fiamma/_backend/xp/cudnn.py) runs its ctypes calls, descriptors and workspace
handling on the CPU.
"""
import os
import shutil
import subprocess
import sys

from fiamma._backend.xp import (
    cuda_flash as CF,
    cuda_kernels as CK,
    cuda_lowp as CL,
    cuda_step as CS,
)

HERE = os.path.dirname(os.path.abspath(__file__))


def _strip(src):
    return src.replace('extern "C" ', "")


def _elementwise():
    """The ElementwiseKernel bodies as loops over contiguous arrays."""
    out = [CK._GELU_PRE,
           "void gelu_fwd(const T* X, T hi, T lo, int approx, int f32, T* Y, long n) {"
           " for (long i = 0; i < n; ++i) { const T x = X[i]; T& y = Y[i];"
           + CK._GELU_FWD + "} }",
           "void gelu_bwd(const T* G, const T* X, T hi, T lo, int approx, int f32, T* O,"
           " long n) { for (long i = 0; i < n; ++i) { const T g = G[i]; const T x = X[i];"
           " T& o = O[i];" + CK._GELU_BWD + "} }"]
    for ams in (0, 1):
        body = CK._ADAM.replace("AMS", "if (vm > vi) { vi = vm; } vm = vi;" if ams else "")
        out.append(f"void adam{ams}(const T* G, T w1, T b2, T w2, T eps, T wd, T ss, T bc2s,"
                   " T dec, int maximize, int mode, T* P, T* M, T* V, T* VM, long n) {"
                   " for (long i = 0; i < n; ++i) { const T g = G[i]; T& p = P[i];"
                   " T& m = M[i]; T& v = V[i]; T& vm = VM[i]; (void)vm;" + body + "} }")
    for mom in (0, 1):
        body = CK._SGD.replace("MOM", "{ const T bi = first ? gi : buf * mom + damp1 * gi; "
                               "buf = bi; gi = nesterov ? gi + mom * bi : bi; }" if mom else "")
        out.append(f"void sgd{mom}(const T* G, T wd, T mom, T damp1, T nlr, int maximize,"
                   " int has_wd, int first, int nesterov, T* P, T* B, long n) {"
                   " for (long i = 0; i < n; ++i) { const T g = G[i]; T& p = P[i];"
                   " T& buf = B[i]; (void)buf; (void)mom; (void)damp1; (void)first;"
                   " (void)nesterov;" + body + "} }")
    out.append("#undef TK\n#undef TC\n#undef IS2\n#undef ISP")
    return out


def source():
    """The C++ translation unit: the kernels once per float type, then the entry points."""
    out = ['#include "emu_shim.hpp"']
    for ns, ct in (("f32", "float"), ("f64", "double")):
        out.append(f"namespace {ns} {{ typedef {ct} T;")
        out.append(_strip(CK._XENT_ROW))  # _BLOCK and the cross-entropy row helpers, once
        for src in (CK._ROW_NORM_FWD, CK._ROW_NORM_BWD, CK._ROW_NORM_WB, CK._COLSUM, CK._COLSUM1,
                    CK._ROW_NORM_WB1, CK._ACC_OUT, CK._XENT_FWD, CK._XENT_BWD, CK._XENT_MEAN,
                    CK._IM2COL, CK._COL2IM, CK._BN, CK._SOFTMAX, CK._MAXPOOL,
                    CK._ATTN, CL.POOL_SCATTER):
            out.append(_strip(src).replace(_strip(CK._XENT_ROW), "")
                       .replace(_strip(CK._BLOCK), ""))
        for ams, name in ((0, "fm_adam_multi"), (1, "fm_adam_multi_ams")):
            body = CK._ADAM.replace("AMS", "if (vm > vi) { vi = vm; } vm = vi;" if ams else "")
            out.append(_strip(CK._ADAM_MULTI).replace("NAME", name).replace("BODY", body))
        out.append(_strip(CK._ADAM_MULTI).replace("NAME", "fm_sgd_multi")
                   .replace("BODY", CK._SGD_MULTI_BODY))
        out.append("#undef FM_NEG_INF\n#undef FM_INF_T\n#undef FM_NEG_INF_T")
        for em in (64, 128):  # cuda_flash's kernels: each tile configuration in its namespace
            for part in "fb":
                out.append(f"namespace fa{em}{part} {{")
                out.append(_strip(CF.flash_source(ct, em, part)))
                out.append("}")
        out += _elementwise()
        out.append("}")
    for h in (0, 1):  # cuda_lowp's kernels: bfloat16 (FM_H 0) and float16 (FM_H 1)
        out.append(f"namespace lp{h} {{ typedef float T;\n#define FM_H {h}")
        out.append(_strip(CK._BLOCK) + _strip(CL.LP_SOURCE))
        out.append("#undef FM_H\n#undef FM_NEG_INF\n}")
    for kind, ct in CS.STEP_KINDS.items():  # cuda_step's kernels: one namespace per storage
        out.append(f"namespace step_{kind} {{ typedef {ct} T;")
        out.append(_strip(CS.step_prelude(kind) + CS.STEP_SOURCE))
        out.append("#undef FM_H\n#undef TK\n#undef TC\n#undef IS2\n#undef ISP\n"
                   "#undef FM_NEG_INF\n}")
    out.append(_strip(CK._BIN4))
    out.append(_strip(CK._WHERE_S))
    out.append(_strip(CK._CMP_S))
    out.append(_strip(CS.INT_S))
    out.append(_strip(CK._PHILOX))
    out.append('#include "emu_wrappers.inc"')
    return "\n".join(out)


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    so = argv[1]
    src = so.rsplit(".", 1)[0] + ".cpp"
    with open(src, "w") as f:
        f.write(source())
    r = subprocess.run(["g++", "-O1", "-std=c++20", "-ffp-contract=off", "-shared", "-fPIC",
                        "-pthread", "-I", HERE, "-o", so, src], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"cuda_emu: g++ failed:\n{r.stderr[-6000:]}")
    cc = os.environ.get("CC") or shutil.which("gcc") or "cc"
    r = subprocess.run([cc, "-O2", "-std=c11", "-Wall", "-Werror", "-shared", "-fPIC", "-o",
                        cudnn_path(so), os.path.join(HERE, "fake_cudnn.c")],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"cuda_emu: gcc failed on fake_cudnn.c:\n{r.stderr[-6000:]}")


def cudnn_path(so):
    """Where build.py puts the fake libcudnn built beside the emulation library ``so``."""
    return so.rsplit(".", 1)[0] + "_cudnn.so"


if __name__ == "__main__":
    main(sys.argv)
