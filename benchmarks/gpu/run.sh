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
T_TESTS=${T_TESTS:-210}
T_BENCH=${T_BENCH:-150}
start=$(date +%s)

# 1. the wheels core needs beyond what the machine has (cffi's runtime, OpenBLAS)
site=/tmp/site
timeout "$T_INSTALL" "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target "$site" .whl/*.whl || echo "pip install of .whl/ failed" >&2
srcs=$(ls -d packages/*/src | tr '\n' ':')
export PYTHONPATH="$site:${srcs%:}"
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

# 3. the cuda test suite (device-parametrised files only, on cuda)
tests=$(ls packages/*/tests/test_xp_*.py packages/*/tests/test_cuda*.py \
        packages/*/tests/test_device*.py tests/test_devices*.py tests/test_xp*.py \
        tests/test_cuda*.py 2>/dev/null | sort -u)
timeout_flag=""
if "$PY" -c "import pytest_timeout" 2>/dev/null; then timeout_flag="--timeout=60"; fi
echo "== tests: $tests"
set -o pipefail
FIAMMA_TEST_DEVICES=cuda timeout -k 10 "$T_TESTS" "$PY" -m pytest -q -p no:cacheprovider \
    --maxfail=30 -rfEs $timeout_flag --junitxml="$OUT/junit.xml" $tests 2>&1 \
    | tee "$OUT/pytest.log" | tail -60
echo "== tests exit: $?  ($(( $(date +%s) - start )) s so far)"

# 4. the benchmarks beside PyTorch on the same GPU
left=$(( 450 - ($(date +%s) - start) ))
[ "$left" -lt "$T_BENCH" ] && T_BENCH=$left
timeout -k 10 "$T_BENCH" "$PY" benchmarks/gpu/bench_cuda.py --device cuda --out "$OUT" 2>&1 \
    | tee "$OUT/bench.log" | tail -30
echo "== bench exit: $?  ($(( $(date +%s) - start )) s in all)"
