#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Compile-speed benchmark of `ddp-opt --insert-powersgd=rank=2`.
#
#   bash bench/run_ddp_opt_bench.sh [path/to/ddp-opt]
#
# Builds nothing. Generates modules with 1k, 10k and 100k gradient allreduces
# (bench/gen_allreduce_model.py) in a temp dir and times, for each:
#   parse      ddp-opt FILE -o /dev/null                       (peer baseline)
#   powersgd   ddp-opt --insert-powersgd=rank=2 FILE -o /dev/null
#   full       ddp-opt --ddp-compress="powersgd-rank=2" FILE -o /dev/null
# Wall time is the median of RUNS runs (hyperfine when installed, otherwise a
# loop around /usr/bin/time); peak RSS is /usr/bin/time -f %M (max over runs).
#
# Environment: RUNS (default 5), SIZES (default "1000 10000 100000"),
#              PYTHON (default python3), KEEP_TMP=1 keeps the generated files,
#              GEN_ARGS extra arguments for the generator (e.g.
#              "--tensors-per-func 2000").
# Target: insert-powersgd=rank=2 on 10k allreduces under 2 s, linear growth.
#
# Lowering (LOWER_SIZES, default "1000 2000 4000 10000"; empty skips it): one run
# each of
#   lower      ddp-opt --insert-powersgd=rank=2 --ddp-lower-to-llvm FILE -o /dev/null
# (the pipeline ddp-run's JIT uses), wall time and peak RSS from
# /usr/bin/time, with the growth against the previous size. LOWER_TIMEOUT
# (seconds, default 600) stops a size that runs longer and ends the section.
#
# Upstream alone (UPSTREAM_SIZES, default "1000 2000 4000"; empty skips
# it): the same lowering with ddp-lower-to-llvm{scale-workarounds=false},
# i.e. without bufferize-entry-signatures, split-functions,
# split-deallocations and merge-ifs, against the lowering with them at
# each size. When upstream's passes alone grow linearly, the workarounds
# can go (include/ddp/Transforms/Passes.td).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
ddp_opt="${1:-$root/build/bin/ddp-opt}"
runs="${RUNS:-5}"
sizes="${SIZES:-1000 10000 100000}"
python="${PYTHON:-python3}"
gen_args="${GEN_ARGS:-}"

[ -x "$ddp_opt" ] || { echo "error: ddp-opt not found or not executable: $ddp_opt" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "error: /usr/bin/time (GNU time) is needed for peak RSS" >&2; exit 2; }
command -v "$python" >/dev/null || python=/usr/bin/python3

tmp="$(mktemp -d "${TMPDIR:-/tmp}/ddp-opt-bench.XXXXXX")"
if [ "${KEEP_TMP:-0}" = 1 ]; then echo "keeping $tmp"; else trap 'rm -rf "$tmp"' EXIT; fi

have_hyperfine=0
command -v hyperfine >/dev/null 2>&1 && have_hyperfine=1

echo "== ddp-opt compile-speed benchmark"
echo "ddp-opt:  $ddp_opt"
echo "date:     $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
echo "machine:  $(nproc) cores, $(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)"
echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
busy="$(ps -eo comm= 2>/dev/null | awk '$1 ~ /^(cc1plus|clang|clang\+\+|ld|ld\.lld|ninja|make)$/ { n++ } END { print n + 0 }')"
echo "compilers running at start: $busy (another build on this machine skews the figures)"
if [ "$have_hyperfine" = 1 ]; then
  echo "timing:   hyperfine, median of $runs runs (+1 warmup); peak RSS from /usr/bin/time"
else
  echo "timing:   /usr/bin/time, median of $runs runs (hyperfine not installed)"
fi
echo

# run_case NAME FILE ARGS... -> sets RES_T (median wall seconds) and RES_M
# (peak RSS in KB). Runs in this shell, so a failing ddp-opt stops the script.
run_case() {
  local name="$1" file="$2"; shift 2
  local log="$tmp/$name.time" i
  : > "$log"
  local med
  if [ "$have_hyperfine" = 1 ]; then
    local cmd
    cmd="$(printf '%q ' "$ddp_opt" "$@" "$file") -o /dev/null"
    hyperfine -N --warmup 1 --runs "$runs" --export-json "$tmp/$name.json" \
      --style none "$cmd" >/dev/null 2>&1 || { echo "error: $name failed" >&2; exit 1; }
    med="$("$python" -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["results"][0]["median"])' "$tmp/$name.json")"
    /usr/bin/time -a -o "$log" -f '%e %M' "$ddp_opt" "$@" "$file" -o /dev/null \
      || { echo "error: $name failed" >&2; exit 1; }
  else
    # one untimed warmup (page cache, dynamic loader)
    "$ddp_opt" "$@" "$file" -o /dev/null || { echo "error: $name failed" >&2; exit 1; }
    local walls=()
    for ((i = 0; i < runs; i++)); do
      local t0=$EPOCHREALTIME
      /usr/bin/time -a -o "$log" -f '%e %M' "$ddp_opt" "$@" "$file" -o /dev/null \
        || { echo "error: $name failed" >&2; exit 1; }
      local t1=$EPOCHREALTIME
      walls+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')")
    done
    med="$(printf '%s\n' "${walls[@]}" | sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
  fi
  local rss
  rss="$(awk 'NF == 2 && $2 ~ /^[0-9]+$/ { if ($2 > m) m = $2 } END { print m + 0 }' "$log")"
  RES_T="$med"
  RES_M="$rss"
}

declare -A T_PARSE T_PSGD T_FULL M_PARSE M_PSGD M_FULL
# Fixed cost of starting ddp-opt (loading the MLIR libraries, registering
# dialects and passes): an empty module through the full pipeline.
echo 'module {}' > "$tmp/empty.mlir"
run_case empty "$tmp/empty.mlir" '--ddp-compress=powersgd-rank=2'
T_EMPTY="$RES_T"; M_EMPTY="$RES_M"
echo "-- empty module (startup cost): $T_EMPTY s  $M_EMPTY KB"
for n in $sizes; do
  f="$tmp/allreduce_$n.mlir"
  # shellcheck disable=SC2086
  "$python" "$here/gen_allreduce_model.py" --tensors "$n" $gen_args -o "$f"
  echo "-- $n tensors: $(du -h "$f" | cut -f1) of MLIR"
  run_case "parse_$n" "$f"
  T_PARSE[$n]="$RES_T"; M_PARSE[$n]="$RES_M"
  echo "   parse-only          ${T_PARSE[$n]} s  ${M_PARSE[$n]} KB"
  run_case "psgd_$n" "$f" --insert-powersgd=rank=2
  T_PSGD[$n]="$RES_T"; M_PSGD[$n]="$RES_M"
  echo "   insert-powersgd     ${T_PSGD[$n]} s  ${M_PSGD[$n]} KB"
  run_case "full_$n" "$f" '--ddp-compress=powersgd-rank=2'
  T_FULL[$n]="$RES_T"; M_FULL[$n]="$RES_M"
  echo "   ddp-compress(full)  ${T_FULL[$n]} s  ${M_FULL[$n]} KB"
done
echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at end"
echo

mb() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }'; }

echo "| tensors | parse-only s | insert-powersgd s | per 1k tensors s | ratio to parse-only | growth vs previous | ddp-compress (full) s | peak RSS parse / powersgd / full MB |"
echo "|--------:|-------------:|------------------:|-----------------:|--------------------:|-------------------:|----------------------:|------------------------------------:|"
prev=""
for n in $sizes; do
  per1k="$(awk -v t="${T_PSGD[$n]}" -v n="$n" 'BEGIN { printf "%.4f", t * 1000 / n }')"
  growth="-"
  [ -n "$prev" ] && growth="$(div "${T_PSGD[$n]}" "${T_PSGD[$prev]}") (x$(div "$n" "$prev") tensors)"
  echo "| $n | ${T_PARSE[$n]} | ${T_PSGD[$n]} | $per1k | $(div "${T_PSGD[$n]}" "${T_PARSE[$n]}") | $growth | ${T_FULL[$n]} | $(mb "${M_PARSE[$n]}") / $(mb "${M_PSGD[$n]}") / $(mb "${M_FULL[$n]}") |"
  prev="$n"
done
echo

if [[ " $sizes " == *" 10000 "* && " $sizes " == *" 100000 "* ]]; then
  g_psgd="$(div "${T_PSGD[100000]}" "${T_PSGD[10000]}")"
  echo "100k/10k growth (linear = ~10): parse-only $(div "${T_PARSE[100000]}" "${T_PARSE[10000]}"), insert-powersgd $g_psgd, ddp-compress $(div "${T_FULL[100000]}" "${T_FULL[10000]}")"
  net() { awk -v a="$1" -v b="$2" -v e="$T_EMPTY" 'BEGIN { if (b - e > 0) printf "%.2f", (a - e) / (b - e); else printf "n/a" }'; }
  echo "100k/10k growth less the startup cost ($T_EMPTY s): parse-only $(net "${T_PARSE[100000]}" "${T_PARSE[10000]}"), insert-powersgd $(net "${T_PSGD[100000]}" "${T_PSGD[10000]}"), insert-powersgd minus parse-only $(awk -v a="${T_PSGD[100000]}" -v b="${T_PARSE[100000]}" -v c="${T_PSGD[10000]}" -v d="${T_PARSE[10000]}" 'BEGIN { if (c - d > 0) printf "%.2f", (a - b) / (c - d); else printf "n/a" }'), ddp-compress $(net "${T_FULL[100000]}" "${T_FULL[10000]}")"
  verdict="$(awk -v t="${T_PSGD[10000]}" -v g="$g_psgd" 'BEGIN {
    ok_t = (t < 2.0); ok_g = (g + 0 <= 13.0)
    printf "%s: insert-powersgd=rank=2 on 10k allreduces %s s (%s 2 s), 100k/10k growth %s (%s)",
      (ok_t && ok_g) ? "TARGET MET" : "TARGET NOT MET", t, ok_t ? "under" : "NOT under",
      g, ok_g ? "linear" : "superlinear" }')"
  echo "$verdict"
fi

# Lowering at scale: one run per size (the largest take minutes before the
# fix), time and peak RSS from /usr/bin/time.
lower_sizes="${LOWER_SIZES-1000 2000 4000 10000}"
lower_timeout="${LOWER_TIMEOUT:-600}"
if [ -n "$lower_sizes" ]; then
  echo
  echo "== lowering: ddp-opt --insert-powersgd=rank=2 --ddp-lower-to-llvm (one run each, timeout $lower_timeout s)"
  echo "| tensors | lowering s | per 1k tensors s | time growth vs previous | peak RSS MB | RSS growth vs previous |"
  echo "|--------:|-----------:|-----------------:|------------------------:|------------:|-----------------------:|"
  prev_n="" prev_t="" prev_m=""
  for n in $lower_sizes; do
    f="$tmp/allreduce_$n.mlir"
    # shellcheck disable=SC2086
    [ -f "$f" ] || "$python" "$here/gen_allreduce_model.py" --tensors "$n" $gen_args -o "$f"
    log="$tmp/lower_$n.time"
    if ! timeout "$lower_timeout" /usr/bin/time -o "$log" -f '%e %M' "$ddp_opt" \
        --insert-powersgd=rank=2 --ddp-lower-to-llvm "$f" -o /dev/null; then
      echo "| $n | > $lower_timeout (stopped or failed) | | | | |"
      break
    fi
    read -r t m < <(tail -1 "$log")
    per1k="$(awk -v t="$t" -v n="$n" 'BEGIN { printf "%.3f", t * 1000 / n }')"
    tg="-" mg="-"
    if [ -n "$prev_n" ]; then
      tg="$(div "$t" "$prev_t") (x$(div "$n" "$prev_n") tensors)"
      mg="$(div "$m" "$prev_m")"
    fi
    echo "| $n | $t | $per1k | $tg | $(mb "$m") | $mg |"
    prev_n="$n" prev_t="$t" prev_m="$m"
  done
  echo "linear growth: time and RSS ratios equal the tensor ratio"
fi

upstream_sizes="${UPSTREAM_SIZES-1000 2000 4000}"
if [ -n "$upstream_sizes" ]; then
  echo
  echo "== upstream alone: --ddp-lower-to-llvm=scale-workarounds=false against the default (one run each, timeout $lower_timeout s)"
  echo "| tensors | with workarounds s | upstream alone s | upstream / with | upstream growth vs previous |"
  echo "|--------:|-------------------:|-----------------:|----------------:|----------------------------:|"
  prev_n="" prev_u=""
  for n in $upstream_sizes; do
    f="$tmp/allreduce_$n.mlir"
    # shellcheck disable=SC2086
    [ -f "$f" ] || "$python" "$here/gen_allreduce_model.py" --tensors "$n" $gen_args -o "$f"
    times=()
    for workarounds in true false; do
      log="$tmp/upstream_${n}_$workarounds.time"
      if ! timeout "$lower_timeout" /usr/bin/time -o "$log" -f '%e %M' "$ddp_opt" \
          --insert-powersgd=rank=2 --ddp-lower-to-llvm="scale-workarounds=$workarounds" \
          "$f" -o /dev/null; then
        times+=("")
        break
      fi
      times+=("$(tail -1 "$log" | cut -d' ' -f1)")
    done
    w="${times[0]}" u="${times[1]:-}"
    if [ -z "$u" ]; then
      echo "| $n | ${w:-failed} | > $lower_timeout (stopped or failed) | | |"
      break
    fi
    ug="-"
    [ -n "$prev_n" ] && ug="$(div "$u" "$prev_u") (x$(div "$n" "$prev_n") tensors)"
    echo "| $n | $w | $u | $(div "$u" "$w") | $ug |"
    prev_n="$n" prev_u="$u"
  done
fi
