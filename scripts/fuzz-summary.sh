#!/usr/bin/env bash
# Prints what `make fuzz-long` reached for each target, from its log in TOOLS/fuzz-long and its
# corpus in TOOLS/fuzz-corpus: executions, time, final corpus and coverage. cargo-fuzz targets
# report libFuzzer's last status line (cov: edges, ft: features, corp: entries/bytes) and
# -print_final_stats; Go targets (named Fuzz*) report go test -fuzz's last status line
# (new interesting: inputs this run added; total: the corpus it ended with, seeds included).
#
# usage: scripts/fuzz-summary.sh TOOLS TARGET...
set -euo pipefail

tools=$1
shift
printf '%-16s %12s %9s %8s  %s\n' target executions exec/s seconds "corpus and coverage"
for t in "$@"; do
  log=$tools/fuzz-long/$t.log
  corpus=$tools/fuzz-corpus/$t
  files=$(find "$corpus" -type f 2>/dev/null | wc -l)
  if [ ! -f "$log" ]; then
    printf '%-16s no log (%s)\n' "$t" "$log"
    continue
  fi
  case "$t" in
    Fuzz*)
      # fuzz: elapsed: 3m0s, execs: 1687047 (9372/sec), new interesting: 78 (total: 89)
      last=$(grep -E '^fuzz: elapsed: .*execs: ' "$log" | tail -1 || true)
      execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")
      elapsed=$(sed -nE 's/^fuzz: elapsed: ([^,]+),.*/\1/p' <<<"$last")
      interesting=$(sed -nE 's/.*new interesting: ([0-9]+) \(total: ([0-9]+)\).*/\1 new, \2 total/p' <<<"$last")
      secs=$(awk -v e="$elapsed" 'BEGIN { s = 0; n = split(e, p, /[hms]/); m = e; gsub(/[0-9.]/, "", m);
        for (i = 1; i <= length(m); i++) { u = substr(m, i, 1); v = p[i] + 0;
          s += (u == "h" ? 3600 * v : u == "m" ? 60 * v : v) } printf "%d", s }')
      rate=$(awk -v x="${execs:-0}" -v s="$secs" 'BEGIN { printf "%d", (s > 0 ? x / s : 0) }')
      printf '%-16s %12s %9s %8s  interesting inputs: %s; corpus files: %s\n' \
        "$t" "${execs:-?}" "$rate" "$secs" "${interesting:-?}" "$files"
      ;;
    *)
      # #100000000 DONE   cov: 1502 ft: 7421 corp: 803/97Kb lim: 4096 exec/s: 40112 rss: 61Mb
      last=$(grep -E '^#[0-9]+\s.*cov: ' "$log" | tail -1 || true)
      cov=$(sed -nE 's/.*(cov: [0-9]+ ft: [0-9]+ corp: [^ ]+).*/\1/p' <<<"$last")
      execs=$(sed -nE 's/^stat::number_of_executed_units: +([0-9]+)/\1/p' "$log" | tail -1)
      rate=$(sed -nE 's/^stat::average_exec_per_sec: +([0-9]+)/\1/p' "$log" | tail -1)
      secs=$(sed -nE 's/^Done [0-9]+ runs in ([0-9]+) second.*/\1/p' "$log" | tail -1)
      state=""
      grep -qE '^==[0-9]+== ERROR|^SUMMARY: libFuzzer|panicked at' "$log" && state=" CRASHED (see the log)"
      printf '%-16s %12s %9s %8s  %s; corpus files: %s%s\n' \
        "$t" "${execs:-?}" "${rate:-?}" "${secs:-?}" "${cov:-?}" "$files" "$state"
      ;;
  esac
done
