"""Compile the fused attention's CUDA sources (fiamma/_backend/xp/cuda_flash.py) and the 16-bit
and pool-scatter kernels (cuda_lowp.py) with NVRTC, as
CuPy's RawKernel does (--fmad=false), without a GPU; with ptxas on PATH also assemble them and
print each kernel's registers, spills and static shared memory. A check of the real compiler's
view of the sources that the emulator (build.py) cannot give; speed still needs a GPU.

    python tools/cuda_emu/nvrtc_check.py [--arch 90] [--nvrtc PATH/libnvrtc.so.N]

NVRTC comes from the nvidia-cuda-nvrtc wheel (or a CUDA toolkit); ptxas from a toolkit.
"""
import argparse
import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from fiamma._backend.xp import (
    cuda_flash as CF,
    cuda_kernels as CK,
    cuda_lowp as CL,
    cuda_step as CS,
)


def _find_nvrtc():
    site = sysconfig.get_paths()["purelib"]
    pats = [os.path.join(site, "nvidia", "*", "lib", "libnvrtc.so*"),
            os.path.join(site, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so*"),
            "/usr/local/cuda*/lib64/libnvrtc.so*"]
    for pat in pats:
        for f in sorted(glob.glob(pat)):
            if "builtins" not in f and ".alt." not in f:
                return f
    return None


def _compile(lib, src, name, arch):
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), 0, None, None):
        raise RuntimeError("nvrtcCreateProgram failed")
    opts = [b"--fmad=false", f"-arch=compute_{arch}".encode()]
    rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    ptx = b""
    if rc == 0:
        lib.nvrtcGetPTXSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetPTX(prog, buf)
        ptx = buf.value
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return rc, log.value.decode(errors="replace").strip(), ptx


def _ptxas(ptxas, arch, ptx, cubin):
    """ptxas -v on ``ptx``; an NVRTC newer than the toolkit's ptxas writes a PTX ISA version
    ptxas refuses ("Unsupported .version 9.5; current version is '9.0'"): the file is then
    assembled again declaring the version ptxas names (the kernels here use no newer PTX)."""
    cmd = [ptxas, f"-arch=sm_{arch}", "-v", "-o", cubin, ptx]
    r = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"Unsupported \.version \S+; current version is '([0-9.]+)'", r.stderr)
    if r.returncode and m:
        with open(ptx, "rb") as fh:
            text = fh.read()
        with open(ptx, "wb") as fh:
            fh.write(re.sub(rb"^\.version \S+", b".version " + m.group(1).encode(), text,
                            count=1, flags=re.M))
        r = subprocess.run(cmd, capture_output=True, text=True)
    return r


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="90")
    ap.add_argument("--nvrtc", default=None)
    a = ap.parse_args(argv)
    path = a.nvrtc or _find_nvrtc()
    if path is None:
        sys.exit("nvrtc_check: no libnvrtc found (pip install nvidia-cuda-nvrtc, or --nvrtc)")
    # libnvrtc dlopens its builtins library by name: load the one beside it first
    for b in sorted(glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so*"))):
        if ".alt." not in b:
            ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(path)
    ptxas = shutil.which("ptxas")
    bad = 0
    units = [(f"flash_{ct}_{emax}_{part}",
              f"typedef {ct} T;\n" + CF.flash_source(ct, emax, part))
             for (ct, emax) in CF.FLASH_CFG for part in "fb"]
    # cuda_lowp's kernels as LowpKernelsMixin._lp_kernel builds them, and the pool scatter
    units += [(f"lowp{h}", f"typedef float T;\n#define FM_H {h}\n" + CK._BLOCK + CL.LP_SOURCE)
              for h in (0, 1)]
    units += [(f"pool_scatter_{ct}", f"typedef {ct} T;\n" + CL.POOL_SCATTER)
              for ct in ("float", "double")]
    units += [(f"colsum1_{ct}", f"typedef {ct} T;\n" + CK._COLSUM1 + CK._ROW_NORM_WB1)
              for ct in ("float", "double")]
    units += [(f"xent_mean_{ct}", f"typedef {ct} T;\n" + CK._XENT_MEAN)
              for ct in ("float", "double")]
    units += [(f"step_{kind}", f"typedef {ct} T;\n" + CS.step_prelude(kind) + CS.STEP_SOURCE)
              for kind, ct in CS.STEP_KINDS.items()]
    # the bit-moving and integer kernels (no T)
    units += [("where_s", CK._WHERE_S), ("cmp_s", CK._CMP_S), ("int_s", CS.INT_S)]
    with tempfile.TemporaryDirectory() as tmp:
        for name, src in units:
            rc, log, ptx = _compile(lib, src, name + ".cu", a.arch)
            print(f"{name}: {'ok' if rc == 0 else 'FAILED'}" + (f"\n{log}" if log else ""))
            bad += rc != 0
            if rc == 0 and ptxas:
                f = os.path.join(tmp, name + ".ptx")
                with open(f, "wb") as fh:
                    fh.write(ptx)
                r = _ptxas(ptxas, a.arch, f, os.path.join(tmp, name + ".cubin"))
                for line in (r.stdout + r.stderr).splitlines():
                    if "Used" in line or "spill" in line or "error" in line:
                        print("   ", line.strip())
                bad += r.returncode != 0
    if bad:
        sys.exit(f"nvrtc_check: {bad} failed")


if __name__ == "__main__":
    main(sys.argv[1:])
