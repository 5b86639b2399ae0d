#!/usr/bin/env bash
# Reserves 2 MiB hugepages for DPDK and mounts hugetlbfs at /dev/hugepages.
#
#   scripts/setup-hugepages.sh [MB] [--node N]    (default 1024 MB, spread by the kernel)
#
# MB is the total to reserve, rounded up to whole 2 MiB pages. With --node N the pages are
# reserved on NUMA node N (the NIC's node: cat /sys/bus/pci/devices/ADDR/numa_node) via
# sysfs; otherwise via /proc/sys/vm/nr_hugepages. The script checks what the kernel really
# reserved (memory may be too fragmented to give everything), prints what it did and how
# to undo it, and exits non-zero if nothing usable resulted. Needs root. Not persistent:
# for a reservation that survives reboots, add `vm.nr_hugepages = N` to /etc/sysctl.d/ or
# `hugepages=N` to the kernel command line.
set -euo pipefail

die() { echo "setup-hugepages.sh: error: $*" >&2; exit 1; }
say() { echo "setup-hugepages.sh: $*"; }

mb=1024 node=""
while [ $# -gt 0 ]; do
  case "$1" in
    --node) node=${2:?--node needs a NUMA node number}; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) mb=$1; shift ;;
  esac
done
[[ $mb =~ ^[0-9]+$ ]] && [ "$mb" -gt 0 ] || die "MB must be a positive whole number of megabytes, got '$mb'"
[ -z "$node" ] || [[ $node =~ ^[0-9]+$ ]] || die "--node takes a node number, got '$node'"
[ "$(id -u)" -eq 0 ] || die "needs root (it writes /proc/sys/vm/nr_hugepages and mounts hugetlbfs): sudo $0 $*"

PAGE_KB=2048
sysdir=/sys/kernel/mm/hugepages/hugepages-${PAGE_KB}kB
[ -d "$sysdir" ] || die "this kernel has no 2 MiB hugepages ($sysdir is missing): enable CONFIG_HUGETLBFS, or run weir with --no-huge"
pages=$(( (mb * 1024 + PAGE_KB - 1) / PAGE_KB ))

if [ -n "$node" ]; then
  ctl=/sys/devices/system/node/node$node/hugepages/hugepages-${PAGE_KB}kB/nr_hugepages
  [ -e "$ctl" ] || die "NUMA node $node does not exist ($ctl is missing); nodes: $(ls /sys/devices/system/node | grep -o 'node[0-9]*' | tr '\n' ' ')"
else
  ctl=/proc/sys/vm/nr_hugepages
fi
before=$(cat "$ctl")
if [ "$before" -ge "$pages" ]; then
  say "$before hugepages of 2 MiB already reserved in $ctl (asked for $pages): left as they are"
else
  # A writable /proc/sys is needed; in a container it is often read-only.
  echo "$pages" >"$ctl" 2>/dev/null || die "cannot write $ctl (a container with a read-only /proc/sys? reserve the pages on the host, or run weir with --no-huge)"
  # Memory may be fragmented: compacting and asking again often gets the rest.
  got=$(cat "$ctl")
  if [ "$got" -lt "$pages" ]; then
    sync; echo 1 >/proc/sys/vm/compact_memory 2>/dev/null || true
    echo "$pages" >"$ctl" 2>/dev/null || true
    got=$(cat "$ctl")
  fi
  say "reserved $got hugepages of 2 MiB ($((got * 2)) MB) in $ctl (was $before, asked for $pages)"
  [ "$got" -ge "$pages" ] || echo "setup-hugepages.sh: warning: the kernel gave only $got of $pages pages (memory is fragmented or short): reserve early after boot, or ask for less" >&2
fi

mounted_by_us=0
if grep -qs ' /dev/hugepages hugetlbfs ' /proc/mounts; then
  say "hugetlbfs already mounted at /dev/hugepages"
elif grep -qs ' hugetlbfs ' /proc/mounts; then
  say "hugetlbfs already mounted at $(awk '$3 == "hugetlbfs" { print $2; exit }' /proc/mounts) (DPDK finds any hugetlbfs mount)"
else
  mkdir -p /dev/hugepages
  mount -t hugetlbfs -o pagesize=2M nodev /dev/hugepages || die "cannot mount hugetlbfs at /dev/hugepages (a container without CAP_SYS_ADMIN? mount it on the host and pass it in)"
  mounted_by_us=1
  say "mounted hugetlbfs (pagesize=2M) at /dev/hugepages"
fi

total=$(awk '/^HugePages_Total:/ { print $2 }' /proc/meminfo)
free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
size=$(awk '/^Hugepagesize:/ { print $2 }' /proc/meminfo)
say "now: HugePages_Total $total, HugePages_Free $free, default page size ${size} kB"
[ "${free:-0}" -gt 0 ] || die "no free hugepages after all: check dmesg, free memory, or run weir with --no-huge"
say "weir-sink and weir-gen use them by default now (the embedded EAL arguments drop --no-huge when free hugepages and a hugetlbfs mount exist)"
echo "to undo:"
echo "  echo $before > $ctl"
[ "$mounted_by_us" = 1 ] && echo "  umount /dev/hugepages"
exit 0
