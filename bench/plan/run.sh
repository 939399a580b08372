#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# ddp-plan's predictions against measurement: for ResNet-50's and GPT-2
# medium's gradient shapes on 2 ranks, every fixed plan (plain, fp16, bf16,
# PowerSGD rank 1, 2, 4 on every bucket) and the planned one, each compiled
# by ddp-opt --ddp-plan with a profile that ddprt-calibrate measured on the
# same link just before, then run by ddp-run; predicted and measured time
# per step side by side, the prediction's error, and the planned step
# against the best fixed one. Links: loopback (this machine's MPI) and
# simulated 100, 10 and 1 Gb/s links (the runtime holds each collective as
# such a link would: a model, not a network; ddp-run --simulated-link),
# and real links net:RATE (net:1gbit, net:100mbit, net:veth): the 2 ranks
# on 2 hosts of bench/net/hosts.sh (network namespaces, root), calibrated
# and run across them with --hostfile.
# PyTorch 1.13's hooks on the same shapes, ranks and link follow each
# model on loopback and on real links (DDP, gloo: allreduce_hook,
# fp16_compress_hook, powerSGD_hook at the PowerSGD ranks of PLANS;
# bench/cpu/torch_hooks.py); a table sets the planned step against the
# fastest of them, and the last one each plan against PyTorch's hook of
# the same kind (plain: allreduce_hook) and its plain allreduce; TORCH=0
# leaves them out. Simulated links have
# no PyTorch side: only our runtime models them.
#   bash bench/plan/run.sh [steps]
# MODELS="resnet50 gpt2-medium" LINKS="loopback 100 10 1" PLANS="plain ..."
# choose the rows; ROUNDS=N runs every plan N times, interleaved, and
# reports the median and the spread (this VM's runs of one compiled step
# differ by up to 40%); OUT=FILE also writes the table there. GPT-2 medium
# at 1 Gb/s takes about two minutes per plan and round.
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS="${1:-8}"
MODELS="${MODELS:-resnet50 gpt2-medium}"
LINKS="${LINKS:-loopback 100 10 1}"
BUILD_DIR="${BUILD_DIR:-build}"
PYTHON=/usr/bin/python3
WORLD=2
# Latency of each simulated link (us): a switch hop and the software above.
declare -A LATENCY=([100]=10 [10]=20 [1]=50)
read -r -a PLANS <<<"${PLANS:-plain fp16 bf16 powersgd-r1 powersgd-r2 powersgd-r4 planned}"
ROUNDS="${ROUNDS:-1}"
TORCH="${TORCH:-1}"

cmake --build "$BUILD_DIR" --target ddp-opt ddp-run ddprt-calibrate >/dev/null
WORK=$(mktemp -d)
# The tools are copied: a rebuild during the run does not change them.
mkdir -p "$WORK/bin" "$WORK/lib"
cp "$BUILD_DIR/bin/ddp-opt" "$BUILD_DIR/bin/ddp-run" "$BUILD_DIR/runtime/ddprt-calibrate" "$WORK/bin/"
cp -P "$BUILD_DIR"/lib/libddprt.so* "$WORK/lib/"
MPIRUN=(mpirun --oversubscribe -np "$WORLD")
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
# Real links: WORLD hosts per net:RATE link, removed at exit.
HOSTS_SH=bench/net/hosts.sh
NET_HOSTS=()
trap 'for d in "${NET_HOSTS[@]}"; do bash "$HOSTS_SH" down "$d" || true; done; rm -rf "$WORK"' EXIT
# on_link LINK TOOL ARGS...: TOOL on WORLD ranks of that link.
on_link() {
  local link="$1"
  shift
  if [[ "$link" = net:* ]]; then
    local hosts="$WORK/hosts-${link#net:}"
    bash "$HOSTS_SH" exec "$hosts" 0 env $(cat "$hosts/mpi.env") \
      "$1" --np="$WORLD" --hostfile="$hosts/hostfile" "${@:2}"
  else
    "${MPIRUN[@]}" "$@"
  fi
}
for link in $LINKS; do
  if [[ "$link" = net:* ]]; then
    bash "$HOSTS_SH" up "$WORK/hosts-${link#net:}" "$WORLD" "${link#net:}"
    NET_HOSTS+=("$WORK/hosts-${link#net:}")
  fi
done

options_of() { # plan -> ddp-compress's plan options
  case "$1" in
    planned) echo "" ;;
    powersgd-r*+fp16) local r=${1#powersgd-r}; echo "plan-choices=powersgd+fp16 plan-ranks=${r%+fp16}" ;;
    powersgd-r*) echo "plan-choices=powersgd plan-ranks=${1#powersgd-r}" ;;
    *) echo "plan-choices=$1" ;;
  esac
}

RESULTS="$WORK/results.jsonl"

# torch_hooks MODEL LINK: PyTorch's hooks on WORLD ranks of that link, one
# JSON line each (plan "torch:KIND").
torch_hooks() {
  local model="$1" link="$2" kinds="allreduce,fp16,powersgd" rank out
  local ranks=()
  for plan in "${PLANS[@]}"; do
    [[ "$plan" =~ ^powersgd-r([0-9]+)$ ]] && ranks+=("${BASH_REMATCH[1]}")
  done
  [ "${#ranks[@]}" -gt 0 ] || ranks=(2)
  for rank in "${ranks[@]}"; do
    local args=(bench/cpu/torch_hooks.py --model "$model" --world "$WORLD"
                --steps "$STEPS" --rank "$rank" --kinds "$kinds")
    if [[ "$link" = net:* ]]; then
      local hosts="$WORK/hosts-${link#net:}" r
      local master
      master="$(head -n 1 "$hosts/hosts" | cut -d' ' -f1)"
      for ((r = WORLD - 1; r >= 1; --r)); do
        GLOO_SOCKET_IFNAME=eth0 bash "$HOSTS_SH" exec "$hosts" "$r" "$PYTHON" \
          "${args[@]}" --process-rank "$r" --master-addr "$master" >/dev/null &
      done
      out=$(GLOO_SOCKET_IFNAME=eth0 bash "$HOSTS_SH" exec "$hosts" 0 "$PYTHON" \
        "${args[@]}" --process-rank 0 --master-addr "$master")
      wait
    else
      out=$("$PYTHON" "${args[@]}")
    fi
    printf '%s\n' "$out" >"$WORK/torch.out"
    "$PYTHON" - "$model" "$link" "$rank" "$WORK/torch.out" <<'PY'
import json, sys
model, link, rank, path = sys.argv[1:]
for line in open(path):
    f = line.split()
    if len(f) >= 4 and f[0] == "torch" and f[2] == "median":
        kind = f[1] if f[1] != "powersgd" else "powersgd-r" + rank
        print(json.dumps({"model": model, "link": link, "plan": "torch:" + kind,
                          "measured_ms": float(f[3])}))
PY
    kinds=powersgd
  done
}
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $WORLD ranks, $STEPS steps, source $(git rev-parse --short HEAD)"
for link in $LINKS; do
  sim=()
  if [[ "$link" != loopback && "$link" != net:* ]]; then
    sim=(--simulated-link="$link,${LATENCY[$link]}")
  fi
  profile="$WORK/profile.$link.json"
  on_link "$link" "$WORK/bin/ddprt-calibrate" --out="$profile" --reps=3 "${sim[@]}" >/dev/null
  for model in $MODELS; do
    dir="$WORK/$model"
    if [ ! -f "$dir/step.mlir" ]; then
      count=$("$PYTHON" bench/cpu/gen_step.py "$dir" --world "$WORLD" --model "$model")
      echo "$count" >"$dir/count"
    fi
    count=$(cat "$dir/count")
    inputs=()
    carry=""
    for ((i = 0; i < count; ++i)); do
      inputs+=("--input=$dir/g.r{rank}.a$i.npy")
      carry+="${carry:+,}$i:$i"
    done
    for plan in "${PLANS[@]}"; do
      "$WORK/bin/ddp-opt" "$dir/step.mlir" \
        --ddp-compress="plan=$profile start-iter=0 plan-tolerance=0 $(options_of "$plan")" \
        --ddp-compression-report="output=/dev/null json=$WORK/$model.$link.$plan.report.json" \
        -o "$WORK/$model.$link.$plan.mlir"
    done
    for ((round = 0; round < ROUNDS; ++round)); do
    for plan in "${PLANS[@]}"; do
      compiled="$WORK/$model.$link.$plan.mlir"
      report="$WORK/$model.$link.$plan.report.json"
      summary="$WORK/$model.$link.$plan.summary.json"
      on_link "$link" "$WORK/bin/ddp-run" "$compiled" --steps="$STEPS" --quiet \
        "${inputs[@]}" --carry="$carry" "${sim[@]}" --summary-json="$summary" >/dev/null
      "$PYTHON" - "$model" "$link" "$plan" "$report" "$summary" >>"$RESULTS" <<'PY'
import json, sys
model, link, plan, report, summary = sys.argv[1:]
r = json.load(open(report))["plan"]
s = json.load(open(summary))
choices = sorted({b["choice"] for b in r["buckets"]})
print(json.dumps({"model": model, "link": link, "plan": plan,
                  "predicted_ms": r["total_us"]["planned"] / 1e3,
                  "measured_ms": s["ms_per_step"], "choices": choices,
                  "bytes": s.get("bytes_sent_per_step")}))
PY
    done
    done
    if [ "$TORCH" != 0 ] && [[ "$link" = loopback || "$link" = net:* ]]; then
      torch_hooks "$model" "$link" >>"$RESULTS"
    fi
  done
done

"$PYTHON" - "$RESULTS" <<'PY' | tee "${OUT:-/dev/null}"
import json, statistics, sys
everything = [json.loads(line) for line in open(sys.argv[1])]
runs = [r for r in everything if not r["plan"].startswith("torch:")]
torch_runs = [r for r in everything if r["plan"].startswith("torch:")]
def name(link):
    if link.startswith("net:"):
        return f"{link[4:]} (real link)"
    return "loopback" if link == "loopback" else f"{link} Gb/s (sim)"
# One row per (model, link, plan): the median of its rounds, and their range.
rows = {}
for r in runs:
    rows.setdefault((r["model"], r["link"], r["plan"]), []).append(r)
merged = []
for (model, link, plan), group in rows.items():
    times = [r["measured_ms"] for r in group]
    merged.append(dict(group[0], measured_ms=statistics.median(times),
                       low=min(times), high=max(times), rounds=len(times)))
spread = any(r["rounds"] > 1 for r in merged)
print("| model | link | plan | predicted ms | measured ms | error |"
      + (" runs (min-max ms) |" if spread else "") + " buckets became |")
print("|---|---|---|---:|---:|---:|" + ("---:|" if spread else "") + "---|")
for r in merged:
    error = (r["predicted_ms"] - r["measured_ms"]) / r["measured_ms"] * 100
    extra = f" {r['rounds']} ({r['low']:.1f}-{r['high']:.1f}) |" if spread else ""
    print(f"| {r['model']} | {name(r['link'])} | {r['plan']} | {r['predicted_ms']:.1f} | "
          f"{r['measured_ms']:.1f} | {error:+.0f}% |{extra} {', '.join(r['choices'])} |")
def table(header, align, lines):
    """A markdown table after a blank line (align: l or r per column);
    nothing without rows."""
    if not lines:
        return
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---:" if a == "r" else "---" for a in align) + "|")
    print("\n".join(lines))
def theirs_of(model, link):
    """PyTorch's hooks on these shapes and link: kind -> ms."""
    return {r["plan"][6:]: r["measured_ms"] for r in torch_runs
            if r["model"] == model and r["link"] == link}
def versus(theirs, ours):
    ratio = theirs / ours
    return f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"
groups = {}
for r in merged:
    groups.setdefault((r["model"], r["link"]), []).append(r)
planned_lines, fastest_lines, kind_lines = [], [], []
for (model, link), group in groups.items():
    fixed = [r for r in group if r["plan"] != "planned"]
    planned = next((r for r in group if r["plan"] == "planned"), None)
    plain = next((r for r in group if r["plan"] == "plain"), None)
    theirs = theirs_of(model, link)
    if fixed and planned:
        best = min(fixed, key=lambda r: r["measured_ms"])
        same = next((r["plan"] for r in fixed if r["choices"] == planned["choices"]), "-")
        worst = max(abs(r["predicted_ms"] - r["measured_ms"]) / r["measured_ms"] for r in group)
        planned_lines.append(
            f"| {model} | {name(link)} | {planned['measured_ms']:.1f} | {same} | {best['plan']} | "
            f"{best['measured_ms']:.1f} | {(planned['measured_ms'] / best['measured_ms'] - 1) * 100:+.1f}% | "
            f"{plain['measured_ms'] if plain else float('nan'):.1f} | {worst * 100:.0f}% |")
    if theirs and planned:
        fastest = min(theirs, key=theirs.get)
        listed = ", ".join(f"{k} {v:.1f}" for k, v in theirs.items())
        fastest_lines.append(
            f"| {model} | {name(link)} | {planned['measured_ms']:.1f} | {listed} | "
            f"{fastest} {theirs[fastest]:.1f} | {versus(theirs[fastest], planned['measured_ms'])} |")
    # Each plan against PyTorch's hook of the same kind, and against its
    # plain DDP allreduce (allreduce_hook), on the same link.
    for r in group:
        kind = {"plain": "allreduce", "fp16": "fp16"}.get(r["plan"], r["plan"])
        if kind not in theirs:
            continue
        against_plain = versus(theirs["allreduce"], r["measured_ms"]) if "allreduce" in theirs else "-"
        kind_lines.append(f"| {model} | {name(link)} | {r['plan']} | {r['measured_ms']:.1f} | "
                          f"{kind} {theirs[kind]:.1f} | {versus(theirs[kind], r['measured_ms'])} | "
                          f"{against_plain} |")
table(["model", "link", "planned ms", "same plan as", "best fixed plan", "its ms",
       "planned vs best fixed", "plain ms", "worst prediction error"], "llrllrrrr",
      planned_lines)
table(["model", "link", "planned ms", "PyTorch's hooks, same shapes, ranks and link (ms)",
       "PyTorch's fastest", "planned vs it"], "llrlrr", fastest_lines)
table(["model", "link", "plan", "ours ms", "PyTorch's hook of that kind (ms)", "ours vs it",
       "ours vs PyTorch's plain allreduce"], "lllrlrr", kind_lines)
PY
