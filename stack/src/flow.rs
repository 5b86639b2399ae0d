//! Flow identity: the key GRO and the connection table hash on.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// VLAN id meaning "no 802.1Q tag".
pub const NO_VLAN: u16 = 0xffff;

/// A TCP flow as seen on a received packet: `src` is the remote sender, `dst` is weir.
/// IPv4 addresses are stored IPv4-mapped (`::ffff:a.b.c.d`) so one fixed-size key serves
/// both families; `v6` keeps them apart.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowKey {
    /// Source (remote) address.
    pub src: [u8; 16],
    /// Destination (local) address.
    pub dst: [u8; 16],
    /// Source (remote) port.
    pub sport: u16,
    /// Destination (local) port.
    pub dport: u16,
    /// 802.1Q VLAN id, or [`NO_VLAN`].
    pub vlan: u16,
    /// `true` for IPv6.
    pub v6: bool,
}

impl FlowKey {
    /// A key for an IPv4 flow.
    pub fn v4(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16) -> Self {
        FlowKey {
            src: src.to_ipv6_mapped().octets(),
            dst: dst.to_ipv6_mapped().octets(),
            sport,
            dport,
            vlan: NO_VLAN,
            v6: false,
        }
    }
    /// A key for an IPv6 flow.
    pub fn v6(src: Ipv6Addr, sport: u16, dst: Ipv6Addr, dport: u16) -> Self {
        FlowKey {
            src: src.octets(),
            dst: dst.octets(),
            sport,
            dport,
            vlan: NO_VLAN,
            v6: true,
        }
    }
    /// The source address.
    pub fn src_ip(&self) -> IpAddr {
        to_ip(self.src, self.v6)
    }
    /// The destination address.
    pub fn dst_ip(&self) -> IpAddr {
        to_ip(self.dst, self.v6)
    }
    /// A 32-bit hash for table indexing: cheap (a few multiplies), well mixed in its high
    /// bits, and stable across runs so tests are reproducible. Not for adversarial
    /// resistance: tables bound their chains and evict instead of trusting the hash.
    #[inline]
    pub fn hash32(&self) -> u32 {
        self.words().hash32()
    }

    /// The key as [`FlowWords`]. The ports, VLAN and family are read field by field: a
    /// key the parser has just written with 2-byte stores, read back as one wider load,
    /// stalls on store forwarding.
    #[inline(always)]
    pub fn words(&self) -> FlowWords {
        let w = |b: &[u8; 16], i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        FlowWords([
            w(&self.src, 0),
            w(&self.src, 8),
            w(&self.dst, 0),
            w(&self.dst, 8),
            FlowWords::tail(self.sport, self.dport, self.vlan, self.v6),
        ])
    }

    /// The key whose [`FlowKey::words`] are `w`.
    #[inline(always)]
    pub fn from_words(w: &FlowWords) -> FlowKey {
        let half = |lo: u64, hi: u64| {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&lo.to_le_bytes());
            b[8..].copy_from_slice(&hi.to_le_bytes());
            b
        };
        let t = w.0[4];
        FlowKey {
            src: half(w.0[0], w.0[1]),
            dst: half(w.0[2], w.0[3]),
            sport: (t >> 32) as u16,
            dport: (t >> 16) as u16,
            vlan: t as u16,
            v6: t >> 48 & 1 != 0,
        }
    }
}

/// A [`FlowKey`] as five little-endian words: source address (two), destination address
/// (two), then ports, VLAN and family. For hashing and comparing a key that is held in
/// registers (GRO's fast path builds one straight from the frame), without writing a
/// [`FlowKey`] to memory first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowWords(pub [u64; 5]);

impl FlowWords {
    /// The last word: `sport << 32 | dport << 16 | vlan | v6 << 48`.
    #[inline(always)]
    pub fn tail(sport: u16, dport: u16, vlan: u16, v6: bool) -> u64 {
        u64::from(sport) << 32 | u64::from(dport) << 16 | u64::from(vlan) | u64::from(v6) << 48
    }

    /// The words of an untagged IPv4 flow (addresses IPv4-mapped, as [`FlowKey::v4`]
    /// stores them); `src` and `dst` are the four address bytes read as a little-endian
    /// `u32`.
    #[inline(always)]
    pub fn v4(src: u32, sport: u16, dst: u32, dport: u16) -> FlowWords {
        let mapped = |a: u32| u64::from(a) << 32 | 0xffff_0000;
        FlowWords([
            0,
            mapped(src),
            0,
            mapped(dst),
            FlowWords::tail(sport, dport, NO_VLAN, false),
        ])
    }

    /// [`FlowKey::hash32`] of the key these words describe.
    #[inline(always)]
    pub fn hash32(&self) -> u32 {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let w = &self.0;
        let mut h = (w[0] ^ w[1].rotate_left(17)).wrapping_mul(K);
        h ^= (w[2] ^ w[3].rotate_left(29)).wrapping_mul(K);
        // The family is not hashed (IPv4-mapped and IPv6 addresses differ anyway).
        h ^= (w[4] & 0xffff_ffff_ffff).wrapping_mul(K);
        h = (h ^ (h >> 29)).wrapping_mul(K);
        (h >> 32) as u32
    }

    /// Whether `key` is the key these words describe.
    #[inline(always)]
    pub fn same(&self, key: &FlowKey) -> bool {
        let k = key.words();
        self.0
            .iter()
            .zip(k.0.iter())
            .fold(0, |d, (a, b)| d | (a ^ b))
            == 0
    }
}

impl FlowKey {
    /// `self == other`, compared in 64-bit words without branches. The same result as
    /// `==`; for the GRO table's lookup, which compares the key the parser has just
    /// written: loads no wider than the parser's stores forward from the store buffer,
    /// while the derived comparison's 16-byte loads of the addresses stall on it.
    #[inline(always)]
    pub fn same(&self, other: &FlowKey) -> bool {
        let w = |b: &[u8; 16], i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_ne_bytes(a)
        };
        // The ports, VLAN and family field by field: combined into one word, the compiler
        // turns them into a 4-byte load across two 2-byte stores, which stalls too.
        let tail = (self.sport ^ other.sport)
            | (self.dport ^ other.dport)
            | (self.vlan ^ other.vlan)
            | u16::from(self.v6 ^ other.v6);
        ((w(&self.src, 0) ^ w(&other.src, 0))
            | (w(&self.src, 8) ^ w(&other.src, 8))
            | (w(&self.dst, 0) ^ w(&other.dst, 0))
            | (w(&self.dst, 8) ^ w(&other.dst, 8))
            | u64::from(tail))
            == 0
    }
}

fn to_ip(b: [u8; 16], v6: bool) -> IpAddr {
    let a = Ipv6Addr::from(b);
    match (v6, a.to_ipv4_mapped()) {
        (false, Some(v4)) => IpAddr::V4(v4),
        _ => IpAddr::V6(a),
    }
}

impl fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (s, d) = (self.src_ip(), self.dst_ip());
        if self.v6 {
            write!(f, "[{s}]:{} -> [{d}]:{}", self.sport, self.dport)?;
        } else {
            write!(f, "{s}:{} -> {d}:{}", self.sport, self.dport)?;
        }
        if self.vlan != NO_VLAN {
            write!(f, " vlan {}", self.vlan)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_roundtrip_and_hash_differs_by_port() {
        let a = FlowKey::v4(
            Ipv4Addr::new(198, 18, 0, 2),
            40000,
            Ipv4Addr::new(198, 18, 0, 1),
            5001,
        );
        assert_eq!(a.src_ip(), IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)));
        let mut b = a;
        b.sport += 1;
        assert_ne!(a.hash32(), b.hash32());
        assert!(!a.same(&b) && a.same(&a) && b.same(&b));
        let mut c = a;
        c.v6 = true;
        assert!(!a.same(&c));
        c = a;
        c.dst[15] ^= 1;
        assert!(!a.same(&c));
        assert_eq!(format!("{a:?}"), "198.18.0.2:40000 -> 198.18.0.1:5001");
    }

    #[test]
    fn words_round_trip_and_v4_words_match_the_mapped_key() {
        let a = FlowKey::v4(
            Ipv4Addr::new(198, 19, 3, 7),
            40000,
            Ipv4Addr::new(198, 18, 0, 1),
            5201,
        );
        let w = FlowWords::v4(
            u32::from_le_bytes([198, 19, 3, 7]),
            40000,
            u32::from_le_bytes([198, 18, 0, 1]),
            5201,
        );
        assert_eq!(a.words(), w);
        assert_eq!(w.hash32(), a.hash32());
        assert!(w.same(&a));
        assert_eq!(FlowKey::from_words(&w), a);
        let mut b = FlowKey::v6(
            "2001:db8::2".parse().expect("addr"),
            1,
            "2001:db8::1".parse().expect("addr"),
            2,
        );
        b.vlan = 42;
        assert_eq!(FlowKey::from_words(&b.words()), b);
        assert!(!w.same(&b));
    }
}
