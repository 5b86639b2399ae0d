#!/usr/bin/env bash
# weir-lab flush-sweep: writes CSV, PNG plots and a Markdown fragment under docs/lab/.
# Extra options go to weir-lab (see weir-lab flush-sweep --help).
. "$(dirname "$0")/common.sh"
lab_build
timeout 600 "$LAB" flush-sweep --out "$OUT" "$@"
