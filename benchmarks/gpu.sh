#!/usr/bin/env bash
# GPU checks and benchmarks for a lent GPU machine (H100/H200 class). Never part of CI.
#
#   benchmarks/gpu.sh --fetch-wheels   # on a connected machine: download the wheels to carry into .whl/
#   benchmarks/gpu.sh [STEP ...]       # on the GPU machine; steps: gputests checks drift bench scale pytest isaac
#                                      # (default: all, in that order)
#
# Python: the checkout's .venv when it exists and sees a GPU (a `uv sync` done on a connected GPU
# machine); otherwise the machine's own python3 (MGPU_PYTHON overrides), which must already hold
# torch with CUDA and jax with its CUDA plugin (as the lent image does). The packages such an image
# lacks (rsl-rl-lib, skrl, tensordict, gymnasium, GitPython, the Typer/click pair mgpu pins, and their
# small dependencies) travel as
# wheels in .whl/ (`--fetch-wheels`, pinned to uv.lock) and are installed with pip --no-index into
# /tmp/mgpu-site; the project itself runs from the checkout (PYTHONPATH) through an `mgpu` shim.
# warp-lang is not carried: the embedded tasks do not need it (Isaac Lab tasks do).
#
# Steps, all against the real GPU(s), logged to $OUT/gpu.log (or benchmarks/results/gpu/gpu.log):
#   gputests  python -m pytest tests/gpu: GPU memory freed within 5 s of Ctrl-C and of SIGKILL of mgpu
#           (NVML), one GPU rank per back-end, probe-nccl on NCCL
#   checks  nvidia-smi; mgpu check-env --deep; mgpu probe-nccl --world-size 1 (NCCL); mgpu train with
#           one GPU rank for a few iterations of rsl-rl, skrl torch and skrl JAX
#   drift   where there are 2 GPUs or more: 2 NCCL ranks of rsl-rl with its empirical normalizer, rank
#           1 nudged at iteration 10 (--simulate_fault drift@10, --drift_interval 5): mgpu runs --json
#           must name the drift; one GPU: logged as SKIP (NCCL takes one rank per GPU), not a failure
#   bench   python -m benchmarks launch probe training --device cuda --repeats $REPEATS (default 3; fewer are refused),
#           then shutdown --repeats 1; JSON + README.md into $OUT/results (or benchmarks/results/gpu/)
#   scale   mgpu scale of rsl-rl's embedded cartpole on the GPUs there are (world sizes 1, 2, 4, … up
#           to them; one GPU: world size 1) at 1024 and 4096 envs per rank, 30 iterations a point:
#           the table in the log, scale.json and scale.png into $RESULTS/scale (no picture, and a note
#           saying so, where matplotlib cannot be imported)
#   pytest  the rest of the suite (everything but tests/gpu) in $SHARDS (default 4) pytest processes
#           side by side, test files dealt round-robin, slowest first: serially it took over 200 s
#           on a 16-core H200 machine, being mostly start-up latency (torchrun, imports, sleeps);
#           each shard's files and its summary line are logged
#   isaac   only where Isaac Lab is importable (else logged as SKIP, not a failure): one GPU rank of
#           Isaac-Cartpole-Direct (newton_mjwarp) per library Isaac Lab's launcher drives, then
#           python -m benchmarks isaac (2 CPU ranks under mgpu vs isaaclab train)
# Every step runs under one overall budget (BUDGET_S, default 560 s): a step gets at most what is
# left, so the script ends inside a ten-minute command limit; a failed step does not stop the rest.
# Exit status: the number of failed steps (0: all passed).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

WHEELS=(rsl-rl-lib==5.5.1 skrl==2.1.1 tensordict==0.15.3 pyvers==0.2.3 gymnasium==1.4.0
        farama-notifications==0.0.6 GitPython==3.2.1 gitdb==4.0.12 smmap==5.0.3
        typer==0.25.1 click==8.5.1 shellingham==1.5.4 annotated-doc==0.0.7
        matplotlib==3.11.2 contourpy==1.4.0 cycler==0.12.1 fonttools==4.68.0 kiwisolver==1.5.1
        pyparsing==3.3.3 python-dateutil==2.9.0.post0 six==1.17.0 pillow==13.0.0)

if [[ "${1:-}" == "--fetch-wheels" ]]; then
    # Python 3.12 / x86-64 manylinux wheels, no dependencies resolved: the list above is complete
    # for an image that already has torch, jax, flax, optax, numpy, tensorboard, onnx and tqdm.
    mkdir -p .whl
    exec python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
        -d .whl "${WHEELS[@]}"
fi

if [[ "${1:-}" == "--pytest-shards" ]]; then
    # Internal: the pytest step. Known slow files first so that they land in different shards.
    PY="$2"; SHARDS="${SHARDS:-4}"
    SLOW=(tests/test_training.py tests/test_supervise.py tests/test_probe_run.py tests/test_isaac.py
          tests/test_training_inprocess.py tests/test_checkenv_cli.py tests/test_multinode_static.py)
    FILES=()
    for f in "${SLOW[@]}"; do [[ -f "$f" ]] && FILES+=("$f"); done
    for f in tests/test_*.py; do [[ " ${SLOW[*]} " == *" $f "* ]] || FILES+=("$f"); done
    declare -a PIDS=() SHARD=()
    for ((i = 0; i < ${#FILES[@]}; i++)); do SHARD[i % SHARDS]+=" ${FILES[i]}"; done
    for ((k = 0; k < SHARDS; k++)); do
        [[ -n "${SHARD[k]:-}" ]] || continue
        echo "shard $k:${SHARD[k]}"
        # shellcheck disable=SC2086  # the file list is split on purpose
        "$PY" -m pytest -q -p no:cacheprovider ${SHARD[k]} >"/tmp/mgpu-shard-$k.log" 2>&1 &
        PIDS[k]=$!
    done
    RC=0
    for k in "${!PIDS[@]}"; do
        wait "${PIDS[k]}"; rc=$?
        ((rc)) && RC=1
        echo "--- shard $k: exit $rc"
        if ((rc)); then tail -60 "/tmp/mgpu-shard-$k.log"; else tail -1 "/tmp/mgpu-shard-$k.log"; fi
    done
    exit "$RC"
fi

if [[ -n "${OUT:-}" ]]; then
    LOG="$OUT/gpu.log"; RESULTS="$OUT/results"
else
    LOG="$REPO/benchmarks/results/gpu/gpu.log"; RESULTS="$REPO/benchmarks/results/gpu"
fi
mkdir -p "$(dirname "$LOG")" "$RESULTS"
: >"$LOG"
BUDGET_S="${BUDGET_S:-560}"
REPEATS="${REPEATS:-3}"
END=$((SECONDS + BUDGET_S))
FAILED=0
export PYTHONUNBUFFERED=1

log() { echo "[gpu.sh $(date +%H:%M:%S)] $*" | tee -a "$LOG"; }

# step NAME LIMIT_S CMD...: run CMD with at most LIMIT_S seconds (and never past the budget).
step() {
    local name="$1" limit="$2"; shift 2
    local left=$((END - SECONDS))
    if ((left < 20)); then
        log "SKIP $name: budget spent"; FAILED=$((FAILED + 1)); return
    fi
    ((limit > left)) && limit=$left
    log "START $name (limit ${limit}s): $*"
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" "$@" >>"$LOG" 2>&1
    local rc=$?
    if ((rc == 0)); then
        log "PASS $name ($((SECONDS - t0))s)"
    else
        log "FAIL $name: exit $rc ($((SECONDS - t0))s)$( ((rc == 124)) && echo ', timed out')"
        FAILED=$((FAILED + 1))
    fi
}

# --- the Python to use -----------------------------------------------------------------------
if [[ -x .venv/bin/python ]] && .venv/bin/python -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    PY="$REPO/.venv/bin/python"
    export PATH="$REPO/.venv/bin:$PATH"
else
    # The interpreter itself (not a shim such as pyenv's): the mgpu shim's shebang points at it.
    PY="$("${MGPU_PYTHON:-python3}" -c 'import sys; print(sys.executable)')"
    if compgen -G ".whl/*.whl" >/dev/null; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/mgpu-site .whl/*.whl >>"$LOG" 2>&1 || log "pip install of .whl/ failed (see above)"
    fi
    export PYTHONPATH="/tmp/mgpu-site:$REPO${PYTHONPATH:+:$PYTHONPATH}"
    mkdir -p /tmp/mgpu-bin
    printf '#!%s\nimport sys\nfrom isaaclab_mgpu.cli import main\nsys.exit(main())\n' "$PY" >/tmp/mgpu-bin/mgpu
    chmod +x /tmp/mgpu-bin/mgpu
    export PATH="/tmp/mgpu-bin:$PATH"
fi
log "python: $PY; results: $RESULTS; budget ${BUDGET_S}s; repeats $REPEATS"
"$PY" - >>"$LOG" 2>&1 <<'EOF'
import importlib.metadata as md, platform
print("python", platform.python_version())
for name in ("torch", "jax", "jaxlib", "rsl-rl-lib", "skrl", "tensordict", "gymnasium", "warp-lang"):
    try:
        print(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name} MISSING")
import torch
print("cuda available:", torch.cuda.is_available(), "devices:", torch.cuda.device_count())
EOF

STEPS=("$@")
((${#STEPS[@]})) || STEPS=(gputests checks drift bench scale pytest isaac)
TRAIN_DIR="$(mktemp -d)"

for s in "${STEPS[@]}"; do
    case "$s" in
    checks)
        step nvidia-smi 30 nvidia-smi
        step check-env-deep 150 mgpu check-env --deep
        step probe-nccl-ws1 150 mgpu probe-nccl --world-size 1 --backend nccl --log_dir "$TRAIN_DIR/probe"
        for lib in "rsl_rl" "skrl --ml_framework torch" "skrl --ml_framework jax"; do
            # shellcheck disable=SC2086  # $lib is two words on purpose
            step "train-1gpu-${lib// /-}" 150 bash -c \
                "cd '$TRAIN_DIR' && mgpu train --nproc_per_node 1 --rl_library $lib --max_iterations 5 --num_envs 4096"
        done
        ;;
    drift)
        if (($(nvidia-smi -L | grep -c '^GPU') < 2)); then
            log "SKIP drift: one GPU here, and NCCL takes one rank per GPU (not a failure)"
            continue
        fi
        step drift-2gpu-nccl 200 bash -c "mkdir -p '$TRAIN_DIR/drift' && cd '$TRAIN_DIR/drift' && mgpu train --nproc_per_node 2 --max_iterations 20 --num_envs 4096 \
            --drift_interval 5 --simulate_fault drift@10 agent.obs_normalization=true && mgpu runs --json | \
            '$PY' -c 'import json, sys; r = json.load(sys.stdin)[0]; print(r[\"drift\"]); sys.exit(not r[\"drift\"])'"
        ;;
    bench)
        step benchmarks 360 "$PY" -m benchmarks launch probe training --device cuda \
            --repeats "$REPEATS" --results "$RESULTS"
        # Shutdown does not depend on the device (sleeping test workers), and its torchrun side
        # waits a fixed 30 s per stubborn run: one repeat here.
        step benchmark-shutdown 150 "$PY" -m benchmarks shutdown --repeats 1 --results "$RESULTS"
        ;;
    scale)
        step scale 240 bash -c "cd '$TRAIN_DIR' && mgpu scale --rl_library rsl_rl --num_envs 1024,4096 \
            --iterations 30 --out '$RESULTS/scale'"
        ;;
    gputests)
        step gpu-tests 300 "$PY" -m pytest -q -p no:cacheprovider -rs tests/gpu
        ;;
    pytest)
        step pytest 400 bash benchmarks/gpu.sh --pytest-shards "$PY"
        ;;
    isaac)
        if ! "$PY" -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("isaaclab") and u.find_spec("isaaclab_rl")))' 2>/dev/null; then
            log "SKIP isaac: Isaac Lab is not importable with $PY (not a failure)"
            continue
        fi
        if [[ -z "${ISAACSIM_ASSET_ROOT:-}" ]]; then  # no asset server from the lent machine
            step isaac-assets 120 "$PY" -m isaaclab_mgpu.tools.isaac_assets "$TRAIN_DIR/assets"
            export ISAACSIM_ASSET_ROOT="$TRAIN_DIR/assets"
        fi
        for lib in "rsl_rl" "skrl" "skrl --ml_framework jax" "rl_games"; do
            # shellcheck disable=SC2086  # $lib is several words on purpose
            step "isaac-1gpu-${lib// /-}" 300 bash -c "cd '$TRAIN_DIR' && mgpu train --nproc_per_node 1 \
                --task Isaac-Cartpole-Direct --num_envs 4096 --max_iterations 5 presets=newton_mjwarp --rl_library $lib"
        done
        step benchmark-isaac 400 "$PY" -m benchmarks isaac --repeats 1 --results "$RESULTS"
        ;;
    *)
        log "unknown step $s (use gputests, checks, drift, bench, scale, pytest, isaac)"; FAILED=$((FAILED + 1))
        ;;
    esac
done
rm -rf "$TRAIN_DIR"
log "done: $FAILED failed step(s); log $LOG; results $RESULTS"
exit "$FAILED"
