#!/usr/bin/env bash
# gpuctl's levers on a simulated GPU cluster (gpuctl sandbox: a simulator, not a real
# cluster; no cluster, cloud or GPU needed): jobs that run, log and wait; make-room evicting
# the fewest pods for a waiting job; mig rebalance re-splitting a MIG GPU through the GPU
# Operator's MIG manager; reclaim suspending a job whose GPUs sit idle. The sandbox has a
# name of its own and is the only one stopped at the end.
set -euo pipefail
bin=${GPUCTL_BIN:-gpuctl}
py=${GPUCTL_PYTHON:-python3}
name=demo-$$
say() { echo "# $*"; }
run() { echo "\$ gpuctl $*"; "$bin" "$@"; echo; }
tmp=$(mktemp -d)
trap '"$bin" sandbox stop --name "$name" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
job() {  # NAME GPUS GPU_TYPE [ENV]: a job spec the sandbox runs for an hour
  printf 'apiVersion: gpuctl/v1\nkind: Job\nname: %s\nimage: nvcr.io/nvidia/pytorch:24.05-py3\n' "$1"
  printf 'command: [python, train.py]\ngpus: %s\ngpu_type: %s\n' "$2" "$3"
  printf 'env: {SANDBOX_RUNTIME: "3600"%s}\n' "${4:+, $4}"
}
until_true() {  # SECONDS COMMAND...: retry COMMAND once a second until SECONDS have passed
  local end=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 1
  done
}

run sandbox start --name "$name" --gpu-nodes 2xH100-80GB,1xA100-80GB,1xA100-80GB:mig-config=all-1g.10gb
status=$("$bin" sandbox status --name "$name" -o json)
field() { "$py" -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]] or '')" "$status" "$1"; }
export KUBECONFIG=$(field kubeconfig)
prometheus=$(field prometheus)

say "an idle-but-held job (its GPUs at 0 %), two trainings and an inference service"
job notebook 2 a100 'SANDBOX_GPU_UTIL: "0"' > "$tmp/notebook.yaml"
job train-a 4 h100 > "$tmp/train-a.yaml"
job train-b 6 h100 > "$tmp/train-b.yaml"
printf 'apiVersion: gpuctl/v1\nkind: Service\nname: classifier\nimage: ghcr.io/example/batched-server:1.0\ngpus: 2\nreplicas: 2\nport: 8000\n' > "$tmp/classifier.yaml"
for spec in notebook train-a train-b classifier; do
  "$bin" submit "$tmp/$spec.yaml"
  sleep 1.5   # the simulated scheduler places pods once a second: one after the other
done
echo
run jobs list
run jobs logs train-a

say "MIG: the A100's slices are all 1g.10gb; make two 3g.40gb for what is coming"
run mig rebalance --demand 3g.40gb=2 --yes --timeout 120

if [ -n "$prometheus" ]; then
  say "reclaim: the notebook holds 2 GPUs at 0 %; a policy suspends what idles for 30 s"
  printf 'apiVersion: gpuctl/v1\nkind: ReclaimPolicy\nname: demo\nrules:\n  - name: idle\n    idleFor: 30s\n    action: suspend\n' > "$tmp/policy.yaml"
  told() {  # Prometheus has enough history to tell: the notebook idle, the trainings busy
    "$bin" reclaim --policy "$tmp/policy.yaml" --prometheus "$prometheus" -o json 2>/dev/null |
      "$py" -c 'import json, sys
seen = {w["name"]: w["status"] for w in json.load(sys.stdin)["workloads"]}
sys.exit(not (seen.get("notebook") == "idle" and seen.get("train-a") == "busy"))'
  }
  until_true 120 told || run reclaim --policy "$tmp/policy.yaml" --prometheus "$prometheus"
  run reclaim --policy "$tmp/policy.yaml" --prometheus "$prometheus" --yes
else
  echo "(no prometheus executable: reclaim and the cluster view need one; apt-get install prometheus)"
fi

say "an urgent 4-GPU job: no H100 node has 4 GPUs free"
job urgent 4 h100 > "$tmp/urgent.yaml"
"$bin" submit "$tmp/urgent.yaml" 2>/dev/null
sleep 2
run jobs why urgent
run make-room urgent --yes
until_true 15 sh -c "'$bin' jobs get urgent | grep -q Running"
printf 'apiVersion: gpuctl/v1\nkind: Job\nname: finetune\nimage: nvcr.io/nvidia/pytorch:24.05-py3\nmig: 3g.40gb\ngpu_type: a100\n' > "$tmp/finetune.yaml"
run submit "$tmp/finetune.yaml"
sleep 2
run jobs list
if [ -n "$prometheus" ]; then
  echo "\$ gpuctl top --prometheus $prometheus --once --sort util   # (first lines)"
  "$bin" top --prometheus "$prometheus" --once --sort util | head -n 9
  echo
fi
run sandbox stop --name "$name"
trap 'rm -rf "$tmp"' EXIT
