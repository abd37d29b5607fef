#!/usr/bin/env bash
# The GPU session in one call (under 9 minutes on 1 GPU, no internet): the CUDA tests, inference
# and training speed, and a short training run of the default model. See benchmarks/gpu/run.py.
#
#   OUT=dir bash benchmarks/gpu/run.sh [--minutes M] [--corpus FILE]   # on the GPU machine
#   OUT=dir bash benchmarks/gpu/run.sh --smoke                         # end to end on the CPU, tiny
#
# Writes into $OUT (default runs/gpu), at most 8 files of at most 16 MB: run.log, results.json,
# RESULTS.md and model/ (options.json, weights.hdf5, softmax.hdf5 in float16, vocab.txt,
# metadata.json). Needs a python whose torch sees CUDA, with numpy, h5py, wrapt and pytest (a GPU
# machine's own python3 with PyTorch has them; this checkout is on PYTHONPATH, nothing installed).
# A .venv made on a CPU machine has a CPU-only torch, skipped below: no use carrying it there.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-runs/gpu}"
mkdir -p "$OUT"
rm -f "$OUT/results.json" "$OUT/RESULTS.md"  # (the fallback below tells a stale pair from none)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
SMOKE=0
for arg in "$@"; do [ "$arg" = "--smoke" ] && SMOKE=1; done
# The interpreter: $PYTHON, else the first of .venv and the system's python3 whose torch sees
# CUDA (a .venv carried from a CPU machine has a CPU-only torch); --smoke takes the first.
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
    for candidate in .venv/bin/python python3; do
        command -v "$candidate" >/dev/null 2>&1 || [ -x "$candidate" ] || continue
        [ -z "$PY" ] && PY="$candidate"
        if [ "$SMOKE" = 0 ] && "$candidate" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
            PY="$candidate"; break
        fi
    done
fi
start=$SECONDS

if [ "$SMOKE" = 1 ]; then
    # the CUDA tests on the CPU; a few of them, to stay fast
    export ELMO_TEST_DEVICE=cpu
    selection=(-k "replay and allennlp or training_step or (leak and 3 and True)")
else
    selection=()
fi
# Float32 is float32 for the tests and run.py: NVIDIA's PyTorch images set
# TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1, which starts every float32 matrix product in TF32 (~1e-3
# off: the 1e-6 conformance fails and the fp32 rows measure TF32), and NVIDIA_TF32_OVERRIDE=0
# keeps cuBLAS and cuDNN from TF32 whatever a library asks. What the image had is logged.
echo "== TF32 environment before: TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=${TORCH_ALLOW_TF32_CUBLAS_OVERRIDE:-unset} NVIDIA_TF32_OVERRIDE=${NVIDIA_TF32_OVERRIDE:-unset}" | tee "$OUT/run.log"
export TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=0 NVIDIA_TF32_OVERRIDE=0
# the float32 settings the tests meet
echo "== $PY: $("$PY" -c 'import torch; b = torch.backends; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "matmul tf32", b.cuda.matmul.allow_tf32, "cudnn tf32", b.cudnn.allow_tf32)' 2>&1)" | tee -a "$OUT/run.log"
# what the tests and run.py import besides torch: a missing one is named here, before both fail on it
echo "== needs: $("$PY" -c 'import h5py, numpy, pytest, wrapt, elmo; print("ok: numpy", numpy.__version__, "h5py", h5py.__version__, "pytest", pytest.__version__)' 2>&1 | tail -n 1)" \
    | tee -a "$OUT/run.log"
echo "== pytest -m cuda tests/test_cuda.py (device ${ELMO_TEST_DEVICE:-cuda})" | tee -a "$OUT/run.log"
# (${a[@]+"${a[@]}"}: bash before 4.4 takes an empty "${a[@]}" for an unset variable under set -u)
timeout 240 "$PY" -m pytest -o addopts="" -q -m cuda tests/test_cuda.py -p no:cacheprovider ${selection[@]+"${selection[@]}"} 2>&1 \
    | tee -a "$OUT/run.log"
tests_rc=${PIPESTATUS[0]}
tests=$(tail -n 1 "$OUT/run.log")
[ "$tests_rc" = 0 ] || tests="FAILED (exit $tests_rc): $tests"

budget=$((470 - (SECONDS - start)))
echo "== benchmarks/gpu/run.py (budget ${budget} s)" | tee -a "$OUT/run.log"
timeout $((budget + 20)) "$PY" benchmarks/gpu/run.py --out "$OUT" --budget-s "$budget" --tests "$tests" "$@" 2>&1 \
    | tee -a "$OUT/run.log"
run_rc=${PIPESTATUS[0]}
if [ ! -s "$OUT/results.json" ]; then
    # run.py ended before it wrote anything (an import error, say): the two files the session
    # reads still come back, with the tests' outcome and run.py's exit status
    t=${tests//\\/\\\\}; t=${t//\"/\\\"}
    printf '{"tests": "%s", "measurements_exit": %s, "error": "benchmarks/gpu/run.py wrote no results: see run.log"}\n' \
        "$t" "$run_rc" > "$OUT/results.json"
    printf '# GPU session\n\ntests: %s\n\nbenchmarks/gpu/run.py exited %s before writing its results: see run.log\n' \
        "$tests" "$run_rc" > "$OUT/RESULTS.md"
fi
echo "== done in $((SECONDS - start)) s: tests exit $tests_rc, measurements exit $run_rc" | tee -a "$OUT/run.log"
[ "$tests_rc" = 0 ] && [ "$run_rc" = 0 ]
