#!/usr/bin/env bash
# Several "hosts" on one machine (issue 36): N network namespaces, each with its own network
# stack and one private address on a bridge, optionally a slower link (--rate through tc's tbf,
# --delay through netem, or where the kernel lacks netem through delay_switch.py in place of
# the bridge), and COMMAND run inside host 0 with
# $TANDEM_SIMULATED_MPIRUN: mpirun that places rank i on host i (i mod N), starts the other
# hosts' daemons through a launch agent that enters their namespace (as ssh would enter a
# machine), and keeps MPI on TCP over the namespaces' interfaces (no shared memory).
# --clock-step S: host i's monotonic clock (a time namespace) runs i x S seconds ahead of host
# 0's, as separate machines' steady clocks differ.
# Addresses exist only inside these namespaces; everything is removed on exit, also on failure.
#
#   simulated_hosts.sh [--hosts N] [--delay 2ms] [--rate 1gbit] [--clock-step S] -- COMMAND [ARGS...]
#   e.g. simulated_hosts.sh --hosts 3 -- sh -c '$TANDEM_SIMULATED_MPIRUN -np 3 build/tandem serve ...'
#
# COMMAND also gets TANDEM_SIMULATED_HOSTS (N), TANDEM_SIMULATED_DELAY_US (one way),
# TANDEM_SIMULATED_CLOCK_STEP_S (S, 0 without) and TANDEM_SIMULATED_LINK (the link in words).
# Exit: COMMAND's status; 77 (printing why) when namespaces cannot be made here (not root, no
# `ip`, no network namespaces, no mpirun) or a link option needs what this machine lacks.
set -euo pipefail

readonly kSkip=77
hosts=3
delay=""
rate=""
clock_step=0
usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts="$2"; shift 2 ;;
    --delay) delay="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --clock-step) clock_step="$2"; shift 2 ;;
    --help | -h) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "simulated_hosts: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
if [ $# -eq 0 ]; then usage >&2; exit 2; fi
# The delay in microseconds ("2ms", "0.2ms", "200us", "1s"), for delay_switch.py and the tests.
delay_us() {
  awk -v d="$1" 'BEGIN {
    if (d ~ /^[0-9.]+us$/) { sub(/us$/, "", d); print d + 0 }
    else if (d ~ /^[0-9.]+ms$/) { sub(/ms$/, "", d); print d * 1000 }
    else if (d ~ /^[0-9.]+s$/) { sub(/s$/, "", d); print d * 1000000 }
    else { exit 1 } }'
}
link_delay_us=0
if [ -n "$delay" ]; then
  link_delay_us="$(delay_us "$delay")" || { echo "simulated_hosts: --delay takes e.g. 2ms, 200us, not $delay" >&2; exit 2; }
fi
if ! [[ "$hosts" =~ ^[0-9]+$ ]] || [ "$hosts" -lt 1 ] || [ "$hosts" -gt 200 ]; then
  echo "simulated_hosts: --hosts takes 1..200, not $hosts" >&2
  exit 2
fi

if ! [[ "$clock_step" =~ ^[0-9]+$ ]]; then
  echo "simulated_hosts: --clock-step takes whole seconds, not $clock_step" >&2
  exit 2
fi

skip() { echo "SKIPPED: simulated hosts: $*"; exit "$kSkip"; }
[ "$(id -u)" -eq 0 ] || skip "not root (network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN)"
command -v ip >/dev/null || skip "no 'ip' command (iproute2)"
command -v mpirun >/dev/null || skip "no mpirun (OpenMPI) on PATH"
if [ "$clock_step" -gt 0 ] && ! unshare --time --monotonic 1 true 2>/dev/null; then
  skip "--clock-step needs time namespaces (unshare --time; CONFIG_TIME_NS), not available here"
fi

# Names carry this shell's pid, so that runs side by side (several engineers, ctest -j) never
# share one; the subnet is private and exists only inside this run's namespaces.
readonly tag="$$"
readonly prefix="tandem-h"
readonly switch_ns="tandem-sw-$tag"
readonly subnet_base="10.213.0"
readonly subnet="$subnet_base.0/24"
host_ns() { echo "$prefix$1-$tag"; }
host_ip() { echo "$subnet_base.$(($1 + 1))"; }

# A run killed outright (SIGKILL: no trap runs) leaves its namespaces and its folder in /tmp
# behind; remove those whose run is gone. Only names of this script's form, and only when their pid is dead.
for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
  if [[ "$ns" =~ ^tandem-(h[0-9]+|sw)-([0-9]+)$ ]] && ! kill -0 "${BASH_REMATCH[2]}" 2>/dev/null; then
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns delete "$ns" 2>/dev/null || true
  fi
done
for dir in /tmp/tandem-hosts-*; do
  if [[ "$dir" =~ ^/tmp/tandem-hosts-([0-9]+)\.[A-Za-z0-9]+$ ]] && ! kill -0 "${BASH_REMATCH[1]}" 2>/dev/null; then
    rm -rf "$dir"
  fi
done

run_dir=""
made=()
cleanup() {
  local status=$?
  trap - EXIT INT TERM HUP
  # Whatever still runs inside our namespaces (a rank or daemon left by a failed command) is
  # ours: end it, so that deleting the name also frees the namespace and its links.
  local left=0
  for ns in "${made[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null && left=1; done
  done
  # A second for them to end on their own (mpirun tells its daemons; a rank drains), then KILL.
  for ((wait = 0; left && wait < 10; wait++)); do
    sleep 0.1
    left=0
    for ns in "${made[@]}"; do [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && left=1; done
  done
  for ns in "${made[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns delete "$ns" 2>/dev/null || true
  done
  [ -n "$run_dir" ] && rm -rf "$run_dir"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

make_ns() {
  ip netns add "$1" 2>/dev/null || return 1
  made+=("$1")
  ip -n "$1" link set lo up
}
make_ns "$switch_ns" || skip "'ip netns add' failed (no network namespaces here, or no right to make them)"
run_dir="$(mktemp -d "/tmp/tandem-hosts-$tag.XXXXXX")"

# The link is shaped where packets leave each host (its eth0), so a message between two hosts
# meets the delay and the rate once: tc's netem for a delay (with the rate), tbf for a rate
# alone. A kernel without netem gets its delay from delay_switch.py, which stands in for the
# bridge: each host's eth0 is then a tap whose frames that program forwards after the delay.
switch="bridge"
if [ -n "$delay" ]; then
  if ip netns exec "$switch_ns" tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then
    ip netns exec "$switch_ns" tc qdisc del dev lo root
  else
    switch="delay_switch.py"
    command -v python3 >/dev/null || skip "--delay: no netem qdisc in this kernel, and no python3 for delay_switch.py"
    [ -c /dev/net/tun ] || skip "--delay: no netem qdisc in this kernel, and no /dev/net/tun for delay_switch.py"
  fi
fi

if [ "$switch" = "bridge" ]; then
  ip -n "$switch_ns" link add br0 type bridge || skip "no bridge devices in this kernel"
  ip -n "$switch_ns" link set br0 up
  # Each host: a veth pair made directly in the two namespaces (no name ever exists in the
  # machine's own namespace), eth0 in the host, the other end on the bridge.
  for ((i = 0; i < hosts; i++)); do
    ns="$(host_ns "$i")"
    make_ns "$ns"
    ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$switch_ns" || skip "no veth devices in this kernel"
    ip -n "$switch_ns" link set "p$i" master br0 up
  done
else
  # The taps are made in the switch's namespace, held by delay_switch.py there, then moved
  # into their hosts (a tap keeps its reader across namespaces).
  taps=()
  for ((i = 0; i < hosts; i++)); do
    ip -n "$switch_ns" tuntap add dev "t$i" mode tap || skip "--delay: cannot make tap devices here"
    taps+=("t$i")
  done
  ip netns exec "$switch_ns" python3 "$(dirname "$0")/delay_switch.py" --delay-us "$link_delay_us" --ready "$run_dir/switch.ready" \
    "${taps[@]}" >"$run_dir/switch.log" 2>&1 &
  for ((wait = 0; wait < 100; wait++)); do
    [ -f "$run_dir/switch.ready" ] && break
    sleep 0.1
  done
  [ -f "$run_dir/switch.ready" ] || { echo "simulated_hosts: delay_switch.py did not start:" >&2; cat "$run_dir/switch.log" >&2; exit 1; }
  for ((i = 0; i < hosts; i++)); do
    ns="$(host_ns "$i")"
    make_ns "$ns"
    ip -n "$switch_ns" link set "t$i" netns "$ns"
    ip -n "$ns" link set "t$i" name eth0
  done
fi
for ((i = 0; i < hosts; i++)); do
  ns="$(host_ns "$i")"
  ip -n "$ns" addr add "$(host_ip "$i")/24" dev eth0
  ip -n "$ns" link set eth0 up
  if [ -n "$delay" ] && [ "$switch" = "bridge" ]; then
    ip netns exec "$ns" tc qdisc add dev eth0 root netem delay "$delay" ${rate:+rate "$rate"}
  elif [ -n "$rate" ]; then
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms ||
      skip "--rate needs tc's tbf qdisc, which this kernel lacks (CONFIG_NET_SCH_TBF)"
  fi
done

# The hostfile: one line per host, by address (the namespaces share the machine's hostname).
for ((i = 0; i < hosts; i++)); do echo "$(host_ip "$i") slots=64"; done >"$run_dir/hostfile"

# The launch agent: mpirun runs `AGENT HOST COMMAND...` as it would run `ssh HOST COMMAND...`;
# this one runs COMMAND in HOST's namespace through a shell, with only HOME and PATH from the
# environment (ssh gives a remote command no more: what a rank needs, mpirun must pass), with
# --clock-step its own monotonic clock (a time namespace), and a temporary folder of its own:
# the hosts share the machine's hostname, so in one /tmp their daemons would share OpenMPI's
# session folder (named after the host) and its files (a daemon crashed in
# hwloc_shmem_topology_write, both writing one hwloc.sm).
for ((i = 1; i < hosts; i++)); do mkdir "$run_dir/tmp-h$i"; done
{
  echo '#!/usr/bin/env bash'
  echo 'while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done  # ssh-style options, none needed'
  echo 'host="$1"; shift'
  echo 'case "$host" in'
  echo "  $(host_ip 0)) ns=$(host_ns 0) tmp=\"\${TMPDIR:-/tmp}\" clock=0 ;;"
  for ((i = 1; i < hosts; i++)); do
    echo "  $(host_ip "$i")) ns=$(host_ns "$i") tmp=$run_dir/tmp-h$i clock=$((i * clock_step)) ;;"
  done
  echo '  *) echo "simulated_hosts agent: no host $host" >&2; exit 255 ;;'
  echo 'esac'
  echo 'time=()'
  echo '[ "$clock" -gt 0 ] && time=(unshare --time --monotonic "$clock")'
  echo 'exec ip netns exec "$ns" "${time[@]}" env -i HOME="$HOME" PATH="$PATH" TMPDIR="$tmp" /bin/sh -c "$*"'
} >"$run_dir/agent"
chmod +x "$run_dir/agent"

# mpirun for these hosts: rank i on host i mod N (--map-by node), not bound to a core (every
# "host" sees the machine's cores: bound, each host's first rank would take core 0), daemons
# started through the agent, MPI's messages on TCP (btl tcp + self, never shared memory) and both TCP transports
# (MPI's and the runtime's) on the namespaces' subnet. -x passes on what the tests' ranks need
# (the sanitizer build's leak check off; which devices a rank sees).
{
  echo '#!/usr/bin/env bash'
  echo 'extra=()'
  echo 'for v in ASAN_OPTIONS UBSAN_OPTIONS CUDA_VISIBLE_DEVICES TANDEM_ISA; do'
  echo '  [ -n "${!v+set}" ] && extra+=(-x "$v")'
  echo 'done'
  echo "exec mpirun --allow-run-as-root --oversubscribe --hostfile $run_dir/hostfile --map-by node --bind-to none \\"
  echo "  --mca plm rsh --mca plm_rsh_agent $run_dir/agent --mca pml ob1 --mca btl tcp,self \\"
  echo "  --mca btl_tcp_if_include $subnet --mca oob_tcp_if_include $subnet \"\${extra[@]}\" \"\$@\""
} >"$run_dir/mpirun"
chmod +x "$run_dir/mpirun"

export TANDEM_SIMULATED_HOSTS="$hosts"
export TANDEM_SIMULATED_MPIRUN="$run_dir/mpirun"
export TANDEM_SIMULATED_DELAY_US="$link_delay_us"
export TANDEM_SIMULATED_CLOCK_STEP_S="$clock_step"
export TANDEM_SIMULATED_LINK="delay ${delay:-0} rate ${rate:-unlimited} through $switch"
echo "simulated_hosts: $hosts hosts ($(host_ns 0) .. $(host_ns $((hosts - 1))), $subnet), link: $TANDEM_SIMULATED_LINK," \
  "clocks $clock_step s apart" >&2
# Not exec: the trap must remove the namespaces when COMMAND ends.
set +e
ip netns exec "$(host_ns 0)" "$@"
status=$?
set -e
exit "$status"
