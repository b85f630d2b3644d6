#!/bin/bash
# test_cluster.sh SOURCE_DIR BUILD_DIR CASE — the emulated cluster
# (hpc/cluster.sh), one case per CTest test (label `cluster`):
#   up_down     up and down leave nothing behind; up is idempotent; bad input is refused
#   link_shaped both ends of each node's link are shaped to the rate asked (tbf), and the
#               link carries traffic, never more than 10% above that rate (iperf3, TCP)
#   link_rate   the link carries the rate asked, within 10%: a measurement of this
#               machine's speed, so labeled `timing`, out of the default suite
#   placement   ranks land on distinct hosts, ranks of one node share memory
#   same_weights  Chapter 3 trains across 2 nodes to the weights it reaches on one machine
#   link_fault  a node's link pulled mid-training: the job ends in bounded time, naming
#               rank and call; the checkpoint written before resumes to the same weights
#   node_fault  a node's processes killed mid-training: the same
#   slurm       `up --slurm`, a real SLURM on the nodes (slurmctld, a slurmd per node): the
#               2-node smoke test and Chapter 3 job scripts submitted and passing
# Exit 77 (CTest: skipped) with the reason where the machine cannot: not root,
# no network namespaces, or a cluster of the user's is up (it is left alone).
set -uo pipefail
source_dir=$1
build_dir=$2
case_name=$3
cluster=$source_dir/hpc/cluster.sh
solution=$build_dir/bin/solution
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)

skip() { echo "skipped: $*"; rm -rf "$work"; exit 77; }
fail() { echo "FAILED: $*"; exit 1; }
ok() { echo "ok: $*"; }

[ "$(id -u)" -eq 0 ] || skip "the emulated cluster needs root (network namespaces)"
[ ! -f /run/workbook-cluster/state ] || skip "an emulated cluster is up (workbook cluster status); the tests would take it down"
if ! ip netns add wbprobe$$ 2>/dev/null; then skip "this machine does not let root create network namespaces"; fi
ip netns delete wbprobe$$

# Whatever happens, the machine is left as it was.
cleanup() {
  "$cluster" down >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

# What `up` may leave behind, listed: must be empty after `down`.
leftovers() {
  ip netns list | grep -E '^(wbnode[0-9]+|wbswitch)' || true
  ip -br link | grep -E '^(wbport|wbeth)' || true
  ls -d /etc/netns/wbnode* /run/workbook-cluster 2>/dev/null || true
  pgrep -a -f "$cluster agent" || true
}

# expect_status STATUS PATTERN COMMAND...: exit STATUS and a line matching PATTERN.
expect_status() {
  local want=$1 pattern=$2 out status
  shift 2
  out=$("$@" 2>&1)
  status=$?
  [ "$status" -eq "$want" ] || fail "$*: exit $status, expected $want; said: $out"
  grep -Eq -- "$pattern" <<<"$out" || fail "$*: no line matches '$pattern'; said: $out"
  ok "$* -> $status: $(grep -E -m1 -- "$pattern" <<<"$out")"
}

# weights_of LOG: the weights' hash on ch03_train's result line.
weights_of() { sed -n 's/.*weights \([0-9a-f]*\).*/\1/p' "$1" | tail -1; }

# fault_case ACTION BOUND: ch03 on 2 nodes, checkpointing every epoch; when
# the first checkpoint exists, ACTION (a cluster.sh command) strikes. The job
# must end within BOUND seconds of the fault, with a rank naming its call.
fault_case() {
  local action=$1 bound=$2 end status elapsed
  "$cluster" up >/dev/null || fail "up"
  # A rank's call waits at most 4 s, less than mpirun takes to find the lost
  # daemon (about 6 s, Note [a dead link is found in seconds]): the rank
  # names its call itself, rather than racing mpirun's teardown to say it.
  local checkpoint=$work/ch03.pt train_args=(--train-samples 2000 --test-samples 1000 --threads 1 --comm-timeout 4)
  (
    for _ in $(seq 600); do [ -f "$checkpoint" ] && break; sleep 0.1; done
    # shellcheck disable=SC2086  # the action's words
    "$cluster" $action >/dev/null
    date +%s >"$work/fault_at"
  ) &
  timeout --kill-after=5 120 "$cluster" mpirun "$solution/ch03_train" --epochs 8 "${train_args[@]}" \
    --checkpoint "$checkpoint" >"$work/fault.log" 2>&1
  status=$?
  end=$(date +%s)
  wait
  [ -f "$work/fault_at" ] || fail "the job ended before the fault: exit $status; $(cat "$work/fault.log")"
  elapsed=$((end - $(cat "$work/fault_at")))
  [ "$status" -ne 0 ] || fail "the job survived '$action' (exit 0)"
  ((elapsed <= bound)) || fail "the job ended $elapsed s after '$action', more than $bound s: $(tail -5 "$work/fault.log")"
  # On a busy machine mpirun's teardown can still win the race, between two
  # calls: the rank then names the last call it made (a checkpoint's barrier too).
  grep -Eq "^rank [0-9]+ of 2: .*(all_reduce|broadcast|all_gather|barrier)" "$work/fault.log" ||
    fail "no line names a rank and its call: $(cat "$work/fault.log")"
  ok "'$action': exit $status $elapsed s after it: $(grep -E -m1 "^rank [0-9]+ of 2:" "$work/fault.log")"
  # A cut-off node's daemon learns it alone (Note [a dead link is found in seconds]).
  for _ in $(seq 40); do
    [ -z "$(ip netns pids wbnode1)$(ip netns pids wbnode2)" ] && break
    sleep 0.5
  done
  [ -z "$(ip netns pids wbnode1)$(ip netns pids wbnode2)" ] || fail "processes are left on the nodes: $("$cluster" status)"
  ok "no process is left on the nodes"

  # The checkpoint of epoch 1 was written atomically before: it resumes, and
  # training on to epoch 2 gives the weights of 2 epochs without the fault.
  "$cluster" link wbnode2 up >/dev/null
  "$cluster" mpirun "$solution/ch03_train" --epochs 2 "${train_args[@]}" --checkpoint "$checkpoint" --resume \
    >"$work/resumed.log" 2>&1 || fail "resuming failed: $(cat "$work/resumed.log")"
  grep -q "resumed after epoch 1" "$work/resumed.log" || fail "did not resume after epoch 1: $(cat "$work/resumed.log")"
  "$cluster" mpirun "$solution/ch03_train" --epochs 2 "${train_args[@]}" >"$work/straight.log" 2>&1 ||
    fail "2 epochs without a fault failed: $(cat "$work/straight.log")"
  [ "$(weights_of "$work/resumed.log")" = "$(weights_of "$work/straight.log")" ] ||
    fail "resumed weights $(weights_of "$work/resumed.log") differ from uninterrupted $(weights_of "$work/straight.log")"
  ok "resumed from the checkpoint to the uninterrupted weights $(weights_of "$work/straight.log")"
}

# One measurement of the link, RATE [SECONDS]: sets `line` (cluster.sh's)
# and `ratio` (measured / asked, 3 decimals).
measure_link() {
  line=$("$cluster" measure --seconds "${2:-3}") || fail "measure at $1"
  local asked measured
  asked=$(sed -n 's/.* = \([0-9]*\) bit\/s;.*/\1/p' <<<"$line")
  measured=$(sed -n 's/.*measured \([0-9]*\) bit\/s.*/\1/p' <<<"$line")
  ratio=$(python3 -c "print(f'{$measured / $asked:.3f}')")
}
# 1 when $1 > $2 (decimals).
above() { python3 -c "print(int($1 > $2))"; }

case $case_name in
  up_down)
    [ -z "$(leftovers)" ] || fail "leftovers before the test: $(leftovers)"
    expect_status 2 "an emulated cluster has 2 to 8 nodes" "$cluster" up --nodes 1
    expect_status 2 "give a rate such as" "$cluster" up --link fast
    expect_status 2 "give a rate such as" "$cluster" up --link 0kbit
    expect_status 2 "not up" "$cluster" mpirun true
    expect_status 2 "runs on the emulated cluster, which is not up" "$build_dir/workbook" run ch03 --solution --nodes 2
    expect_status 2 "excludes" "$build_dir/workbook" run ch03 --solution --nodes 2 --ranks 2
    if id nobody >/dev/null 2>&1; then
      expect_status 2 "needs root" setpriv --reuid=nobody --regid=nogroup --clear-groups "$cluster" up
    fi
    [ -z "$(leftovers)" ] || fail "refused input left: $(leftovers)"
    "$cluster" up --nodes 3 --link 200mbit || fail "up --nodes 3"
    "$cluster" up --nodes 3 --link 200mbit | grep -q "already up" || fail "a second up did not say 'already up'"
    "$cluster" up --nodes 3 --link 500mbit | grep -q "link changed to 500mbit" || fail "up with a new rate"
    expect_status 2 "the emulated cluster has 3 nodes" "$build_dir/workbook" run ch03 --solution --nodes 4
    expect_status 2 "a single-process chapter" "$build_dir/workbook" bench ch01 --nodes 2
    hosts=$(for k in 1 2 3; do "$cluster" exec "wbnode$k" hostname; done | sort -u | tr '\n' ' ')
    [ "$hosts" = "wbnode1 wbnode2 wbnode3 " ] || fail "hostnames on the nodes: '$hosts'"
    ok "3 nodes, 3 hostnames: $hosts"
    [ "$("$cluster" exec wbnode3 getent hosts wbnode1)" = "10.99.0.1       wbnode1" ] ||
      fail "wbnode3 does not know wbnode1 by name: $("$cluster" exec wbnode3 getent hosts wbnode1)"
    ok "wbnode3 knows wbnode1 as 10.99.0.1"
    "$cluster" status --json | python3 -c 'import json, sys; s = json.load(sys.stdin); sys.exit(0 if s["up"] and s["nodes"] == 3 and s["link_bits_per_s"] == 5e8 else s)' ||
      fail "status --json"
    ok "status --json: 3 nodes at 500mbit"
    "$cluster" exec wbnode2 sleep 600 &
    sleep 0.5
    [[ $("$cluster" status) == *"sleep x1"* ]] || fail "status does not show what runs on wbnode2: $("$cluster" status)"
    ok "status shows the program on wbnode2"
    "$cluster" down >/dev/null || fail "down"
    wait
    [ -z "$(leftovers)" ] || fail "down left: $(leftovers)"
    ok "down left nothing (namespaces, interfaces, /etc/netns, state, processes)"
    ;;
  link_shaped)
    # What holds however busy the machine is: the shaping is in place on both
    # ends, and the link carries traffic but never more than its rate.
    for rate in 100mbit 1gbit; do
      "$cluster" up --link "$rate" >/dev/null || fail "up --link $rate"
      shown=${rate/mbit/Mbit}; shown=${shown/gbit/Gbit}
      for node in 1 2; do
        ip netns exec "wbnode$node" tc qdisc show dev eth0 | grep -q "tbf .*rate $shown" ||
          fail "wbnode$node's eth0 is not shaped to $shown: $(ip netns exec "wbnode$node" tc qdisc show dev eth0)"
        ip netns exec wbswitch tc qdisc show dev "port$node" | grep -q "tbf .*rate $shown" ||
          fail "the switch's port$node is not shaped to $shown: $(ip netns exec wbswitch tc qdisc show dev "port$node")"
      done
      measure_link "$rate" 1  # what it carries, not how close to the rate: 1 s is enough
      echo "$rate: shaped on both ends; measured/asked = $ratio"
      [ "$(above "$ratio" 1.1)" = 0 ] || fail "$line: more than 10% above the rate: the shaping does not hold"
      [ "$(above "$ratio" 0)" = 1 ] || fail "$line: the link carried nothing"
    done
    ;;
  link_rate)
    # What the link can carry: the best of up to 3 measurements (a busy
    # machine only ever lowers one; none may exceed the rate by 10%).
    for rate in 100mbit 1gbit; do
      "$cluster" up --link "$rate" >/dev/null || fail "up --link $rate"
      for attempt in 1 2 3; do
        measure_link "$rate"
        echo "$rate, attempt $attempt: measured/asked = $ratio"
        [ "$(above "$ratio" 1.1)" = 0 ] || fail "$line: more than 10% above the rate"
        [ "$(above 0.9 "$ratio")" = 1 ] || break
        [ "$attempt" -lt 3 ] || fail "$line: 10% or more below the rate, 3 times"
      done
    done
    ;;
  placement)
    "$cluster" up >/dev/null || fail "up"
    "$cluster" mpirun --ranks-per-node 2 "$build_dir/bin/smoke_test" --bytes 65536 --iterations 2 >"$work/smoke.log" 2>&1 ||
      fail "smoke test on 2 nodes x 2 ranks: $(cat "$work/smoke.log")"
    grep -q "^smoke_test: 4 rank(s) on 2 node(s)" "$work/smoke.log" || fail "not 4 ranks on 2 nodes: $(cat "$work/smoke.log")"
    rows=$(awk '$1 ~ /^[0-3]$/ && $3 == 4 {print $1, $4, $(NF-1) == "memory" ? "shm" : $(NF-1)}' "$work/smoke.log" | tr '\n' ';')
    [ "$rows" = "0 wbnode1 shm;1 wbnode1 network;2 wbnode2 shm;3 wbnode2 network;" ] ||
      fail "ranks, hosts and links: '$rows' in $(cat "$work/smoke.log")"
    grep -q "OK on all 4 ranks" "$work/smoke.log" || fail "all-reduce not OK: $(cat "$work/smoke.log")"
    ok "ranks 0,1 on wbnode1 and 2,3 on wbnode2; shared memory within a node, the network between; all-reduce OK"
    ;;
  same_weights)
    "$cluster" up >/dev/null || fail "up"
    args=(--epochs 1 --train-samples 1000 --test-samples 200 --threads 1)
    "$cluster" mpirun "$solution/ch03_train" "${args[@]}" >"$work/nodes.log" 2>&1 || fail "on 2 nodes: $(cat "$work/nodes.log")"
    mpirun --oversubscribe -n 2 "$solution/ch03_train" "${args[@]}" >"$work/here.log" 2>&1 || fail "on one machine: $(cat "$work/here.log")"
    if [ -z "$(weights_of "$work/here.log")" ] || [ "$(weights_of "$work/nodes.log")" != "$(weights_of "$work/here.log")" ]; then
      fail "weights on 2 nodes $(weights_of "$work/nodes.log"), on one machine $(weights_of "$work/here.log")"
    fi
    ok "2 nodes x 1 rank and 2 ranks on one machine: weights $(weights_of "$work/here.log")"
    ;;
  hybrid_layouts)
    # Chapter 8 on 2 nodes x 2 ranks: tensor groups inside the nodes put the
    # data groups' traffic on the link, strided ones their own; the same
    # model trains either way.
    "$cluster" up >/dev/null || fail "up"
    for groups in consecutive strided; do
      "$cluster" mpirun --ranks-per-node 2 "$solution/ch08_train" --layout hybrid --tensor-ranks 2 \
        --tensor-groups $groups --epochs 1 --train-samples 1000 --test-samples 200 --threads 1 --json "$work/$groups.jsonl" \
        >"$work/$groups.log" 2>&1 || fail "ch08_train --tensor-groups $groups on 2 nodes: $(cat "$work/$groups.log")"
    done
    /usr/bin/python3 - "$work/consecutive.jsonl" "$work/strided.jsonl" <<'PY' || fail "$(cat "$work/consecutive.log" "$work/strided.log")"
import json, sys
consecutive, strided = ([json.loads(line) for line in open(f)][-1] for f in sys.argv[1:])
c, s = consecutive, strided  # the result line holds the chapter's details among its keys
assert c["tensor_group_one_node"] and not c["data_group_one_node"], f"consecutive tensor groups: {c}"
assert s["data_group_one_node"] and not s["tensor_group_one_node"], f"strided tensor groups: {s}"
assert c["link_bytes_per_step"] == c["data_group_bytes_per_step"] > 0, c
assert s["link_bytes_per_step"] == s["tensor_group_bytes_per_step"] > 0, s
assert consecutive["test_accuracy"] == strided["test_accuracy"], (consecutive["test_accuracy"], strided["test_accuracy"])
print(f"over the link per step: consecutive {c['link_bytes_per_step'] / 2**20:.2f} MiB (the data groups'), "
      f"strided {s['link_bytes_per_step'] / 2**20:.2f} MiB (the tensor groups'); test accuracy {strided['test_accuracy']} both")
PY
    ok "tensor groups inside nodes or across them, each group's bytes on the link as placed"
    ;;
  slurm)
    for tool in munged slurmctld slurmd sbatch; do
      command -v "$tool" >/dev/null || skip "$tool is not installed (./install-packages installs it)"
    done
    # shellcheck source=tests/hpc/job_checks.sh
    source "$source_dir/tests/hpc/job_checks.sh"
    # As an instructor brings it up: `down` (the EXIT trap) stops SLURM too.
    "$cluster" up --slurm >"$work/up.log" 2>&1 || fail "up --slurm: $(cat "$work/up.log")"
    ok "$(grep "SLURM up" "$work/up.log")"
    mkdir -p "$work/jobs"
    cd "$work/jobs" || fail "cd"
    slurm_client() { "$cluster" exec wbnode1 "$@"; }  # where slurmctld is, with its SLURM_CONF
    export WORKBOOK_ROOT=$source_dir WORKBOOK_SOURCE=$source_dir WORKBOOK_BUILD=$build_dir WORKBOOK_DEVICE=cpu
    id=$(sbatch_wait "$source_dir/hpc/slurm/smoke-2nodes.sbatch" --bytes 1048576) ||
      job_failed "smoke-2nodes.sbatch" "wb-smoke-$id.out" "wb-smoke-$id.err"
    out=wb-smoke-$id.out
    expect_line "$out" "^launch: starts the ranks with srun " "$out" "wb-smoke-$id.err"
    expect_line "$out" "^smoke_test: 4 rank\\(s\\) on 2 node\\(s\\), started by srun" "$out" "wb-smoke-$id.err"
    for row in "0 +0 +4 +wbnode1 .* shared memory" "1 +1 +4 +wbnode1 .* network" "2 +0 +4 +wbnode2 .* shared memory" \
      "3 +1 +4 +wbnode2 .* network"; do
      expect_line "$out" "^ +$row " "$out" "wb-smoke-$id.err"
    done
    expect_line "$out" "OK on all 4 ranks" "$out" "wb-smoke-$id.err"
    ok "smoke-2nodes.sbatch: OK on all 4 ranks, on wbnode1 and wbnode2, started by srun"
    id=$(sbatch_wait "$source_dir/hpc/slurm/ch03-2nodes.sbatch" --epochs 1 \
      --train-samples 1000 --test-samples 200 --json "$work/jobs/ch03.jsonl") || job_failed "ch03-2nodes.sbatch" "wb-ch03-$id.out" "wb-ch03-$id.err"
    check_training "wb-ch03-$id.out" "wb-ch03-$id.err" "$work/jobs/ch03.jsonl" 4
    ;;
  link_fault) fault_case "link wbnode2 down" 30 ;;
  node_fault) fault_case "kill wbnode2" 15 ;;
  *) fail "unknown case '$case_name'" ;;
esac
