# shellcheck shell=bash
# Checks of a Prometheus exposition scraped into the file $M, shared by the e2e scripts
# that test --metrics (scripts/e2e/ops.sh for weir-sink, scripts/e2e/serve.sh for weir-serve).

# wellformed: the Prometheus exposition in $M is well-formed: every sample line parses,
# every family has HELP then TYPE before its samples, and there is at least one sample.
wellformed() {
  awk '
    /^# HELP weir_[a-z0-9_]+ / { help[$3] = 1; next }
    /^# TYPE weir_[a-z0-9_]+ (counter|gauge)$/ { if (!help[$3]) { print "TYPE before HELP: " $3; bad = 1 } type[$3] = 1; next }
    /^#/ { print "bad comment: " $0; bad = 1; next }
    /^$/ { next }
    {
      if ($0 !~ /^weir_[a-z0-9_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? -?[0-9.]+(e[-+]?[0-9]+)?$/) { print "bad sample: " $0; bad = 1; next }
      name = $1; sub(/\{.*/, "", name)
      if (!type[name]) { print "sample without TYPE: " name; bad = 1 }
      n++
    }
    END { if (n == 0) { print "no samples"; bad = 1 } exit bad }' "$M"
}
# prom 'name{labels}': that exact series' value in $M ("missing" if absent).
prom() {
  awk -v s="$1" '$1 == s { print $2; found = 1 } END { if (!found) print "missing" }' "$M"
}
