#!/usr/bin/env bash
# Two "nodes" on one machine: network namespaces joined by a veth pair, each
# running `spmd-run --nnodes 2` with 2 workers (llama under Megatron TP at
# mesh 4). Checks that
#   1. the outputs match the model run on one device (--verify on node 0);
#   2. killing a worker of node 1 mid-run ends both nodes with a clean,
#      non-zero exit within 15 s, node 1 naming the dead rank;
#   3. killing every process of node 1 (launcher and workers) mid-run ends
#      node 0 with a non-zero exit and one "error: rank ..." line within
#      --timeout, leaving nothing behind.
# Needs root and iproute2; exits 77 (CTest's skip) with the reason otherwise.
#
#   tests/multinode/netns.sh build
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
spmdc="$build/tools/spmdc/spmdc"
run="$build/tools/spmd-run/spmd-run"

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root (run as root, as CI does)"
command -v ip >/dev/null || skip "no 'ip' command (Debian package iproute2)"

tag=$$
ns0="spmdn0_$tag" ns1="spmdn1_$tag"
tmp=$(mktemp -d)
cleanup() {
  for ns in "$ns0" "$ns1"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$ns0" 2>/dev/null || skip "cannot create network namespaces here (ip netns add failed)"
ip netns add "$ns1"
ip link add "v0_$tag" type veth peer name "v1_$tag"
ip link set "v0_$tag" netns "$ns0"
ip link set "v1_$tag" netns "$ns1"
ip -n "$ns0" addr add 10.213.0.1/24 dev "v0_$tag"
ip -n "$ns1" addr add 10.213.0.2/24 dev "v1_$tag"
for ns in "$ns0" "$ns1"; do ip -n "$ns" link set lo up; done
ip -n "$ns0" link set "v0_$tag" up
ip -n "$ns1" link set "v1_$tag" up

model=testdata/pt2/llama
"$spmdc" compile "$model/model.pt2" --schema schemas/examples/llama_tp.json --mesh 4 -o "$tmp/llama.spmd" -q
timeout=10
common=(--nnodes 2 --master-addr 10.213.0.1 --master-port 29517 --timeout "$timeout")

echo "== 1. llama, Megatron TP, 2 nodes x 2 workers: outputs against one device"
ip netns exec "$ns1" "$run" -n 2 "${common[@]}" --node-rank 1 "$tmp/llama.spmd" \
  --inputs "$model/inputs.safetensors" >"$tmp/n1.out" 2>"$tmp/n1.err" &
n1=$!
ip netns exec "$ns0" "$run" -n 2 "${common[@]}" --node-rank 0 "$tmp/llama.spmd" \
  --inputs "$model/inputs.safetensors" --output "$tmp/out.safetensors" --verify "$model/model.pt2" \
  >"$tmp/n0.out" 2>"$tmp/n0.err" || { cat "$tmp/n0.out" "$tmp/n0.err"; echo "FAIL: node 0"; exit 1; }
wait "$n1" || { cat "$tmp/n1.out" "$tmp/n1.err"; echo "FAIL: node 1"; exit 1; }
cat "$tmp/n0.out"
grep -Eq "^verify output.0 .* ok$" "$tmp/n0.out" || { echo "FAIL: node 0 did not verify the outputs"; exit 1; }

# Starts both nodes on a long run ($1: the files' prefix); sets n0, n1 (the
# launchers) and workers (node 1's worker pids, once they have run a moment).
start_long_run() {
  ip netns exec "$ns1" "$run" -n 2 "${common[@]}" --node-rank 1 "$tmp/llama.spmd" \
    --inputs "$model/inputs.safetensors" --repeat 1000000 >"$tmp/$1.1.out" 2>"$tmp/$1.1.err" &
  n1=$!
  ip netns exec "$ns0" "$run" -n 2 "${common[@]}" --node-rank 0 "$tmp/llama.spmd" \
    --inputs "$model/inputs.safetensors" --repeat 1000000 >"$tmp/$1.0.out" 2>"$tmp/$1.0.err" &
  n0=$!
  for _ in $(seq 100); do
    workers=$(ip netns pids "$ns1" | grep -vx "$n1" || true)
    [ "$(echo "$workers" | grep -c .)" -ge 2 ] && break
    sleep 0.1
  done
  sleep 3
  [ -n "$workers" ] || { echo "FAIL: node 1's workers never started"; cat "$tmp/$1.1.err"; exit 1; }
}

# Fails when either node's stderr shows a crash instead of a clean error.
check_clean() {
  if grep -Eq "terminate called|Aborted|Segmentation|core dumped" "$@"; then
    echo "FAIL: an unclean exit"; cat "$@"; exit 1
  fi
}

echo "== 2. SIGKILL of a node-1 worker mid-run: both nodes exit non-zero within 15 s"
start_long_run k
kill -9 "$(echo "$workers" | head -n 1)"
start=$(date +%s)
status0=0 status1=0
wait "$n1" || status1=$?
wait "$n0" || status0=$?
elapsed=$(( $(date +%s) - start ))
echo "node 0 exit $status0, node 1 exit $status1, after ${elapsed} s"
echo "node 0: $(tail -n 1 "$tmp/k.0.err")"
echo "node 1: $(tail -n 1 "$tmp/k.1.err")"
[ "$status0" -ne 0 ] && [ "$status1" -ne 0 ] || { echo "FAIL: a node exited 0 after losing a peer"; exit 1; }
[ "$elapsed" -le 15 ] || { echo "FAIL: took ${elapsed} s to exit"; exit 1; }
grep -q "rank [23]" "$tmp/k.1.err" || { echo "FAIL: node 1 does not name the dead rank"; cat "$tmp/k.1.err"; exit 1; }
check_clean "$tmp/k.0.err" "$tmp/k.1.err"

# After node 1 lost every process: node 0 must end non-zero within
# --timeout + $2 seconds, with one error line, leaving nothing behind.
# $1: the run's name (start_long_run's).
expect_node0_ends() {
  local name=$1 slack=$2 start status0=0 elapsed last
  kill -9 $(ip netns pids "$ns1")
  start=$(date +%s)
  wait "$n1" 2>/dev/null || true
  wait "$n0" || status0=$?
  elapsed=$(( $(date +%s) - start ))
  last=$(tail -n 1 "$tmp/$name.0.err")
  echo "node 0 exit $status0 after ${elapsed} s: $last"
  [ "$status0" -ne 0 ] || { echo "FAIL: node 0 exited 0 after losing node 1"; exit 1; }
  [ "$elapsed" -le $((timeout + slack)) ] || { echo "FAIL: node 0 took ${elapsed} s (--timeout $timeout)"; exit 1; }
  [[ "$last" == "error: rank "* ]] || { echo "FAIL: node 0 did not end with one error line"; cat "$tmp/$name.0.err"; exit 1; }
  check_clean "$tmp/$name.0.err"
  [ -z "$(ip netns pids "$ns0")" ] || { echo "FAIL: node 0 left processes behind"; exit 1; }
}

echo "== 3. every process of node 1 killed mid-run: node 0 ends with one clean error within --timeout"
start_long_run a
# The launcher and its workers at once, as when a node's job is hard-killed.
expect_node0_ends a 3
echo "== 4. node 1 drops off the network, then dies: node 0 ends within --timeout"
start_long_run d
# No FIN or RST reaches node 0 now (a power cut, a pulled cable): only the timeout can end its wait.
ip -n "$ns1" link set "v1_$tag" down
expect_node0_ends d 5
echo "PASS"
