#!/bin/bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#
# Several hosts on one machine, for running jobs across a real network:
# each host is a Linux network namespace with one interface on a bridge
# (the "switch", itself in a namespace of its own), its own address
# (10.251.0.1 for host 0, 10.251.0.2 for host 1, ...) and its own link
# rate (a tbf qdisc on both directions of its link). Every address exists
# only inside these namespaces: nothing is configured in the machine's own
# namespace, and nothing is sent to an address outside them. Open MPI runs
# across them as it runs across nodes: a hostfile of the hosts' addresses
# and an rsh agent that runs the command in the host's namespace instead of
# through ssh. Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2
# and tc.
#
#   hosts.sh check                 exit 0 if namespaces can be made here;
#                                  otherwise say why and exit 2
#   hosts.sh up DIR N [RATE...]    make N hosts; RATE per host, as tc
#                                  spells it (1gbit, 100mbit, 10mbit), or
#                                  "none" or "veth" (the veth's own speed,
#                                  no limit); the last
#                                  RATE given holds for the hosts after it
#   hosts.sh down DIR              end every process in the hosts and
#                                  remove them
#   hosts.sh exec DIR HOST CMD...  run CMD in host HOST (0, 1, ...)
#   hosts.sh link DIR HOST up|down take a host's link down or back up
#   hosts.sh rate DIR HOST RATE    change a host's rate
#   hosts.sh with N [RATE...] -- CMD...
#                                  up, run CMD in host 0 with HOSTS_DIR set,
#                                  and down whatever happens (CMD's status)
#
# HOSTS_SLOTS=K (default 1) gives each host K slots: mpirun places ranks
# 0..K-1 on host 0, K..2K-1 on host 1, and so on; ranks on one host talk
# through shared memory. The hosts share this machine's hostname, by which
# the runtime finds the ranks of a node, so mpi.env then also sets
# DDPRT_RANKS_PER_NODE=K.
#
# DIR then holds:
#   hostfile   the hosts' addresses, HOSTS_SLOTS slots each (mpirun
#              --hostfile, ddp-run --hostfile)
#   rsh        the agent for Open MPI (plm_rsh_agent)
#   mpi.env    the Open MPI settings for these hosts, as NAME=VALUE lines
#              (export them, or `env $(cat DIR/mpi.env) ...`): the agent,
#              TCP only, and the hosts' subnet for MPI and for mpirun's own
#              traffic
#   hosts      "ADDRESS NAMESPACE" per host
#   netns      the namespaces, for `down`

set -euo pipefail

subnet=10.251.0
ip_cmd=$(command -v ip || echo /usr/sbin/ip)
tc_cmd=$(command -v tc || echo /usr/sbin/tc)

die() {
  echo "hosts.sh: $*" >&2
  exit 1
}

check() {
  local why=""
  if [ "$(id -u)" != 0 ]; then
    why="not root (network namespaces need CAP_NET_ADMIN and CAP_SYS_ADMIN)"
  elif [ ! -x "$ip_cmd" ] || [ ! -x "$tc_cmd" ]; then
    why="iproute2 (ip, tc) is not installed"
  else
    local probe="ddpcheck$$"
    if ! "$ip_cmd" netns add "$probe" 2>/dev/null; then
      why="'ip netns add' is not permitted here"
    else
      if ! "$ip_cmd" -n "$probe" link add "${probe}a" type veth \
          peer name "${probe}b" 2>/dev/null; then
        why="veth pairs cannot be made here"
      elif ! "$ip_cmd" -n "$probe" link add "${probe}br" type bridge \
          2>/dev/null; then
        why="bridges cannot be made here"
      elif ! "$ip_cmd" -n "$probe" link set "${probe}a" up 2>/dev/null ||
          ! "$tc_cmd" -n "$probe" qdisc add dev "${probe}a" root tbf \
            rate 1gbit burst 256kb latency 50ms 2>/dev/null; then
        why="tc's tbf qdisc is not available here"
      fi
      "$ip_cmd" netns del "$probe" 2>/dev/null || true
    fi
  fi
  if [ -n "$why" ]; then
    echo "hosts.sh: no hosts on this machine: $why" >&2
    exit 2
  fi
}

# The namespace of host $2 in $1.
host_ns() {
  local dir=$1 host=$2
  [ -f "$dir/hosts" ] || die "$dir has no hosts (run 'hosts.sh up' first)"
  local ns
  ns=$(awk -v n="$((host + 1))" 'NR == n { print $2 }' "$dir/hosts")
  [ -n "$ns" ] || die "no host $host in $dir"
  echo "$ns"
}

# A tbf on both directions of host $2's link at rate $3 (none: removed).
set_rate() {
  local dir=$1 host=$2 rate=$3 ns sw tag
  ns=$(host_ns "$dir" "$host")
  tag=$(cat "$dir/tag")
  sw="${tag}sw"
  for side in "$ns eth0" "$sw ${tag}p$host"; do
    set -- $side
    "$tc_cmd" -n "$1" qdisc del dev "$2" root 2>/dev/null || true
    if [ "$rate" != none ] && [ "$rate" != veth ]; then
      # A burst of at least a few packets at the rate's own scale, and a
      # queue of 50 ms: TCP then sees a link of that rate, not drops.
      "$tc_cmd" -n "$1" qdisc add dev "$2" root tbf rate "$rate" \
        burst 256kb latency 50ms
    fi
  done
  echo "$rate" > "$dir/rate.$host"
}

down() {
  local dir=$1
  [ -f "$dir/netns" ] || return 0
  local ns
  while read -r ns; do
    # What still runs there keeps the namespace alive: end it first.
    local pids
    pids=$("$ip_cmd" netns pids "$ns" 2>/dev/null || true)
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    "$ip_cmd" netns del "$ns" 2>/dev/null || true
    rm -rf "/dev/shm/$ns"
  done < "$dir/netns"
  rm -f "$dir/netns" "$dir/hosts" "$dir/hostfile" "$dir/rsh" "$dir/mpi.env" \
    "$dir/tag" "$dir"/rate.*
}

up() {
  local dir=$1 count=$2 slots=${HOSTS_SLOTS:-1}
  shift 2
  [[ "$count" =~ ^[0-9]+$ ]] && [ "$count" -ge 1 ] && [ "$count" -le 200 ] ||
    die "up: '$count' is not a number of hosts (1 to 200)"
  [[ "$slots" =~ ^[0-9]+$ ]] && [ "$slots" -ge 1 ] && [ "$slots" -le 256 ] ||
    die "up: HOSTS_SLOTS='$slots' is not a number of ranks per host (1 to 256)"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ ! -f "$dir/netns" ] || die "$dir already has hosts ('hosts.sh down $dir')"
  local rates=("$@")
  [ ${#rates[@]} -gt 0 ] || rates=(none)
  # A tag of its own, so that several sets of hosts (tests run in
  # parallel) never share a name; their subnets are apart by construction
  # (each has its own bridge).
  local tag
  tag="ddp$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
  echo "$tag" > "$dir/tag"
  : > "$dir/netns"
  : > "$dir/hosts"
  : > "$dir/hostfile"
  # Whatever fails from here leaves nothing behind.
  trap 'down "$dir"' ERR
  local sw="${tag}sw"
  "$ip_cmd" netns add "$sw"
  echo "$sw" >> "$dir/netns"
  "$ip_cmd" -n "$sw" link set lo up
  "$ip_cmd" -n "$sw" link add br0 type bridge
  "$ip_cmd" -n "$sw" link set br0 up
  local i
  for ((i = 0; i < count; i++)); do
    local ns="${tag}h$i" address="$subnet.$((i + 1))"
    "$ip_cmd" netns add "$ns"
    echo "$ns" >> "$dir/netns"
    "$ip_cmd" -n "$ns" link set lo up
    "$ip_cmd" -n "$ns" link add eth0 type veth peer name "${tag}p$i" \
      netns "$sw"
    "$ip_cmd" -n "$ns" addr add "$address/24" dev eth0
    "$ip_cmd" -n "$ns" link set eth0 up
    "$ip_cmd" -n "$sw" link set "${tag}p$i" master br0
    "$ip_cmd" -n "$sw" link set "${tag}p$i" up
    echo "$address $ns" >> "$dir/hosts"
    echo "$address slots=$slots" >> "$dir/hostfile"
    local rate=${rates[$((i < ${#rates[@]} ? i : ${#rates[@]} - 1))]}
    set_rate "$dir" "$i" "$rate"
  done
  cat > "$dir/rsh" <<EOF
#!/bin/sh
# Open MPI's rsh agent for the hosts in $dir: "rsh HOST COMMAND..." runs
# COMMAND in HOST's namespace, as ssh would run it on HOST. The hosts share
# one /dev/shm and one hostname, from which Open MPI names the shared
# memory of a host's ranks: each host but the launching one gets a
# directory of its own for it.
host=\$1
shift
ns=\$(awk -v h="\$host" '\$1 == h { print \$2 }' "$dir/hosts")
[ -n "\$ns" ] || { echo "rsh: unknown host \$host" >&2; exit 255; }
mkdir -p "/dev/shm/\$ns"
exec "$ip_cmd" netns exec "\$ns" \\
  env OMPI_MCA_btl_vader_backing_directory="/dev/shm/\$ns" sh -c "\$*"
EOF
  chmod +x "$dir/rsh"
  cat > "$dir/mpi.env" <<EOF
OMPI_MCA_plm_rsh_agent=$dir/rsh
OMPI_MCA_btl=tcp,self
OMPI_MCA_btl_tcp_if_include=$subnet.0/24
OMPI_MCA_oob_tcp_if_include=$subnet.0/24
EOF
  if [ "$slots" -gt 1 ]; then
    sed -i 's/^OMPI_MCA_btl=tcp,self$/OMPI_MCA_btl=tcp,vader,self/' \
      "$dir/mpi.env"
    echo "DDPRT_RANKS_PER_NODE=$slots" >> "$dir/mpi.env"
  fi
  trap - ERR
}

command=${1:-}
[ -n "$command" ] || die "usage: hosts.sh check | up DIR N [RATE...] | down DIR | exec DIR HOST CMD... | link DIR HOST up|down | rate DIR HOST RATE | with N [RATE...] -- CMD..."
shift
case "$command" in
check) check ;;
up)
  [ $# -ge 2 ] || die "usage: hosts.sh up DIR N [RATE...]"
  up "$@" ;;
down)
  [ $# -eq 1 ] || die "usage: hosts.sh down DIR"
  down "$1" ;;
exec)
  [ $# -ge 3 ] || die "usage: hosts.sh exec DIR HOST CMD..."
  ns=$(host_ns "$1" "$2")
  shift 2
  exec "$ip_cmd" netns exec "$ns" "$@" ;;
link)
  [ $# -eq 3 ] && { [ "$3" = up ] || [ "$3" = down ]; } ||
    die "usage: hosts.sh link DIR HOST up|down"
  ns=$(host_ns "$1" "$2")
  "$ip_cmd" -n "$ns" link set eth0 "$3" ;;
rate)
  [ $# -eq 3 ] || die "usage: hosts.sh rate DIR HOST RATE"
  set_rate "$1" "$2" "$3" ;;
with)
  count=${1:-}
  shift || true
  rates=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    rates+=("$1")
    shift
  done
  [ "${1:-}" = -- ] && [ $# -ge 2 ] ||
    die "usage: hosts.sh with N [RATE...] -- CMD..."
  shift
  dir=$(mktemp -d "${TMPDIR:-/tmp}/ddp-hosts.XXXXXX")
  trap 'down "$dir"; rm -rf "$dir"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  up "$dir" "$count" "${rates[@]}"
  status=0
  HOSTS_DIR=$dir "$ip_cmd" netns exec "$(host_ns "$dir" 0)" "$@" || status=$?
  exit $status ;;
*) die "unknown command '$command'" ;;
esac
