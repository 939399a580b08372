#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Overlap benchmark (issue 13, item 5), side by side in one run: an L-layer
# MLP training step on 2 ranks, our compiled step (ddp-opt --ddp-compress,
# ddp-run) with and without the overlap schedule, against PyTorch 1.13 DDP
# (gloo) with the same model, data, bucket cap and hooks, on loopback and on
# simulated links. Prints one markdown table (with the command, date and
# machine) to paste into docs/performance.md.
#
#   bash bench/overlap/run.sh                   # the whole table
#   bash bench/overlap/run.sh --cell CONFIG LINK [ours|torch]
#                                               # one row, for debugging
#
# CONFIG: plain | fp16 | powersgd (rank POWERSGD_RANK). LINK: loopback, a
# simulated link speed in Gb/s (1, 10, 100, ...), or a real link net:RATE
# (net:1gbit, net:100mbit, net:veth for no limit): RANKS hosts made with
# bench/net/hosts.sh (root), one rank of each side per host.
#
# Columns, per configuration and link (ms per step: median over STEPS steps
# after WARMUP, of the slowest rank's step):
#   ours overlap     the step compiled with --ddp-compress="<cfg>" (the
#                    scheduling pass on, the default)
#   ours no overlap  the same with NO_OVERLAP_OPTION (overlap=false) added
#   ours compute     the step without allreduces (gen_mlp_step.py
#                    --no-allreduce): compute only, measured once
#   torch DDP        DDP as users run it (hooks start during backward)
#   torch sequential the same DDP, every bucket's hook started only once the
#                    last bucket is ready (the end of backward)
#   torch compute    forward and backward under no_sync(), measured once
#   comm             sequential - compute: the communication (and
#                    compression) time when nothing overlaps it
#   hidden           (sequential - overlapped) / (sequential - compute), %
# ours' times come from ddp-run's --summary-json series (the slowest
# rank's time per step), PyTorch's from torch_ddp.py.
#
# Simulated links: ours with `ddp-run SIM_LINK_FLAG=<gbps>,<latency_us>`,
# PyTorch's with torch_ddp.py's model of the same link (see its header).
# Every figure on such a row is labelled "simulated link".
#
# Environment (defaults in brackets):
#   STEPS [9] measured steps, WARMUP [4] steps before them (PowerSGD: 2
#   exact steps, the first compressed one, the first warm-started one),
#   LAYERS [8], HIDDEN [1024], BATCH [4] per rank, LR [0.1],
#   BUCKET_MB [5] (ddp-compress bucket-cap-mb and DDP's bucket_cap_mb: 5
#   MiB puts about one 1024 x 1024 layer in a bucket on both sides, so that
#   buckets can start as layers finish; at 25 ours makes 2 buckets and DDP,
#   with its 1 MiB first bucket, 2 as well, and little can overlap),
#   (BATCH 4: small, so that the communication is not buried under the
#   compute and its noise; our step computes in about 17 ms on 2 ranks of
#   the 2-core machine, PyTorch's in about 33),
#   POWERSGD_RANK [2], START_ITER [2], CONFIGS ["plain fp16 powersgd"],
#   LINKS ["loopback 1 10 100"], LATENCY_US [20],
#   DDP_OPT [build/bin/ddp-opt], DDP_RUN [build/bin/ddp-run],
#   PYTHON [/usr/bin/python3, with numpy and torch 1.13],
#   WORK_DIR [build/overlap-bench]: data, compiled steps, summaries, logs,
#   NO_OVERLAP_OPTION [overlap=false]: the ddp-compress option that turns
#     the scheduling pass off,
#   SIM_LINK_FLAG [--simulated-link]: ddp-run's simulated-link flag,
#   SIM_LINK_VIA [flag]: flag, or env to set DDPRT_SIMULATED_LINK=<gbps>,<us>
#     for ddp-run instead (any host of the runtime reads it),
#   ALLOW_MISSING [0]: 1 prints "-" for what the binaries cannot do yet (no
#     overlap option, no simulated link) instead of stopping,
#   SKIP_OURS / SKIP_TORCH [0]: 1 leaves that side out ("-").
#
# Run it on an otherwise idle machine: the 2 ranks already take both cores
# of the VM, and other work shows up as noise larger than the communication
# (at load 4, medians of the same cell moved by hundreds of ms).
# Defaults take about 5-10 minutes on the 2-core VM (ours: 3 x 4 x 2 runs
# of 9 steps of about 0.9 s; PyTorch: one 2-process job).
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=bench/overlap
COMMAND_LINE="bash $HERE/run.sh $*"

STEPS="${STEPS:-9}"
WARMUP="${WARMUP:-4}"
LAYERS="${LAYERS:-8}"
HIDDEN="${HIDDEN:-1024}"
BATCH="${BATCH:-4}"
LR="${LR:-0.1}"
BUCKET_MB="${BUCKET_MB:-5}"
POWERSGD_RANK="${POWERSGD_RANK:-2}"
START_ITER="${START_ITER:-2}"
CONFIGS="${CONFIGS:-plain fp16 powersgd}"
LINKS="${LINKS:-loopback 1 10 100}"
LATENCY_US="${LATENCY_US:-20}"
DDP_OPT="${DDP_OPT:-build/bin/ddp-opt}"
DDP_RUN="${DDP_RUN:-build/bin/ddp-run}"
PYTHON="${PYTHON:-/usr/bin/python3}"
WORK_DIR="${WORK_DIR:-build/overlap-bench}"
NO_OVERLAP_OPTION="${NO_OVERLAP_OPTION:-overlap=false}"
SIM_LINK_FLAG="${SIM_LINK_FLAG:---simulated-link}"
SIM_LINK_VIA="${SIM_LINK_VIA:-flag}"
ALLOW_MISSING="${ALLOW_MISSING:-0}"
SKIP_OURS="${SKIP_OURS:-0}"
SKIP_TORCH="${SKIP_TORCH:-0}"
RANKS=2

fail() {
  echo "run.sh: $*" >&2
  exit 1
}

# --cell CONFIG LINK [ours|torch]: one row only.
if [ "${1:-}" = "--cell" ]; then
  [ $# -ge 3 ] || fail "usage: run.sh --cell CONFIG LINK [ours|torch]"
  CONFIGS="$2"
  LINKS="$3"
  case "${4:-}" in
    "") ;;
    ours) SKIP_TORCH=1 ;;
    torch) SKIP_OURS=1 ;;
    *) fail "--cell: the 4th argument is ours or torch, not '$4'" ;;
  esac
elif [ $# -gt 0 ]; then
  fail "unknown argument '$1' (see the header of $HERE/run.sh)"
fi

for config in $CONFIGS; do
  case "$config" in
    plain | fp16 | powersgd) ;;
    *) fail "unknown configuration '$config' (plain, fp16, powersgd)" ;;
  esac
done
for link in $LINKS; do
  [[ "$link" = loopback || "$link" =~ ^[0-9]+([.][0-9]+)?$ ||
     "$link" =~ ^net:([0-9]+[kmg]bit|veth)$ ]] ||
    fail "unknown link '$link' (loopback, a simulated speed in Gb/s, or net:RATE: net:1gbit, net:100mbit, net:veth)"
done
if [[ " $CONFIGS " = *" powersgd "* ]] && ((WARMUP < START_ITER + 2)); then
  fail "WARMUP=$WARMUP: PowerSGD needs START_ITER + 2 = $((START_ITER + 2)) steps before the measured ones"
fi

# ddp-compress options of a configuration.
compress_options() {
  case "$1" in
    plain) echo "bucket-cap-mb=$BUCKET_MB" ;;
    fp16) echo "narrow=fp16 bucket-cap-mb=$BUCKET_MB" ;;
    powersgd) echo "powersgd-rank=$POWERSGD_RANK start-iter=$START_ITER bucket-cap-mb=$BUCKET_MB" ;;
  esac
}

# A link's label in the table.
link_label() {
  case "$1" in
    loopback) echo "loopback" ;;
    net:veth) echo "real link: $RANKS hosts, veth (unlimited)" ;;
    net:*) echo "real link: $RANKS hosts at ${1#net:}" ;;
    *) echo "simulated link $1 Gb/s" ;;
  esac
}

# Real links: RANKS hosts (network namespaces, bench/net/hosts.sh) per
# net:RATE link, made once, removed at exit. hosts_dir LINK names them.
HOSTS_SH=bench/net/hosts.sh
NET_HOSTS=()
hosts_dir() { echo "$WORK_DIR/hosts-${1#net:}"; }
remove_hosts() {
  local dir
  for dir in "${NET_HOSTS[@]}"; do
    bash "$HOSTS_SH" down "$dir" || true
  done
}
trap remove_hosts EXIT
make_hosts() {
  local link="$1" dir
  dir="$(hosts_dir "$link")"
  local made
  for made in "${NET_HOSTS[@]}"; do
    [ "$made" != "$dir" ] || return 0
  done
  # What an earlier run that was killed left there.
  bash "$HOSTS_SH" down "$dir" || true
  bash "$HOSTS_SH" up "$dir" "$RANKS" "${link#net:}" >&2 ||
    fail "cannot make $RANKS hosts for $link (bash $HOSTS_SH check says why)"
  NET_HOSTS+=("$dir")
}

# The binaries may be rebuilt while this runs: wait a little for one that
# is briefly missing.
need_binary() {
  local tries=0
  while [ ! -x "$1" ]; do
    ((tries++ < 10)) || fail "$1 not found; build it (ninja -C build $(basename "$1")) or set $2"
    sleep 3
  done
}

# --- what each side can do -------------------------------------------------
HAVE_NO_OVERLAP=1
HAVE_SIM_LINK=1
mkdir -p "$WORK_DIR"
WORK_DIR="$(cd "$WORK_DIR" && pwd)"
DATA="$WORK_DIR/data"
LOGS="$WORK_DIR/logs"
mkdir -p "$DATA" "$LOGS"

if [ "$SKIP_OURS" != 1 ]; then
  need_binary "$DDP_OPT" DDP_OPT
  need_binary "$DDP_RUN" DDP_RUN
  # The option that turns the scheduling pass off: try it on a tiny step.
  "$PYTHON" "$HERE/gen_mlp_step.py" --layers 2 --hidden 4 --batch 2 -o "$WORK_DIR/probe.mlir"
  if ! "$DDP_OPT" "$WORK_DIR/probe.mlir" --ddp-compress="$NO_OVERLAP_OPTION" -o /dev/null \
       2>"$LOGS/probe.err"; then
    if [ "$ALLOW_MISSING" = 1 ]; then
      HAVE_NO_OVERLAP=0
      echo "run.sh: note: ddp-opt --ddp-compress does not take '$NO_OVERLAP_OPTION' ($(head -n 1 "$LOGS/probe.err")); 'ours no overlap' is left out and 'ours overlap' is whatever the default pipeline does" >&2
    else
      fail "ddp-opt --ddp-compress=\"$NO_OVERLAP_OPTION\" fails: $(head -n 1 "$LOGS/probe.err")
  (the scheduling pass's switch; set NO_OVERLAP_OPTION, or ALLOW_MISSING=1 to leave that column out)"
    fi
  fi
  [[ "$SIM_LINK_VIA" = flag || "$SIM_LINK_VIA" = env ]] || fail "SIM_LINK_VIA is flag or env, not '$SIM_LINK_VIA'"
  # (With SIM_LINK_VIA=env nothing can be asked beforehand: run_ours checks
  # that the summary says the link was on, where the runtime writes it.)
  if [[ " $LINKS " = *" "[0-9]* ]] && [ "$SIM_LINK_VIA" = flag ] &&
     ! "$DDP_RUN" --help 2>&1 | grep -q -- "$SIM_LINK_FLAG[=]"; then
    if [ "$ALLOW_MISSING" = 1 ]; then
      HAVE_SIM_LINK=0
      echo "run.sh: note: $DDP_RUN has no $SIM_LINK_FLAG; ours is left out on simulated links" >&2
    else
      fail "$DDP_RUN has no $SIM_LINK_FLAG option (the simulated link; set SIM_LINK_FLAG, or ALLOW_MISSING=1 to leave those cells out)"
    fi
  fi
fi
if [ "$SKIP_TORCH" != 1 ]; then
  "$PYTHON" -c "import torch, numpy" 2>/dev/null ||
    fail "$PYTHON cannot import torch and numpy (apt-get install python3-torch python3-numpy)"
fi
"$PYTHON" -c "import numpy" 2>/dev/null || fail "$PYTHON cannot import numpy"

# --- header ----------------------------------------------------------------
echo "## Overlap benchmark: $LAYERS-layer MLP, hidden $HIDDEN, batch $BATCH per rank, $RANKS ranks"
echo
echo "    $COMMAND_LINE"
echo
echo "- settings: STEPS=$STEPS WARMUP=$WARMUP LAYERS=$LAYERS HIDDEN=$HIDDEN BATCH=$BATCH LR=$LR" \
     "BUCKET_MB=$BUCKET_MB POWERSGD_RANK=$POWERSGD_RANK START_ITER=$START_ITER" \
     "LATENCY_US=$LATENCY_US CONFIGS=\"$CONFIGS\" LINKS=\"$LINKS\""
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- machine: $(uname -sr), $(nproc) cores ($(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)), $(free -g | awk '/^Mem:/ {print $2}') GiB; load at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- source: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (modified)'); ddp-opt $DDP_OPT ($(date -u -r "$DDP_OPT" '+%Y-%m-%d %H:%M UTC' 2>/dev/null || echo 'absent')), ddp-run $DDP_RUN"
echo "- PyTorch: $("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo absent), gloo, one compute thread per rank"
echo

# The hosts of the real links, made here (not in the subshells that run
# the steps) so that the exit trap knows them.
for link in $LINKS; do
  if [[ "$link" = net:* ]]; then
    make_hosts "$link"
  fi
done

# --- data and steps --------------------------------------------------------
"$PYTHON" "$HERE/gen_mlp_step.py" --prepare "$DATA" --layers "$LAYERS" --hidden "$HIDDEN" \
  --batch "$BATCH" --ranks "$RANKS"
CARRY=""
for ((k = 0; k < 2 * LAYERS; ++k)); do
  CARRY+="${CARRY:+,}$k:$k"
done

# median_ms SUMMARY: median over the steps >= WARMUP of the series' times.
median_ms() {
  "$PYTHON" - "$1" "$WARMUP" <<'EOF'
import json, statistics, sys
series = json.load(open(sys.argv[1]))["series"]
measured = [s["ms"] for s in series if s["step"] >= int(sys.argv[2])]
print("%.3f" % statistics.median(measured))
EOF
}

# run_ours NAME STEP_MLIR LINK [extra ddp-run flags]: ms per step, or fails.
run_ours() {
  local name="$1" step="$2" link="$3"
  shift 3
  local out="$WORK_DIR/ours/$name"
  mkdir -p "$out"
  local command=(env -u DDPRT_SIMULATED_LINK
                 "$DDP_RUN" --np="$RANKS" "$step" --entry=step --steps="$((WARMUP + STEPS))" --quiet
                 --inputs="$DATA/inputs.r{rank}.npz" --carry="$CARRY"
                 --summary-json="$out/summary.json" --timeout=300 "$@")
  if [[ "$link" = net:* ]]; then
    make_hosts "$link"
    local hosts
    hosts="$(hosts_dir "$link")"
    command=(env -u DDPRT_SIMULATED_LINK bash "$HOSTS_SH" exec "$hosts" 0
             env $(cat "$hosts/mpi.env") "${command[@]:3}"
             --hostfile="$hosts/hostfile")
  elif [ "$link" != loopback ]; then
    if [ "$SIM_LINK_VIA" = env ]; then
      command=(env "DDPRT_SIMULATED_LINK=$link,$LATENCY_US" "${command[@]:3}")
    else
      command+=("$SIM_LINK_FLAG=$link,$LATENCY_US")
    fi
  fi
  echo "${command[*]}" >"$out/command.txt"
  need_binary "$DDP_RUN" DDP_RUN
  if ! "${command[@]}" >"$out/log.txt" 2>&1; then
    tail -n 20 "$out/log.txt" >&2
    fail "ddp-run failed ($name): $(cat "$out/command.txt")"
  fi
  # The runtime records the link in the summary ("simulated_link": null or
  # {"gbps": G, "latency_us": L}); a runtime too old to write it is let through.
  "$PYTHON" - "$out/summary.json" "$link" <<'EOF' || fail "$name: $(cat "$out/command.txt")"
import json, sys
summary, link = json.load(open(sys.argv[1])), sys.argv[2]
if "simulated_link" in summary:
    on = summary["simulated_link"] is not None
    if on != (link != "loopback" and not link.startswith("net:")):
        sys.exit("run.sh: ddp-run's summary says simulated_link %r on the %s run"
                 % (summary["simulated_link"], link))
EOF
  median_ms "$out/summary.json"
}

declare -A OURS
OURS_COMPUTE="-"
if [ "$SKIP_OURS" != 1 ]; then
  echo "(ours: compiling; every run's command, log and summary are in $WORK_DIR/ours)" >&2
  "$PYTHON" "$HERE/gen_mlp_step.py" --layers "$LAYERS" --hidden "$HIDDEN" --batch "$BATCH" \
    --lr "$LR" -o "$WORK_DIR/step.mlir"
  "$PYTHON" "$HERE/gen_mlp_step.py" --layers "$LAYERS" --hidden "$HIDDEN" --batch "$BATCH" \
    --lr "$LR" --no-allreduce -o "$WORK_DIR/step-compute.mlir"
  # ddp-run reads the inputs by the arguments' name locations: keep them.
  # The scheduling pass's remarks (what it could not move) go to
  # compiled/NAME.log.
  mkdir -p "$WORK_DIR/compiled"
  compile() {
    local name="$1"
    shift
    need_binary "$DDP_OPT" DDP_OPT
    "$DDP_OPT" "$@" --mlir-print-debuginfo -o "$WORK_DIR/compiled/$name.mlir" \
      2>"$WORK_DIR/compiled/$name.log" ||
      fail "ddp-opt failed ($name): $(grep -m 1 error "$WORK_DIR/compiled/$name.log")"
  }
  compile compute "$WORK_DIR/step-compute.mlir" --ddp-compress
  for config in $CONFIGS; do
    options="$(compress_options "$config")"
    compile "$config-overlap" "$WORK_DIR/step.mlir" --ddp-compress="$options" \
      --ddp-compression-report="output=$WORK_DIR/compiled/$config.plan.txt"
    remarks="$(grep -c 'remark:' "$WORK_DIR/compiled/$config-overlap.log" || true)"
    ((remarks == 0)) ||
      echo "(ours: $config: ddp-opt made $remarks remarks, see $WORK_DIR/compiled/$config-overlap.log)" >&2
    if ((HAVE_NO_OVERLAP)); then
      compile "$config-no-overlap" "$WORK_DIR/step.mlir" --ddp-compress="$options $NO_OVERLAP_OPTION"
      if cmp -s "$WORK_DIR/compiled/$config-overlap.mlir" "$WORK_DIR/compiled/$config-no-overlap.mlir"; then
        echo "run.sh: warning: $config: '$NO_OVERLAP_OPTION' compiles the same step as the default pipeline" >&2
      fi
    fi
  done

  echo "(ours: compute only)" >&2
  OURS_COMPUTE="$(run_ours compute "$WORK_DIR/compiled/compute.mlir" loopback)"
  for link in $LINKS; do
    for config in $CONFIGS; do
      OURS[$config,$link,overlap]="-"
      OURS[$config,$link,sequential]="-"
      if [[ "$link" != loopback && "$link" != net:* ]] && ((!HAVE_SIM_LINK)); then
        continue
      fi
      echo "(ours: $config, $(link_label "$link"))" >&2
      # On the first link every run keeps its losses: the plain one is
      # checked against PyTorch's, and with and without overlap must be
      # bitwise the same.
      losses=()
      if [ "$link" = "$(echo $LINKS | cut -d' ' -f1)" ]; then
        losses=(--output="$WORK_DIR/ours/losses/$config-VARIANT.r{rank}.s{step}.npy"
                --output-results="$((2 * LAYERS))")
        mkdir -p "$WORK_DIR/ours/losses"
      fi
      OURS[$config,$link,overlap]="$(run_ours "$config-$link-overlap" \
        "$WORK_DIR/compiled/$config-overlap.mlir" "$link" "${losses[@]/VARIANT/overlap}")"
      if ((HAVE_NO_OVERLAP)); then
        OURS[$config,$link,sequential]="$(run_ours "$config-$link-no-overlap" \
          "$WORK_DIR/compiled/$config-no-overlap.mlir" "$link" "${losses[@]/VARIANT/no-overlap}")"
      fi
    done
  done
fi

# --- PyTorch -----------------------------------------------------------------
TORCH_OUT=""
if [ "$SKIP_TORCH" != 1 ]; then
  echo "(PyTorch: one 2-process job; output in $LOGS/torch.txt)" >&2
  torch_configs="$(echo $CONFIGS | tr ' ' ',')"
  torch_options=(--data "$DATA" --layers "$LAYERS" --configs "$torch_configs"
                 --latency-us "$LATENCY_US" --steps "$STEPS" --warmup "$WARMUP"
                 --bucket-cap-mb "$BUCKET_MB" --powersgd-rank "$POWERSGD_RANK"
                 --start-iter "$START_ITER" --lr "$LR" --world "$RANKS")
  : >"$LOGS/torch.txt"
  # Loopback and simulated links: one job on this machine.
  torch_links="$(for link in $LINKS; do [[ "$link" = net:* ]] || echo "$link"; done | paste -sd,)"
  if [ -n "$torch_links" ] &&
     ! "$PYTHON" "$HERE/torch_ddp.py" "${torch_options[@]}" --links "$torch_links" \
       >>"$LOGS/torch.txt" 2>&1; then
    tail -n 20 "$LOGS/torch.txt" >&2
    fail "torch_ddp.py failed (log: $LOGS/torch.txt)"
  fi
  # Real links: one process per host, rank 0's address as MASTER_ADDR.
  for link in $LINKS; do
    [[ "$link" = net:* ]] || continue
    make_hosts "$link"
    hosts="$(hosts_dir "$link")"
    echo "(PyTorch: $(link_label "$link"))" >&2
    pids=()
    for ((r = RANKS - 1; r >= 0; --r)); do
      GLOO_SOCKET_IFNAME=eth0 bash "$HOSTS_SH" exec "$hosts" "$r" \
        "$PYTHON" "$HERE/torch_ddp.py" "${torch_options[@]}" --links "$link" \
        --rank "$r" --master-addr "$(head -n 1 "$hosts/hosts" | cut -d' ' -f1)" \
        >"$LOGS/torch-${link#net:}.r$r.txt" 2>&1 &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do
      wait "$pid" || {
        tail -n 20 "$LOGS/torch-${link#net:}".r*.txt >&2
        fail "torch_ddp.py failed on $link (logs: $LOGS/torch-${link#net:}.r*.txt)"
      }
    done
    cat "$LOGS/torch-${link#net:}.r0.txt" >>"$LOGS/torch.txt"
  done
  TORCH_OUT="$(cat "$LOGS/torch.txt")"
fi

# torch_ms CONFIG LINK MODE
torch_ms() {
  awk -v c="$1" -v l="$2" -v m="$3" \
    '$1 == "torch" && $2 == c && $3 == l && $4 == m {print $6; found = 1; exit}
     END {if (!found) print "-"}' <<<"$TORCH_OUT"
}

# comm SEQUENTIAL COMPUTE and hidden OVERLAPPED SEQUENTIAL COMPUTE.
comm() {
  awk -v s="$1" -v c="$2" 'BEGIN {
    if (s == "-" || c == "-") print "-"; else printf "%.1f", s - c }'
}
hidden() {
  awk -v o="$1" -v s="$2" -v c="$3" 'BEGIN {
    if (o == "-" || s == "-" || c == "-") { print "-"; exit }
    if (s - c <= 0) { print "n/a"; exit }
    printf "%.0f%%", 100 * (s - o) / (s - c) }'
}

# --- the table ---------------------------------------------------------------
TORCH_COMPUTE="$(torch_ms any any compute)"
echo "| config | link | ours overlap ms | ours no overlap ms | ours compute ms | ours comm ms | ours hidden | torch DDP ms | torch sequential ms | torch compute ms | torch comm ms | torch hidden |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for link in $LINKS; do
  for config in $CONFIGS; do
    label="$config"
    [ "$config" = powersgd ] && label="PowerSGD r$POWERSGD_RANK"
    o="${OURS[$config,$link,overlap]:--}"
    s="${OURS[$config,$link,sequential]:--}"
    to="$(torch_ms "$config" "$link" ddp)"
    ts="$(torch_ms "$config" "$link" sequential)"
    echo "| $label | $(link_label "$link") | $o | $s | $OURS_COMPUTE | $(comm "$s" "$OURS_COMPUTE") | $(hidden "$o" "$s" "$OURS_COMPUTE") | $to | $ts | $TORCH_COMPUTE | $(comm "$ts" "$TORCH_COMPUTE") | $(hidden "$to" "$ts" "$TORCH_COMPUTE") |"
  done
done
echo
echo "ms per step: median over $STEPS steps after $WARMUP, of the slowest of $RANKS ranks."
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (at the start: see above)."
echo "comm = no overlap (sequential) - compute; hidden = (no overlap - overlap) / comm."
echo "Compute-only is measured once per side and used on every row."
if [[ " $LINKS " = *" net:"* ]]; then
  echo "Rows marked \"real link\": the ranks of both sides run one per host, each host a network"
  echo "namespace on a bridge whose link is limited by tc's tbf in both directions (bench/net/hosts.sh);"
  echo "Open MPI (ours) and gloo (PyTorch) over TCP between them. Nothing is modelled."
fi
if [[ " $LINKS " = *" "[0-9]* ]]; then
  echo "Rows marked \"simulated link\": every collective held until latency ($LATENCY_US us) +"
  if [ "$SIM_LINK_VIA" = env ]; then
    via="DDPRT_SIMULATED_LINK=<gbps>,$LATENCY_US"
  else
    via="ddp-run $SIM_LINK_FLAG=<gbps>,$LATENCY_US"
  fi
  echo "bytes / bandwidth has passed (ours: $via; PyTorch: torch_ddp.py's model of it)."
fi
((HAVE_NO_OVERLAP)) || echo "ddp-opt has no '$NO_OVERLAP_OPTION': 'ours no overlap' left out."
((HAVE_SIM_LINK)) || echo "ddp-run has no $SIM_LINK_FLAG: ours left out on simulated links."

# Buckets and a check that both sides train the same model.
echo
for config in $CONFIGS; do
  [ -f "$WORK_DIR/compiled/$config.plan.txt" ] &&
    echo "- ours $config: $(tail -n 1 "$WORK_DIR/compiled/$config.plan.txt")"
  summary="$WORK_DIR/ours/$config-$(echo $LINKS | cut -d' ' -f1)-overlap/summary.json"
  [ -f "$summary" ] && "$PYTHON" - "$summary" <<'EOF'
import json, sys
summary = json.load(open(sys.argv[1]))
per_step = {role: n / summary["steps"] for role, n in summary["collectives"].items() if n}
print("- ours collectives per step (by role, averaged over the run): "
      + ", ".join("%s %g" % item for item in per_step.items()))
EOF
  buckets="$(awk -v c="$config" '$1 == "torch" && $2 == "buckets" && $3 == c {$1 = $2 = $3 = ""; print; exit}' <<<"$TORCH_OUT" | xargs)"
  [ -n "$buckets" ] && echo "- torch $config: DDP buckets (bytes, in hook order): $buckets"
done
torch_losses="$(awk '$1 == "torch" && $2 == "loss" {$1 = $2 = ""; print; exit}' <<<"$TORCH_OUT" | xargs)"
if [ -n "$torch_losses" ] && [ -f "$WORK_DIR/ours/losses/plain-overlap.r0.s0.npy" ]; then
  "$PYTHON" - "$WORK_DIR/ours/losses" "$torch_losses" <<'EOF'
import sys
import numpy as np
theirs = [float(v) for v in sys.argv[2].split()]
ours = [float(np.load(f"{sys.argv[1]}/plain-overlap.r0.s{k}.npy")) for k in range(len(theirs))]
worst = max(abs(a - b) / abs(b) for a, b in zip(ours, theirs))
print("- same model: rank 0's loss over %d plain steps, ours %.6g -> %.6g, PyTorch %.6g -> %.6g"
      " (largest relative difference %.1e)" % (len(ours), ours[0], ours[-1], theirs[0], theirs[-1], worst))
EOF
fi
# Overlap must not change the numerics (issue 13, item 6).
if ((HAVE_NO_OVERLAP)) && [ -d "$WORK_DIR/ours/losses" ]; then
  "$PYTHON" - "$WORK_DIR/ours/losses" "$CONFIGS" "$RANKS" "$((WARMUP + STEPS))" <<'EOF'
import sys
import numpy as np
directory, configs, ranks, steps = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), int(sys.argv[4])
for config in configs:
    def losses(variant):
        return [np.load(f"{directory}/{config}-{variant}.r{r}.s{s}.npy").tobytes()
                for r in range(ranks) for s in range(steps)]
    same = losses("overlap") == losses("no-overlap")
    print("- ours %s: local losses with and without overlap, %d ranks x %d steps: %s"
          % (config, ranks, steps, "bitwise identical" if same else "DIFFERENT"))
EOF
fi
