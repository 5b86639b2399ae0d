#!/usr/bin/env bash
# weir-lab rr: field reports 000, 003 and 004 as request/response transactions (weir-bench
# rr's client and echo server over the ring pair); writes CSV, PNG plots and Markdown
# fragments under docs/lab/. Extra options go to weir-lab (see weir-lab rr --help).
. "$(dirname "$0")/common.sh"
lab_build
timeout 900 "$LAB" rr --out "$OUT" "$@"
