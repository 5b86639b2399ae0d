/* Tiny hand-written shims for what bindgen cannot express (thread-local C variables). */
#include "wrapper.h"

int weir_rte_errno(void) { return rte_errno; }

/*
 * Constants built from function-like macros (RTE_BIT64) that bindgen skips are written out
 * in src/lib.rs (`consts`); these assertions make the build fail if DPDK ever changes them.
 */
_Static_assert(RTE_ETH_RSS_IP == ((1ULL << 2) | (1ULL << 3) | (1ULL << 7) | (1ULL << 8) |
                                  (1ULL << 9) | (1ULL << 13) | (1ULL << 15)),
               "RTE_ETH_RSS_IP");
_Static_assert(RTE_ETH_RSS_TCP == ((1ULL << 4) | (1ULL << 10) | (1ULL << 16)), "RTE_ETH_RSS_TCP");
_Static_assert(RTE_ETH_RX_OFFLOAD_IPV4_CKSUM == (1ULL << 1), "RX_OFFLOAD_IPV4_CKSUM");
_Static_assert(RTE_ETH_RX_OFFLOAD_UDP_CKSUM == (1ULL << 2), "RX_OFFLOAD_UDP_CKSUM");
_Static_assert(RTE_ETH_RX_OFFLOAD_TCP_CKSUM == (1ULL << 3), "RX_OFFLOAD_TCP_CKSUM");
_Static_assert(RTE_ETH_RX_OFFLOAD_SCATTER == (1ULL << 13), "RX_OFFLOAD_SCATTER");
_Static_assert(RTE_ETH_TX_OFFLOAD_IPV4_CKSUM == (1ULL << 1), "TX_OFFLOAD_IPV4_CKSUM");
_Static_assert(RTE_ETH_TX_OFFLOAD_UDP_CKSUM == (1ULL << 2), "TX_OFFLOAD_UDP_CKSUM");
_Static_assert(RTE_ETH_TX_OFFLOAD_TCP_CKSUM == (1ULL << 3), "TX_OFFLOAD_TCP_CKSUM");
_Static_assert(RTE_ETH_TX_OFFLOAD_MULTI_SEGS == (1ULL << 15), "TX_OFFLOAD_MULTI_SEGS");
_Static_assert(RTE_ETH_LINK_UP == 1, "RTE_ETH_LINK_UP");
