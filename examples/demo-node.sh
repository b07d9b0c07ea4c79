#!/usr/bin/env bash
# A simulated 8×H100 node that looks like a real one: two busy whole GPUs, two GPUs split
# with MIG, an inference server on one MIG slice. Then `gpuctl top --once` shows it.
# No GPU, cluster or cloud needed. State lives in $GPUCTL_SIM_STATE (default below).
set -euo pipefail
bin=${GPUCTL_BIN:-gpuctl}
py=${GPUCTL_PYTHON:-python3}
export GPUCTL_SIMULATE=${GPUCTL_SIMULATE:-8xH100-80GB}
export GPUCTL_SIM_STATE=${GPUCTL_SIM_STATE:-.gpuctl/demo-node.json}
mkdir -p "$(dirname "$GPUCTL_SIM_STATE")"
rm -f "$GPUCTL_SIM_STATE"

echo "\$ gpuctl mig configure --gpus 6,7 --layout 3g.40gb=1,1g.10gb=3 --reset --yes"
# the plan and the result; the per-step "done:" progress lines would repeat the plan
"$bin" mig configure --gpus 6,7 --layout 3g.40gb=1,1g.10gb=3 --reset --yes 2>&1 | grep -v '^  done: '
"$py" -m gpuctl.sim add-process --gpu 0 --pid 4242 --mib 61440 --name python --user alice
"$py" -m gpuctl.sim add-process --gpu 1 --pid 4243 --mib 30000 --name torchrun --user bob
"$py" -m gpuctl.sim add-process --gpu 6 --gi 1 --ci 0 --pid 5000 --mib 20000 --name vllm --user carol
echo
echo "\$ gpuctl top --once"
"$bin" top --once
