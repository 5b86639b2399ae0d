/*
 * rte_raw_cksum compiled at -O3, for weir-bench csum. DPDK's own meson build compiles its
 * libraries at -O3 (buildtype "release"), where GCC vectorises rte_raw_cksum's 16-bit loop;
 * the wrappers bindgen writes for static inline functions are compiled at -O2, where it
 * stays one 16-bit word per iteration. Both are "DPDK's checksum": the benchmark shows both.
 */
#include <rte_ip.h>

uint16_t weir_raw_cksum_o3(const void *buf, size_t len) { return rte_raw_cksum(buf, len); }
