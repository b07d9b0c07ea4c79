#!/usr/bin/env bash
# The main job on a simulated GPU cluster (gpuctl sandbox: a simulator, not a real cluster):
# start it, submit jobs, list them, ask why one waits, set a team's quota, look at the
# cluster view, stop it. No cluster, cloud or GPU needed.
set -euo pipefail
bin=${GPUCTL_BIN:-gpuctl}
py=${GPUCTL_PYTHON:-python3}
run() { echo "\$ gpuctl $*"; "$bin" "$@"; echo; }
tmp=$(mktemp -d)
trap '"$bin" sandbox stop >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

"$bin" sandbox stop >/dev/null 2>&1 || true   # a sandbox left by an earlier run
run sandbox start
status=$("$bin" sandbox status -o json)
field() { "$py" -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]] or '')" "$status" "$1"; }
export KUBECONFIG=$(field kubeconfig)
prometheus=$(field prometheus)

run submit examples/job.yaml
run submit examples/multinode-train.yaml
# a second multi-node run: the H100 nodes are full, so it waits
sed 's/^name: llama-pretrain/name: llama-next/' examples/multinode-train.yaml > "$tmp/next.yaml"
run submit "$tmp/next.yaml"
sleep 2   # the simulated scheduler places pods once a second
run jobs list -A
run jobs why llama-next -n team-a
run quota set team-b --gpus 8 --yes
run quota list
if [ -n "$prometheus" ]; then
  # the first scrape of the simulated dcgm-exporters lands a few seconds after start
  for _ in $(seq 30); do
    "$bin" top --prometheus "$prometheus" --once -o json 2>/dev/null | grep -q '"pod": "train-1' && break
    sleep 1
  done
  echo "\$ gpuctl top --prometheus $prometheus --once --sort util   # (first lines)"
  "$bin" top --prometheus "$prometheus" --once --sort util | head -n 14
  echo
else
  echo "(no prometheus executable: the cluster view needs one; apt-get install prometheus)"
fi
run sandbox stop
trap 'rm -rf "$tmp"' EXIT
