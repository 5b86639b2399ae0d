/* Headers weir binds. Included after `-include rte_config.h` (from pkg-config cflags). */
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_version.h>
#include <rte_log.h>
#include <rte_lcore.h>
#include <rte_launch.h>
#include <rte_cycles.h>
#include <rte_ring.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_ethdev.h>
#include <rte_eth_ring.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_udp.h>
#include <rte_gro.h>
#include <rte_pcapng.h>

/* rte_errno is a per-lcore (thread-local) C variable: Rust reads it through this. */
int weir_rte_errno(void);

/* rte_raw_cksum compiled at -O3 (src/cksum_o3.c), beside the -O2 wrapper bindgen makes. */
uint16_t weir_raw_cksum_o3(const void *buf, size_t len);
