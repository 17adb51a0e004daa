#!/usr/bin/env bash
# Two "nodes" on one machine: network namespaces joined by a veth pair, each
# running `spmd-run --nnodes 2` with 2 workers (llama under Megatron TP at
# mesh 4). Checks that
#   1. the outputs match the model run on one device (--verify on node 0);
#   2. killing a worker of node 1 mid-run ends both nodes with a clean,
#      non-zero exit within 15 s, node 1 naming the dead rank.
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
common=(--nnodes 2 --master-addr 10.213.0.1 --master-port 29517 --timeout 10)

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

echo "== 2. SIGKILL of a node-1 worker mid-run: both nodes exit non-zero within 15 s"
ip netns exec "$ns1" "$run" -n 2 "${common[@]}" --node-rank 1 "$tmp/llama.spmd" \
  --inputs "$model/inputs.safetensors" --repeat 1000000 >"$tmp/k1.out" 2>"$tmp/k1.err" &
n1=$!
ip netns exec "$ns0" "$run" -n 2 "${common[@]}" --node-rank 0 "$tmp/llama.spmd" \
  --inputs "$model/inputs.safetensors" --repeat 1000000 >"$tmp/k0.out" 2>"$tmp/k0.err" &
n0=$!
# Wait until node 1's two workers exist and have run for a moment.
for _ in $(seq 100); do
  workers=$(ip netns pids "$ns1" | grep -vx "$n1" || true)
  [ "$(echo "$workers" | grep -c .)" -ge 2 ] && break
  sleep 0.1
done
sleep 3
victim=$(echo "$workers" | head -n 1)
[ -n "$victim" ] || { echo "FAIL: node 1's workers never started"; cat "$tmp/k1.err"; exit 1; }
kill -9 "$victim"
start=$(date +%s)
status0=0 status1=0
wait "$n1" || status1=$?
wait "$n0" || status0=$?
elapsed=$(( $(date +%s) - start ))
echo "node 0 exit $status0, node 1 exit $status1, after ${elapsed} s"
echo "node 0: $(tail -n 1 "$tmp/k0.err")"
echo "node 1: $(tail -n 1 "$tmp/k1.err")"
[ "$status0" -ne 0 ] && [ "$status1" -ne 0 ] || { echo "FAIL: a node exited 0 after losing a peer"; exit 1; }
[ "$elapsed" -le 15 ] || { echo "FAIL: took ${elapsed} s to exit"; exit 1; }
grep -q "rank [23]" "$tmp/k1.err" || { echo "FAIL: node 1 does not name the dead rank"; cat "$tmp/k1.err"; exit 1; }
if grep -Eq "terminate called|Aborted|Segmentation|core dumped" "$tmp/k0.err" "$tmp/k1.err"; then
  echo "FAIL: an unclean exit"; cat "$tmp/k0.err" "$tmp/k1.err"; exit 1
fi
echo "PASS"
