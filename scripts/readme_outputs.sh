#!/usr/bin/env bash
# Runs the README's five-minute-tour commands that print a result (JSON where the command has
# --format json, the export text otherwise) into OUTDIR, one file each, so two builds can be
# compared byte for byte: scripts/readme_outputs.sh build/release/cleave /tmp/a; ... /tmp/b;
# diff -r /tmp/a /tmp/b. elapsed_s (wall time) is dropped from the JSON.
set -euo pipefail
B=${1:?usage: readme_outputs.sh CLEAVE_BINARY OUTDIR}
OUT=${2:?usage: readme_outputs.sh CLEAVE_BINARY OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
SEED="examples/seed-13b.toml dgx-a100-80g --gpus 32 --gbs 128"
n=0
run() {  # run NAME ARGS...: stdout to OUT/NAME, elapsed lines removed
  local name=$1; shift
  n=$((n + 1))
  "$B" "$@" | sed -E 's/"elapsed_s": ?[0-9.e+-]+,?//; s/^# elapsed: .*$//' > "$OUT/$(printf %02d $n)-$name" || true
}
J="--format json"
run model model examples/gpt3-175b.toml $J
run hw-list hw list $J
run hw-show hw show dgx-h100 $J
run stack-list stack list $J
run stack-show stack show torchtitan-fsdp2 $J
run plan-seed plan $SEED --top 5 $J
run plan-seed-table plan $SEED --top 5
run plan-megatron plan $SEED --format megatron
run plan-deepspeed plan $SEED --format deepspeed --stack deepspeed-zero3-2021
run plan-torchtitan plan $SEED --format torchtitan
run plan-bridge plan $SEED --format bridge
run plan-405b plan examples/llama-3-405b.toml dgx-h100 --gpus 16384 --gbs 2048 --seq 8192 --tp 8 --pp 16 $J
run explain-405b explain examples/llama-3-405b.toml dgx-h100 --gpus 16384 --gbs 2048 --seq 8192 --tp 8 \
    --pp 16 --pipeline-layout 'Et*7|(t*8|)*14t*7L' --memory-headroom 4 $J
run explain-seed explain $SEED --pp 8 --dp 4 --mbs 8 $J
run explain-seed-table explain $SEED --pp 8 --dp 4 --mbs 8
run explain-pcie explain examples/seed-13b.toml a100-pcie-1gbe --gpus 32 --gbs 128 --pp 8 --dp 4 --mbs 8 $J
run simulate-seed simulate $SEED --pp 8 --dp 4 --mbs 8 $J
run compare-70b compare examples/llama-3-70b.toml --clusters dgx-a100-80g dgx-h100 dgx-h200 --gpus 64 --gbs 512 $J
run explain-fp8 explain examples/llama-3-8b.toml gb200-nvl72 --gpus 8 --gbs 128 --seq 8192 --mbs 2 --zero 1 \
   --dtype fp8 --fp8-recipe tensorwise $J
run compare-fp8 compare examples/llama-3-8b.toml --clusters dgx-a100-80g dgx-h100 dgx-b200 gb200-nvl72 \
   --gpus 64 --gbs 256 --seq 8192 --dtype fp8 $J
run plan-cost plan $SEED --tokens 300B --objective cost $J
run published-memory published tests/data/public_memory.csv $J
run published-runs published tests/data/public_runs_2026h1.csv $J
run explain-knobs explain examples/llama-3-70b.toml dgx-h100 --gpus 64 --gbs 256 --tp 4 --pp 2 --sp --zero 1 \
   --recompute-modules mlp --cpu-offloading-num-layers 10 \
   --use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 $J
run plan-nano plan examples/hf/nemotron-3-nano-30b-a3b.config.json gb200-nvl72 --gpus 64 --gbs 512 --seq 8192 $J
run explain-muon explain $SEED --zero 1 --optimizer muon $J
run explain-dualpipe explain examples/hf/deepseek-v3.config.json h800 --gpus 2048 --gbs 15360 --seq 4096 \
   --pp 16 --ep 64 --etp 1 --zero 1 --dtype fp8 --fp8-recipe blockwise --first-stage-layers 3 \
   --last-stage-layers 2 --recompute-modules layernorm,mla_up_proj,moe_act --schedule dualpipe $J
run plan-dualpipev plan examples/llama-3-8b.toml dgx-h100 --gpus 16 --gbs 64 --seq 8192 --pp 4 \
   --schedule dualpipev --stack torchtitan-fsdp2 --format torchtitan
echo "$n outputs in $OUT"
