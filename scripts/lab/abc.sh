#!/usr/bin/env bash
# weir-lab abc: writes CSV, PNG plots and a Markdown fragment under docs/lab/.
# Extra options go to weir-lab (see weir-lab abc --help).
. "$(dirname "$0")/common.sh"
lab_build
timeout 600 "$LAB" abc --out "$OUT" "$@"
