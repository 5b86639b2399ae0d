#!/usr/bin/env bash
# weir-lab psh: writes CSV, PNG plots and a Markdown fragment under docs/lab/.
# Extra options go to weir-lab (see weir-lab psh --help).
. "$(dirname "$0")/common.sh"
lab_build
timeout 600 "$LAB" psh --out "$OUT" "$@"
