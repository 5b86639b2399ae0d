#!/usr/bin/env bash
# Installs what weir needs to build and test on Debian 12 (bookworm):
#   libdpdk-dev (DPDK 22.11, with its poll-mode drivers as plugins), pkg-config, clang and
#   libclang-dev (bindgen), iproute2 (network namespaces, tap set-up), iperf and socat
#   (the kernel-side TCP senders), jq (reading weir's JSON stats), iputils-ping, tshark
#   (reading weir-sink's --pcap captures in the tests), curl (scraping --metrics), and the
#   real clients weir-serve's engines are tested against: iperf3, sockperf, dbench (tbench),
#   wrk (and curl), and python3 (the kernel's echo and HTTP servers beside weir-serve's in
#   scripts/e2e/serve.sh).
# Idempotent: when every package is already installed it touches nothing (and needs no
# root); otherwise it must run as root and does `apt-get update` then `apt-get install`.
# It also checks that Rust (cargo, rustc >= 1.85) is installed.
set -euo pipefail

PACKAGES=(libdpdk-dev pkg-config clang libclang-dev iproute2 iperf socat jq iputils-ping tshark curl ethtool iperf3 sockperf dbench wrk python3)
MIN_RUST=1.85

die() { echo "setup.sh: error: $*" >&2; exit 1; }
say() { echo "setup.sh: $*"; }

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

command -v dpkg-query >/dev/null 2>&1 ||
  die "dpkg-query not found: weir's scripts expect Debian 12 (or a derivative with apt)"

missing=()
for p in "${PACKAGES[@]}"; do
  installed "$p" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  say "apt packages present: ${PACKAGES[*]}"
else
  [ "$(id -u)" -eq 0 ] ||
    die "missing packages: ${missing[*]}. Run this script as root (sudo scripts/setup.sh) or: apt-get update && apt-get install ${missing[*]}"
  say "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # tshark's wireshark-common asks whether non-root users may capture: answer no, quietly.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
fi

pkg-config --atleast-version=22.11 libdpdk ||
  die "pkg-config does not find libdpdk >= 22.11 (found: $(pkg-config --modversion libdpdk 2>/dev/null || echo none)). On Debian 12: apt-get install libdpdk-dev"
say "DPDK $(pkg-config --modversion libdpdk)"

# Rust: a root shell in CI may not have ~/.cargo/bin on PATH yet.
if ! command -v cargo >/dev/null 2>&1 && [ -f "${HOME:-/root}/.cargo/env" ]; then
  # shellcheck disable=SC1091
  . "${HOME:-/root}/.cargo/env"
fi
command -v cargo >/dev/null 2>&1 && command -v rustc >/dev/null 2>&1 ||
  die "cargo/rustc not found: install Rust >= $MIN_RUST (https://rustup.rs) and put ~/.cargo/bin on PATH"
rust_version=$(rustc --version | awk '{print $2}')
if [ "$(printf '%s\n%s\n' "$MIN_RUST" "$rust_version" | sort -V | head -n1)" != "$MIN_RUST" ]; then
  die "rustc $rust_version is older than $MIN_RUST: rustup update"
fi
say "rustc $rust_version"

if [ ! -e /dev/net/tun ]; then
  [ "$(id -u)" -eq 0 ] && modprobe tun 2>/dev/null || true
  [ -e /dev/net/tun ] ||
    echo "setup.sh: warning: /dev/net/tun is missing: the net_tap tests and scripts/run.sh need it (modprobe tun, or --device /dev/net/tun for a container)" >&2
fi
say "ok"
