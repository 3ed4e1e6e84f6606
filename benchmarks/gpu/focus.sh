#!/usr/bin/env bash
# A short, focused GPU check (for a few minutes of device time, after run.sh has run once):
# installs the carried wheels as run.sh does, then runs, each under its own time limit,
#   1. the cuda test files named in $TESTS (default: the kernel, cuDNN and flash tests),
#   2. each script of $CHECKS (benchmarks/gpu/*_check.py that exist: cudnn_check.py, and
#      kernels_check.py, the newest kernels at GPU sizes against the CPU, each served),
#   3. bench_cuda.py on the workloads of $ONLY (default: the three training steps),
#   4. profile_steps.py for the jobs of $PROFILE (default: ResNet-18) into $OUT/p/,
#   5. bench_ops.py in the time left before $T_END seconds.
# Usage (repository root): OUT=dir bash benchmarks/gpu/focus.sh
set -u
OUT=${OUT:-gpu-results}
mkdir -p "$OUT" "$OUT/p"
PY=${PYTHON:-python3}
T_END=${T_END:-400}
start=$(date +%s)
left() { echo $(( T_END - ($(date +%s) - start) )); }

site=/tmp/site
timeout 90 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" .whl/*.whl || echo "pip install of .whl/ failed" >&2
if ! ldconfig -p 2>/dev/null | grep -q "libgomp.so.1 " && [ -e .whl/lib/libgomp.so.1 ]; then
    export LD_LIBRARY_PATH="$PWD/.whl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
srcs=$(ls -d packages/*/src | tr '\n' ':')
export PYTHONPATH="$site:${srcs%:}" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export PATH="$site/bin:$PATH"
# the mpich wheel's libmpi for mpi4py (as run.sh: pip --target leaves the wheel's lib/ out)
mpich_whl=$(ls .whl/mpich-*.whl 2>/dev/null | head -1)
if [ -n "$mpich_whl" ] && "$PY" -m zipfile -e "$mpich_whl" /tmp/mpich-wheel 2>/dev/null; then
    mpich_lib=$(ls -d /tmp/mpich-wheel/*.data/data/lib | head -1)
    export MPI4PY_LIBMPI="$mpich_lib/libmpi.so.12"
    export LD_LIBRARY_PATH="$mpich_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

TESTS=${TESTS:-"packages/core/tests/test_cuda_cudnn.py packages/core/tests/test_cuda_kernels.py packages/core/tests/test_cuda_lowp.py packages/core/tests/test_cuda_step.py"}
these=$(for f in $TESTS; do [ -e "$f" ] && echo "$f"; done)
: > "$OUT/pytest.log"
# one pytest run per tests/ folder (each has its own conftest.py), all within T_TESTS seconds
t_tests_end=$(( $(date +%s) + ${T_TESTS:-150} ))
for d in $(for f in $these; do dirname "$f"; done | sort -u); do
    lim=$(( t_tests_end - $(date +%s) ))
    [ "$lim" -lt 15 ] && { echo "== no time left for $d" | tee -a "$OUT/pytest.log"; continue; }
    files=$(for f in $these; do [ "$(dirname "$f")" = "$d" ] && echo "$f"; done)
    echo "== tests in $d ($lim s left for tests)" | tee -a "$OUT/pytest.log"
    FIAMMA_TEST_DEVICES=cuda timeout -k 5 "$lim" "$PY" -m pytest -q -p no:cacheprovider \
        -rfEs --maxfail=20 $files >> "$OUT/pytest.log" 2>&1
    echo "== $d exit $?" | tee -a "$OUT/pytest.log"
done
grep -E "^(FAILED|ERROR)|passed|failed|^== " "$OUT/pytest.log" | tail -30

for c in ${CHECKS:-$(ls benchmarks/gpu/*_check.py 2>/dev/null | grep -v xp_families)}; do
    [ "$(left)" -lt 60 ] && { echo "== no time for $c"; continue; }
    echo "== $c ($(left) s left)"
    timeout -k 5 "${T_CHECK:-60}" "$PY" "$c" 2>&1 | tee "$OUT/$(basename "$c" .py).log" | tail -40
done

if [ "$(left)" -ge 60 ]; then
    echo "== bench_cuda ($(left) s left)"
    timeout -k 5 $(( $(left) - 30 )) "$PY" benchmarks/gpu/bench_cuda.py --device cuda \
        --out "$OUT" --only "${ONLY:-MLP,ResNet,GPT}" > "$OUT/bench.log" 2>&1
    tail -12 "$OUT/bench.log"
fi

if [ -n "${PROFILE-ResNet-18}" ] && [ "$(left)" -ge 60 ]; then
    echo "== profile_steps ${PROFILE-ResNet-18} ($(left) s left)"
    timeout -k 5 $(( $(left) - 20 )) "$PY" benchmarks/gpu/profile_steps.py --out "$OUT/p" \
        --only "${PROFILE-ResNet-18}" --budget $(( $(left) - 40 )) > /dev/null 2>&1
    head -c 3000 "$OUT/p/profile.txt" 2>/dev/null
fi

if [ "$(left)" -ge 40 ]; then
    echo "== bench_ops ($(left) s left)"
    timeout -k 5 $(( $(left) - 5 )) "$PY" benchmarks/gpu/bench_ops.py --out "$OUT" \
        --budget $(( $(left) - 20 )) > /tmp/bench_ops.log 2>&1
    cat "$OUT/ops.txt" 2>/dev/null
fi
echo "== done ($(( $(date +%s) - start )) s)"
