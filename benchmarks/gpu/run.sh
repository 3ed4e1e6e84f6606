#!/usr/bin/env bash
# fiamma's GPU check: the cuda test suite and the GPU benchmarks, on a machine with an NVIDIA
# GPU, Python 3.12, CuPy and PyTorch, no cffi and no network. Run from the repository root;
# benchmarks/gpu/README.md says what to bring (.whl/ with the cffi and scipy-openblas32 wheels,
# the prebuilt packages/core/src/fiamma/_C.abi3.so). Results go to $OUT (default gpu-results/):
# env.txt, pytest.log, junit.xml, bench.log, bench_cuda.json, bench_cuda.md. Every stage has a
# time limit; the whole run stays under 8 minutes.
set -u
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
T_INSTALL=${T_INSTALL:-90}
T_TESTS=${T_TESTS:-250}  # the tests end this many seconds after the start at the latest
T_END=${T_END:-460}  # the benchmarks end this many seconds after the start at the latest
start=$(date +%s)

# 1. the wheels core needs beyond what the machine has (cffi's runtime, OpenBLAS)
site=/tmp/site
timeout "$T_INSTALL" "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target "$site" .whl/*.whl || echo "pip install of .whl/ failed" >&2
# the core extension links libgomp.so.1 (GCC's OpenMP runtime): use the carried copy only
# where the machine has none
if ! ldconfig -p 2>/dev/null | grep -q "libgomp.so.1 " && [ -e .whl/lib/libgomp.so.1 ]; then
    export LD_LIBRARY_PATH="$PWD/.whl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
srcs=$(ls -d packages/*/src | tr '\n' ':')
export PYTHONPATH="$site:${srcs%:}"
export PATH="$site/bin:$PATH"  # mpiexec of the mpich wheel (fiamma-distributed's tests)
# pip --target leaves out the mpich wheel's lib/ (its libmpi), so mpi4py would load the
# machine's own MPI (an Open MPI there made every rank under the wheel's MPICH mpiexec a world
# of one): unpack the wheel's library and point mpi4py at it
mpich_whl=$(ls .whl/mpich-*.whl 2>/dev/null | head -1)
if [ -n "$mpich_whl" ] && "$PY" -m zipfile -e "$mpich_whl" /tmp/mpich-wheel 2>/dev/null; then
    mpich_lib=$(ls -d /tmp/mpich-wheel/*.data/data/lib | head -1)
    export MPI4PY_LIBMPI="$mpich_lib/libmpi.so.12"
    export LD_LIBRARY_PATH="$mpich_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

# 2. the machine and the versions
{
    date -u
    nvidia-smi || true
    "$PY" - <<'PY'
import platform, numpy
print("python", platform.python_version(), "numpy", numpy.__version__)
try:
    import cupy
    print("cupy", cupy.__version__, "devices", cupy.cuda.runtime.getDeviceCount())
except Exception as e:
    print("cupy:", type(e).__name__, e)
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
          torch.cuda.get_device_name() if torch.cuda.is_available() else "")
except Exception as e:
    print("torch:", type(e).__name__, e)
import fiamma
print("fiamma", fiamma.__version__, "cuda available", fiamma.cuda.is_available(),
      fiamma.cuda.unavailable_reason() or fiamma.cuda.get_device_name())
PY
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# 3. the cuda test suite: the device-parametrised files, on cuda, one pytest run per tests/
#    folder (each has its own conftest.py); junit reports merged into one file
files=$(ls packages/*/tests/test_xp_*.py packages/*/tests/test_cuda*.py \
        packages/*/tests/test_device*.py tests/test_devices*.py tests/test_xp*.py \
        tests/test_cuda*.py 2>/dev/null | sort -u)
dirs=$(for f in $files; do dirname "$f"; done | sort -u)
timeout_flag=""
if "$PY" -c "import pytest_timeout" 2>/dev/null; then timeout_flag="--timeout=60"; fi
mkdir -p /tmp/junit
: > "$OUT/pytest.log"
i=0
for d in $dirs; do
    i=$((i + 1))
    left=$(( T_TESTS - ($(date +%s) - start) ))
    [ "$left" -lt 20 ] && { echo "== no time left for $d" | tee -a "$OUT/pytest.log"; continue; }
    these=$(for f in $files; do [ "$(dirname "$f")" = "$d" ] && echo "$f"; done)
    echo "== $d: $(echo $these | wc -w) files (${left} s left)" | tee -a "$OUT/pytest.log"
    FIAMMA_TEST_DEVICES=cuda timeout -k 10 "$left" "$PY" -m pytest -q -p no:cacheprovider \
        --maxfail=30 -rfE $timeout_flag --junitxml="/tmp/junit/$i.xml" $these \
        >> "$OUT/pytest.log" 2>&1
    echo "== $d: exit $?" | tee -a "$OUT/pytest.log"
done
"$PY" - "$OUT/junit.xml" /tmp/junit/*.xml <<'PY' || true
import sys, xml.etree.ElementTree as ET
root = ET.Element("testsuites")
for f in sys.argv[2:]:
    try:
        r = ET.parse(f).getroot()
    except Exception as e:
        print("junit:", f, e)
        continue
    root.extend(r.findall("testsuite") if r.tag == "testsuites" else [r])
ET.ElementTree(root).write(sys.argv[1], encoding="utf-8", xml_declaration=True)
PY
grep -E "passed|failed|error|no tests ran" "$OUT/pytest.log" | tail -20
echo "== tests done ($(( $(date +%s) - start )) s so far)"

# 4. the benchmarks beside PyTorch on the same GPU
T_BENCH=$(( T_END - ($(date +%s) - start) ))
echo "== benchmarks (${T_BENCH} s left)"
timeout -k 10 "$T_BENCH" "$PY" benchmarks/gpu/bench_cuda.py --device cuda --out "$OUT" 2>&1 \
    | tee "$OUT/bench.log" | tail -30
echo "== bench exit: $?  ($(( $(date +%s) - start )) s so far)"

# 5. per-op host and device times beside PyTorch (bench_ops.py), with the time left
T_OPS=$(( T_END + ${T_OPS_EXTRA:-0} - ($(date +%s) - start) ))
if [ "$T_OPS" -ge 30 ]; then
    echo "== per-op times (${T_OPS} s left)"
    timeout -k 10 "$T_OPS" "$PY" benchmarks/gpu/bench_ops.py --out "$OUT" \
        --budget $(( T_OPS - 15 )) > /tmp/bench_ops.log 2>&1
    cat "$OUT/ops.txt" 2>/dev/null
fi
echo "== done ($(( $(date +%s) - start )) s in all)"
