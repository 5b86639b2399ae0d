#!/usr/bin/env bash
# Regenerates every lab result under docs/lab/ and rewrites the lab's sections of
# docs/lab.md (between <!-- lab:NAME --> and <!-- /lab:NAME --> markers; other sections,
# such as "Per-stage cost", are left alone). Each step is bounded to 10 minutes.
. "$(dirname "$0")/common.sh"
lab_build
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
scripts/lab/flush-sweep.sh
scripts/lab/psh.sh
scripts/lab/abc.sh
scripts/lab/rr.sh
scripts/lab/rr-stages.sh
scripts/lab/stages-flows.sh
timeout 600 scripts/lab/conns.sh || echo "conns.sh failed (needs about 4 GB of memory for the million-connection row)" > "$OUT/conns.md"
timeout 600 scripts/lab/compare-kernel.sh || echo "compare-kernel.sh failed (needs root for ip netns)" > "$OUT/compare_kernel.md"
timeout 600 scripts/lab/compare-kernel-rr.sh --write-docs || echo "compare-kernel-rr.sh failed (needs root for ip netns, sockperf, and \`weir-bench rr\`)" > "$OUT/compare_kernel_rr.md"
timeout 600 scripts/lab/compare-kernel-rr.sh --rx-burst 32 --write-docs || echo "compare-kernel-rr.sh --rx-burst 32 failed (needs root for ip netns, sockperf, and \`weir-bench rr\`)" > "$OUT/compare_kernel_rr_rx32.md"
timeout 600 scripts/lab/rr-rx-burst.sh || echo "rr-rx-burst.sh failed" > "$OUT/rr_rx_burst.md"
timeout 600 scripts/lab/tbench.sh || echo "tbench.sh failed (needs root for ip netns and a tap, and Debian's dbench package for tbench and tbench_srv)" > "$OUT/tbench.md"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT" <<'PY'
import pathlib, re, sys
out = pathlib.Path(sys.argv[1]); doc = pathlib.Path("docs/lab.md")
text = doc.read_text() if doc.exists() else "# weir lab\n"
for name in ["flush_sweep", "compare_kernel", "compare_kernel_rr", "compare_kernel_rr_rx32", "rr_rx_burst", "tbench", "psh_mss", "abc", "rr_abc", "rr_flush", "rr_gro", "rr_stages", "stages_flows", "conns"]:
    frag = out / f"{name}.md"
    if not frag.exists():
        continue
    body = f"<!-- lab:{name} -->\n{frag.read_text().strip()}\n<!-- /lab:{name} -->"
    pat = re.compile(rf"<!-- lab:{name} -->.*?<!-- /lab:{name} -->", re.S)
    text = pat.sub(lambda m: body, text) if pat.search(text) else text + f"\n{body}\n"
doc.write_text(text)
PY
echo "docs/lab.md updated"
