#!/bin/bash
# shellcheck disable=SC2015,SC2016  # `a && b || fail` is meant; sh -c scripts expand in the node
# cluster.sh — an emulated cluster on one machine: N nodes, each a network
# namespace with its own hostname, joined through a switch by links shaped to
# a rate. `workbook cluster` runs it; so can an instructor, as root.
#
#   hpc/cluster.sh up [--nodes N] [--link RATE] [--slurm]   create it (N: 2-8, default 2; RATE: 1gbit);
#                                                 --slurm: with a SLURM across the nodes
#   hpc/cluster.sh down                           remove exactly what `up` created
#   hpc/cluster.sh status [--json]                nodes, addresses, link, what runs there
#   hpc/cluster.sh measure [--seconds S]          the link's rate, measured (iperf3, node2 -> node1, S = 3)
#   hpc/cluster.sh exec NODE COMMAND [ARGS...]    run a command on a node
#   hpc/cluster.sh mpirun [--nodes N] [--ranks-per-node R] PROGRAM [ARGS...]   the program on the nodes
#   hpc/cluster.sh link NODE up|down              take a node's link down (a network fault) or back
#   hpc/cluster.sh kill NODE                      kill every process on a node (a node fault)
#
#          wbnode1                 wbswitch                 wbnode2
#   +------------------+    +--------------------+    +------------------+
#   | eth0 10.99.0.1   |====| port1  br0  port2  |====| eth0 10.99.0.2   |
#   | tbf RATE out     |    | tbf RATE out each  |    | tbf RATE out     |
#   +------------------+    +--------------------+    +------------------+
#
# Note: [one shaped link per node]
# Each node has one link to a switch, shaped to RATE in both directions: tbf
# on the node's side (what it sends) and on the switch's side (what it
# receives), like a node's network card on a real cluster. A message from
# node1 to node2 crosses two shapers at RATE, so it gets RATE; node1 sending
# to two nodes at once shares its one link, as on a real cluster. tbf's
# bucket holds 0.25 ms at RATE, never less than 64 KiB (one segment veth may
# hand it at once), and its queue 10 ms. The bucket is the one setting that
# matters: it refills while a rank computes, and then lets that much through
# at no rate at all. With 4 ms, a 16 MiB all-reduce "reached" 1.01x a
# 10 Gbit/s link; with 64 KiB, TCP reached only 3.5 Gbit/s of it (the timer
# cannot release tokens that often). 0.25 ms: TCP reaches 0.95 of 1 Gbit/s
# and 0.90 of 10 Gbit/s (iperf3), and a burst is at most 4% of an 8 MiB message.
#
# Note: [jumbo frames]
# The emulated network's packets are handled by the cores that also compute:
# the kernel's work for each packet (veth, bridge, tbf, TCP) is what a real
# node's network card does in hardware. With Ethernet's 1500-byte frames,
# iperf3 sending both ways at once at 1 Gbit/s took 69% of this 2-core
# machine in softirq and carried only 0.62 and 0.56 of the link (thousands
# of retransmissions), and Chapter 4's overlap hid nothing (-0.06 at a
# global batch of 200): backward and the packets fought for the same cores.
# With 9000-byte frames (jumbo frames, as cluster networks commonly use)
# iperf3 carried 0.98 both ways with the cores 90% idle, the ring 0.97-0.98
# of the link, and overlap hid 0.30 at a global batch of 200 and about 0.4
# at 400 (0.49-0.54 once the exchange's waits sleep longer: Note [waiting
# without taking a core] in common/src/communicator_mpi.cpp).
#
# Note: [how Open MPI sees the nodes]
# mpirun runs on node1; it starts its daemon on every other node through the
# launch agent `cluster.sh agent NODE ...`, which enters that node's
# namespaces the way ssh would enter a host. Open MPI treats hosts with equal
# names (up to the first dot) as one node and then uses shared memory between
# them, so every node has its own hostname and its own /etc/hosts (Note
# [entering a node]). Ranks on
# one node use shared memory (vader), ranks on two nodes TCP over the link
# only (btl_tcp_if_include and oob_tcp_if_include name the cluster's subnet).
# Every node believes it has all the machine's cores, so Open MPI would bind
# each node's first rank to core 0: the ranks of two nodes on one core, half
# the speed. The emulated nodes share the cores, so ranks are not bound.
#
# Note: [a dead link is found in seconds]
# When a node's link goes down, the ranks' watchdogs end them (every
# collective has a deadline), but mpirun must also learn that the node's
# daemon is gone, over a TCP connection that now carries nothing: Linux's
# defaults take 15 minutes of retransmissions (tcp_retries2=15) or 2 hours
# of silence (keepalive) to say so. Each node's namespace has its own TCP
# settings, and the cluster's are those of a cluster that wants a dead node
# found quickly: 5 retransmissions (about 13 s), keepalive probes after 5 s
# idle, 1 s apart, 3 of them; Open MPI's own connections are told the same
# (oob_tcp_keepalive_*). A job whose node is cut off ends 10 to 20 s later
# (20 s on a 2-core EPYC, 2026-11-29: a rank ends after 4 s, mpirun later).
#
# Everything `up` creates is recorded in /run/workbook-cluster, and `down`
# removes exactly that: the namespaces (and with them every interface and
# qdisc), the processes still in them, /etc/netns/wbnode*, the state folder.
# An `up` that fails half-way undoes itself.
set -euo pipefail

readonly state_dir=/run/workbook-cluster
readonly subnet_prefix=10.99.0
readonly subnet="$subnet_prefix.0/24"
readonly switch_ns=wbswitch
readonly frame_bytes=9000  # the links' MTU: Note [jumbo frames]
readonly max_nodes=8
script=$(readlink -f "${BASH_SOURCE[0]}")
readonly script

say() { echo "cluster: $*"; }
fail() { echo "cluster: $*" >&2; exit 2; }
node_name() { echo "wbnode$1"; }
node_address() { echo "$subnet_prefix.$1"; }

usage() {
  echo "usage:"
  sed -n '/^#   hpc\/cluster.sh up/,/^#   hpc\/cluster.sh kill/p' "$script" | sed 's/^# \{0,1\}//'
}

# ---- what the machine must allow -----------------------------------------------
need_root() {
  [ "$(id -u)" -eq 0 ] && return 0
  fail "the emulated cluster creates network namespaces, which needs root: run it as root (sudo workbook cluster $1). \
Unprivileged user namespaces cannot create the named namespaces that Open MPI's launch agent enters."
}

need_tools() {
  local tool
  for tool in ip tc unshare; do
    command -v "$tool" >/dev/null || fail "'$tool' is missing: install Debian's iproute2 and util-linux (./install-packages)"
  done
}

# ---- rates ---------------------------------------------------------------------
# "1gbit" -> 1000000000. tc's own units (kbit, mbit, gbit; decimal), integers.
rate_bits() {
  local rate=$1
  [[ $rate =~ ^([1-9][0-9]*)(kbit|mbit|gbit)$ ]] ||
    fail "--link '$rate': give a rate such as 100mbit, 1gbit or 10gbit (a whole number and kbit, mbit or gbit)"
  local scale=1000
  case ${BASH_REMATCH[2]} in mbit) scale=1000000 ;; gbit) scale=1000000000 ;; esac
  echo $((BASH_REMATCH[1] * scale))
}

# tbf on DEV (in namespace NS) at RATE: Note [one shaped link per node].
shape() {
  local ns=$1 dev=$2 rate=$3 bits burst
  bits=$(rate_bits "$rate")
  burst=$((bits / 8 / 4000))  # 0.25 ms at the rate
  ((burst >= 65536)) || burst=65536
  ip -n "$ns" link set dev "$dev" gso_max_size 65536 2>/dev/null || true
  ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency 10ms
}

# Both directions of node K's link: Note [one shaped link per node].
shape_link() {
  shape "$(node_name "$1")" eth0 "$2"
  shape "$switch_ns" "port$1" "$2"
}

# ---- state -----------------------------------------------------------------------
state_get() { sed -n "s/^$1=//p" "$state_dir/state" 2>/dev/null; }
is_up() { [ -f "$state_dir/state" ]; }

# ---- up ------------------------------------------------------------------------
cmd_up() {
  local nodes=2 link=1gbit with_slurm=0
  while [ $# -gt 0 ]; do
    case $1 in
      --nodes) [ $# -ge 2 ] || fail "--nodes needs a number"; nodes=$2; shift 2 ;;
      --link) [ $# -ge 2 ] || fail "--link needs a rate (e.g. 1gbit)"; link=$2; shift 2 ;;
      --slurm) with_slurm=1; shift ;;
      *) fail "up: unknown argument '$1' (up [--nodes N] [--link RATE] [--slurm])" ;;
    esac
  done
  [[ $nodes =~ ^[0-9]+$ ]] && ((nodes >= 2 && nodes <= max_nodes)) ||
    fail "--nodes $nodes: an emulated cluster has 2 to $max_nodes nodes"
  rate_bits "$link" >/dev/null
  need_root "up"
  need_tools

  if is_up; then
    if [ "$(state_get nodes)" = "$nodes" ]; then
      if [ "$(state_get link)" != "$link" ]; then
        local k
        for ((k = 1; k <= nodes; ++k)); do shape_link "$k" "$link"; done
        sed -i "s/^link=.*/link=$link/" "$state_dir/state"
        say "link changed to $link"
      else
        say "already up: $nodes nodes, $link links"
      fi
      ((!with_slurm)) || start_slurm
      return 0
    fi
    say "up with $(state_get nodes) nodes: taking it down first"
    cmd_down
  fi
  # Leftovers of a cluster whose state was lost (a reboot keeps /etc/netns).
  ip netns list | grep -qE "^(wbnode[0-9]+|$switch_ns)( |$)" &&
    fail "namespaces named wbnode*/$switch_ns exist but no $state_dir/state: run 'workbook cluster down' first"

  mkdir -p "$state_dir"
  # Whatever ends `up` before it is done (a failed command, even inside a
  # function, or fail's exit) undoes what it created.
  trap 'echo "cluster: up failed; undoing what it created" >&2; cmd_down >/dev/null 2>&1 || true' EXIT
  printf 'nodes=%s\nlink=%s\nsubnet=%s\n' "$nodes" "$link" "$subnet" >"$state_dir/state.partial"
  mv "$state_dir/state.partial" "$state_dir/state"

  if ! ip netns add "$switch_ns" 2>"$state_dir/error"; then
    local why
    why=$(cat "$state_dir/error")
    fail "this machine does not let root create network namespaces (ip netns add: $why). A container needs --privileged or CAP_SYS_ADMIN and CAP_NET_ADMIN."
  fi
  ip -n "$switch_ns" link add br0 mtu "$frame_bytes" type bridge  # Note [jumbo frames]
  ip -n "$switch_ns" link set br0 up
  ip -n "$switch_ns" link set lo up

  local k node hosts="127.0.0.1 localhost"$'\n'
  for ((k = 1; k <= nodes; ++k)); do hosts+="$(node_address "$k") $(node_name "$k")"$'\n'; done
  : >"$state_dir/hostfile"
  for ((k = 1; k <= nodes; ++k)); do
    node=$(node_name "$k")
    ip netns add "$node"
    ip -n "$node" link set lo up
    ip link add "wbport$k" mtu "$frame_bytes" type veth peer name "wbeth$k" mtu "$frame_bytes"
    ip link set "wbport$k" netns "$switch_ns"
    ip link set "wbeth$k" netns "$node"
    ip -n "$switch_ns" link set "wbport$k" name "port$k"
    ip -n "$node" link set "wbeth$k" name eth0
    ip -n "$switch_ns" link set "port$k" master br0 up
    ip -n "$node" addr add "$(node_address "$k")/24" dev eth0
    ip -n "$node" link set eth0 up
    shape_link "$k" "$link"
    # Note [a dead link is found in seconds]
    ip netns exec "$node" sysctl -qw net.ipv4.tcp_retries2=5 net.ipv4.tcp_keepalive_time=5 \
      net.ipv4.tcp_keepalive_intvl=1 net.ipv4.tcp_keepalive_probes=3
    mkdir -p "/etc/netns/$node"
    printf '%s' "$hosts" >"/etc/netns/$node/hosts"
    echo "$node" >"/etc/netns/$node/hostname"
    echo "$node" >>"$state_dir/hostfile"
  done
  trap - EXIT
  say "up: $nodes nodes (wbnode1-wbnode$nodes, $subnet), each linked at $link"
  ((!with_slurm)) || start_slurm
}

# A real SLURM across the nodes (hpc/slurm_cluster.sh, Note [one slurmd per
# emulated node]): slurmctld on wbnode1, a slurmd on every node. Jobs are
# submitted on a node: `workbook cluster exec wbnode1 sbatch ...`.
start_slurm() {
  if [ -f "$state_dir/slurm/slurm.conf" ]; then
    say "SLURM is already up on the nodes"
    return 0
  fi
  local tool
  for tool in munged slurmctld slurmd sbatch; do
    command -v "$tool" >/dev/null || fail "--slurm: '$tool' is missing (./install-packages installs Debian's slurm-wlm and munge)"
  done
  # shellcheck source=hpc/slurm_cluster.sh
  source "$(dirname "$script")/slurm_cluster.sh"
  mkdir -p "$state_dir/slurm"
  if ! slurm_cluster_start "$state_dir/slurm" "$script" >&2; then
    slurm_cluster_stop "$state_dir/slurm"
    rm -rf "$state_dir/slurm"
    fail "SLURM did not start on the nodes (the cluster stays up without it)"
  fi
  say "SLURM up: $(slurm_client sinfo -h -N -o '%N %t' | tr '\n' ' ')"
  say "submit on a node, from the workbook's folder: workbook cluster exec wbnode1 sbatch hpc/slurm/smoke-2nodes.sbatch"
}

# ---- down ----------------------------------------------------------------------
cmd_down() {
  need_root "down"
  local ns pids
  if [ -f "$state_dir/slurm/slurm.conf" ]; then
    # shellcheck source=hpc/slurm_cluster.sh
    source "$(dirname "$script")/slurm_cluster.sh"
    SLURM_CLUSTER_EXEC="$script exec wbnode1" slurm_cluster_stop "$state_dir/slurm" >/dev/null 2>&1 || true
  fi
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^(wbnode[0-9]+|$switch_ns)$" || true); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [ -n "$pids" ]; then
      # shellcheck disable=SC2086  # one pid per word
      kill -TERM $pids 2>/dev/null || true
      sleep 0.5
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
    fi
    ip netns delete "$ns"
  done
  rm -rf /etc/netns/wbnode[0-9]* "$state_dir"
  say "down"
}

# ---- status --------------------------------------------------------------------
cmd_status() {
  local json=0
  [ "${1:-}" = "--json" ] && json=1
  if ! is_up; then
    if ((json)); then echo '{"up": false}'; else say "not up (workbook cluster up [--nodes N] [--link RATE])"; fi
    return 0
  fi
  local nodes link k node programs
  nodes=$(state_get nodes)
  link=$(state_get link)
  if ((json)); then
    printf '{"up": true, "nodes": %s, "link": "%s", "link_bits_per_s": %s, "subnet": "%s", "hosts": [' \
      "$nodes" "$link" "$(rate_bits "$link")" "$subnet"
    for ((k = 1; k <= nodes; ++k)); do
      ((k == 1)) || printf ', '
      printf '{"name": "%s", "address": "%s"}' "$(node_name "$k")" "$(node_address "$k")"
    done
    printf ']}\n'
    return 0
  fi
  say "up: $nodes nodes, each linked to the switch at $link in both directions ($subnet)"
  printf '  %-8s %-11s %-5s %s\n' node address link "running"
  for ((k = 1; k <= nodes; ++k)); do
    node=$(node_name "$k")
    programs=$(ip netns pids "$node" 2>/dev/null | xargs -r ps -o comm= -p 2>/dev/null | sort | uniq -c |
      awk '{printf "%s%s x%s", sep, $2, $1; sep=", "}')
    printf '  %-8s %-11s %-5s %s\n' "$node" "$(node_address "$k")" \
      "$(ip -n "$node" -br link show eth0 2>/dev/null | awk '{print ($2 ~ /UP/) ? "up" : "DOWN"}')" "${programs:--}"
  done
}

# ---- running on the nodes -------------------------------------------------------
need_up() { is_up || fail "the emulated cluster is not up: run 'workbook cluster up' first"; }

check_node() {
  local k=${1#wbnode}
  [[ $k =~ ^[0-9]+$ ]] && ((k >= 1 && k <= $(state_get nodes))) ||
    fail "no node '$1' (the cluster has wbnode1-wbnode$(state_get nodes))"
}

# Note: [entering a node]
# A node is its network namespace, its hostname (a UTS namespace of its own)
# and its /etc/hosts (bound over the machine's in a mount namespace of its
# own, private: nothing leaks out). Not `ip netns exec`: it also remounts
# /sys, which hides /sys/fs/cgroup, and slurmd will not start without it.
# $0 is the node's name in this shell snippet.
readonly enter_node='mount --bind "/etc/netns/$0/hosts" /etc/hosts && hostname "$0"'

# Note: [Open MPI 4 and 5] Open MPI 5 hands starting the ranks to PRRTE,
# which reads its own variables (PRTE_MCA_*) under its own names: the launch
# agent is plm_ssh_agent, binding hwloc_default_binding_policy; the out-of-band
# channel's oob_tcp_* keep their names. The BTLs stay Open MPI's (OMPI_MCA_*),
# and 5 still takes vader as the old name of its shared-memory BTL, sm. Both
# generations' variables are set: each ignores the other's.
#
# Note: [Open MPI's TCP without put]
# By default Open MPI's TCP transport sends a large message as an emulated
# RDMA put (its flag `put`). On the cluster's 1 Gbit/s link (2 nodes, 16 and
# 64 MiB) Chapter 4's ring and MPI_Allreduce both carried 0.56-0.64 of the
# link so; without put, 0.97-0.98 (the ring 0.88-0.92 and MPI_Allreduce
# 0.67-0.68 with 1500-byte frames). Only put is left out (and hetero-rdma,
# which qualifies it): with `inplace` or without it the figures were the
# same. Both Open MPI generations name the flags so.
export_openmpi_settings() {
  export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=$subnet \
    OMPI_MCA_btl_tcp_flags=send,inplace,need-ack,need-csum
  local prefix
  for prefix in OMPI_MCA PRTE_MCA; do
    export "${prefix}_oob_tcp_keepalive_time=5" "${prefix}_oob_tcp_keepalive_intvl=1" \
      "${prefix}_oob_tcp_keepalive_probes=3"
  done
  # Open MPI 4
  export OMPI_MCA_plm_rsh_agent="$script agent" OMPI_MCA_hwloc_base_binding_policy=none \
    OMPI_MCA_oob_tcp_if_include=$subnet
  # Open MPI 5 (PRRTE 3 takes an interface's name there, not a subnet: every node's is eth0)
  export PRTE_MCA_plm_ssh_agent="$script agent" PRTE_MCA_hwloc_default_binding_policy=none \
    PRTE_MCA_oob_tcp_if_include=eth0
}

# exec NODE COMMAND...: the command in NODE's network namespace, with its
# hostname (a UTS namespace of its own), its /etc/hosts, and Open MPI told
# how to reach the other nodes (Note [how Open MPI sees the nodes]) through
# OMPI_MCA_* variables, so that any mpirun started there (hpc/launch.sh's,
# a SLURM job's) uses the cluster's network.
cmd_exec() {
  [ $# -ge 2 ] || fail "exec NODE COMMAND [ARGS...]"
  need_up
  check_node "$1"
  local node=$1
  shift
  export_openmpi_settings
  [ ! -f "$state_dir/slurm/slurm.conf" ] || export SLURM_CONF="$state_dir/slurm/slurm.conf"
  exec nsenter --net="/run/netns/$node" unshare --uts --mount -- sh -c "$enter_node"' && exec "$@"' "$node" "$@"
}

# agent NODE WORDS...: Open MPI's launch agent (plm_rsh_agent). Like ssh, it
# joins the words into one command line for the node's shell.
cmd_agent() {
  [ $# -ge 2 ] || fail "agent NODE COMMAND"
  local node=$1
  shift
  exec nsenter --net="/run/netns/$node" unshare --uts --mount -- sh -c "$enter_node"' && exec sh -c "$1"' "$node" "$*"
}

# mpirun [--nodes N] [--ranks-per-node R] [--] ARGS...: mpirun on wbnode1 with
# R ranks on each of the first N nodes (default: every node, 1 rank each),
# rank r on node r / R + 1, as a batch scheduler places them.
cmd_mpirun() {
  need_up
  local nodes per_node=1 k
  nodes=$(state_get nodes)
  while [ $# -gt 0 ]; do
    case $1 in
      --nodes) [ $# -ge 2 ] || fail "--nodes needs a number"; nodes=$2; shift 2 ;;
      --ranks-per-node) [ $# -ge 2 ] || fail "--ranks-per-node needs a number"; per_node=$2; shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  [ $# -ge 1 ] || fail "mpirun [--nodes N] [--ranks-per-node R] [--] PROGRAM [ARGS...]"
  [[ $nodes =~ ^[0-9]+$ ]] && ((nodes >= 1)) || fail "--nodes $nodes: give a positive number"
  ((nodes <= $(state_get nodes))) ||
    fail "--nodes $nodes: the emulated cluster has $(state_get nodes) nodes (workbook cluster up --nodes $nodes)"
  [[ $per_node =~ ^[0-9]+$ ]] && ((per_node >= 1)) || fail "--ranks-per-node $per_node: give a positive number"
  local hosts=()
  for ((k = 1; k <= nodes; ++k)); do hosts+=("$(node_name "$k"):$per_node"); done
  # Note: [the nodes share the machine's cores] Open MPI's ranks poll while
  # they wait, and give the core up between polls only when Open MPI knows
  # that a node is oversubscribed (mpi_yield_when_idle). It sees each node's
  # slots above, not that every node runs on this machine's cores. With more
  # ranks than cores, a waiting rank then held a core a computing one needed,
  # and a message's receiver ran only at the scheduler's next tick (4 ms at
  # 250 Hz). On 4 nodes at 1 Gbit/s (2 cores), Open MPI's ring all-reduce of
  # 4 bytes took 8.0 ms without it and 0.15 ms with it; of 4 MiB, 98 and 63
  # ms. So with more ranks than cores it is told, unless the caller chose.
  if ((nodes * per_node > $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc))) && [ -z "${OMPI_MCA_mpi_yield_when_idle:-}" ]; then
    export OMPI_MCA_mpi_yield_when_idle=1
  fi
  cmd_exec wbnode1 mpirun --host "$(IFS=,; echo "${hosts[*]}")" -n $((nodes * per_node)) "$@"
}

# link NODE up|down: a node's cable pulled out, or put back.
cmd_link() {
  [ $# -eq 2 ] && [[ $2 == up || $2 == down ]] || fail "link NODE up|down"
  need_root "link"
  need_up
  check_node "$1"
  ip -n "$1" link set eth0 "$2"
  say "$1: link $2"
}

# kill NODE: every process on a node killed at once (the node failed).
cmd_kill() {
  [ $# -eq 1 ] || fail "kill NODE"
  need_root "kill"
  need_up
  check_node "$1"
  local pids
  pids=$(ip netns pids "$1")
  # shellcheck disable=SC2086
  [ -z "$pids" ] || kill -KILL $pids
  say "$1: killed $(echo "$pids" | wc -w) process(es)"
}

# measure [--seconds S]: iperf3 from node2 to node1 for S seconds (3),
# after 1 s not counted (TCP's slow start, the bucket's first burst);
# prints the measured rate.
cmd_measure() {
  local seconds=3
  case "${1:-}" in
    "") ;;
    --seconds) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || fail "--seconds takes a whole number of seconds, got '${2:-}'"
      seconds=$2 ;;
    *) fail "measure takes --seconds S, got '$1'" ;;
  esac
  need_root "measure"
  need_up
  command -v iperf3 >/dev/null || fail "'iperf3' is missing: ./install-packages installs it"
  local server out bits
  ip netns exec wbnode1 iperf3 --server --one-off --bind "$(node_address 1)" >/dev/null 2>&1 &
  server=$!
  sleep 0.3
  out=$(ip netns exec wbnode2 iperf3 --client "$(node_address 1)" --time "$seconds" --omit 1 --json) || {
    kill "$server" 2>/dev/null || true
    fail "iperf3 from wbnode2 to wbnode1 failed"
  }
  wait "$server" 2>/dev/null || true
  bits=$(python3 -c 'import json,sys; print(int(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]))' <<<"$out")
  echo "link: asked $(state_get link) = $(rate_bits "$(state_get link)") bit/s; measured $bits bit/s (TCP, wbnode2 -> wbnode1)"
}

command=${1:-}
[ -n "$command" ] || { usage; exit 2; }
shift
case $command in
  up) cmd_up "$@" ;;
  down) [ $# -eq 0 ] || fail "down takes no arguments"; cmd_down ;;
  status) cmd_status "$@" ;;
  measure) cmd_measure "$@" ;;
  exec) need_root "exec"; cmd_exec "$@" ;;
  agent) cmd_agent "$@" ;;
  mpirun) need_root "mpirun"; cmd_mpirun "$@" ;;
  link) cmd_link "$@" ;;
  kill) cmd_kill "$@" ;;
  -h | --help | help) usage ;;
  *) fail "unknown command '$command' (up, down, status, measure, exec, mpirun, link, kill)" ;;
esac
