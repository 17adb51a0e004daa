#!/usr/bin/env bash
# spmd-run's launcher against real workers (mlp under data parallelism on 2
# CPU workers):
#   orphans     `kill -9` of a running launcher leaves no worker alive after 2 s
#   concurrent  20 launches at once all succeed (no two share a rendezvous port)
#
#   tests/launch/spmd_run.sh build orphans
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:?usage: spmd_run.sh <build dir> orphans|concurrent}
case_=${2:-}
case "$case_" in
  orphans | concurrent) ;;
  *) echo "usage: spmd_run.sh <build dir> orphans|concurrent" >&2; exit 2 ;;
esac
spmdc="$build/tools/spmdc/spmdc"
run="$build/tools/spmd-run/spmd-run"
model=testdata/pt2/mlp

tmp=$(mktemp -d)
leftover=()
cleanup() {
  for pid in "${leftover[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$spmdc" compile "$model/model.pt2" --schema dp --mesh 2 -o "$tmp/mlp.spmd" -q

# The pids whose parent is $1 (/proc/<pid>/stat: "pid (comm) state ppid ...").
children_of() {
  local stat rest
  for stat in /proc/[0-9]*/stat; do
    read -r rest 2>/dev/null <"$stat" || continue
    rest=${rest##*) }
    rest=${rest#* }
    if [ "${rest%% *}" = "$1" ]; then
      stat=${stat#/proc/}
      echo "${stat%/stat}"
    fi
  done
}

# True while $1 runs (a zombie that init has yet to reap counts as gone).
running() {
  local line
  read -r line 2>/dev/null <"/proc/$1/stat" || return 1
  line=${line##*) }
  [ "${line%% *}" != Z ] && [ "${line%% *}" != X ]
}

orphans() {
  "$run" -n 2 -q "$tmp/mlp.spmd" --inputs "$model/inputs.safetensors" --repeat 1000000000 \
    >"$tmp/out" 2>"$tmp/err" &
  local launcher=$! workers=""
  for _ in $(seq 300); do
    workers=$(children_of "$launcher")
    [ "$(echo "$workers" | grep -c .)" -ge 2 ] && break
    sleep 0.1
  done
  leftover=($workers)
  [ "$(echo "$workers" | grep -c .)" -eq 2 ] || { cat "$tmp/err"; fail "the launcher did not start 2 workers"; }
  sleep 3  # past loading: the workers are computing
  for pid in $workers; do running "$pid" || { cat "$tmp/err"; fail "worker $pid ended early"; }; done
  kill -9 "$launcher"
  wait "$launcher" 2>/dev/null || true
  sleep 2
  local alive=""
  for pid in $workers; do running "$pid" && alive="$alive $pid"; done
  [ -z "$alive" ] || fail "workers still running 2 s after kill -9 of the launcher:$alive"
  echo "PASS: kill -9 of the launcher took workers $(echo $workers) with it"
}

concurrent() {
  local n=20 pids=() failed=0
  for i in $(seq $n); do
    "$run" -n 2 -q "$tmp/mlp.spmd" --inputs "$model/inputs.safetensors" --timeout 120 \
      --output "$tmp/out$i.safetensors" >"$tmp/log$i" 2>&1 &
    pids+=($!)
  done
  leftover=("${pids[@]}")
  for i in $(seq $n); do
    if ! wait "${pids[$((i - 1))]}" || [ ! -s "$tmp/out$i.safetensors" ]; then
      failed=$((failed + 1))
      echo "run $i failed:"
      cat "$tmp/log$i"
    fi
  done
  [ "$failed" -eq 0 ] || fail "$failed of $n concurrent launches failed"
  echo "PASS: $n concurrent launches all succeeded"
}

"$case_"
