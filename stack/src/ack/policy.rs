//! [`AckPolicy`]: the named presets (`linux`, `rfc5681`, `every:N`, `delay:NS`) and the
//! `quickack_psh_mss` switch, and their parsing from and printing to strings (the
//! `--ack-policy` argument's syntax).

use core::fmt;
use core::str::FromStr;

use crate::time::Duration;

/// RFC 5681 §4.2: "an ACK MUST be generated within 500 ms of the arrival of the first
/// unacknowledged packet".
pub const RFC5681_MAX_DELAY: Duration = Duration::from_millis(500);

/// When to acknowledge: a named preset plus the `quickack_psh_mss` switch. One value per
/// listener; every connection it accepts copies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckPolicy {
    /// The rule.
    pub mode: AckMode,
    /// Linux commit 4720852ed9af: an exactly-1-MSS segment with PSH sets `ICSK_ACK_PUSHED`,
    /// so the ACK goes out as soon as the application consumes it. Only used by
    /// [`AckMode::Linux`].
    pub quickack_psh_mss: bool,
}

/// The ACK rules weir implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckMode {
    /// Linux's `__tcp_ack_snd_check` and delayed-ACK engine.
    Linux,
    /// ACK every `n` segments received (segments inside coalesced runs count one each),
    /// at the latest `max_delay` after the first unacknowledged one.
    EveryN {
        /// Segments per ACK.
        n: u16,
        /// Longest ACK delay.
        max_delay: Duration,
    },
    /// ACK only when the oldest unacknowledged data has waited `delay` (or at once for
    /// out-of-order data, duplicates and gap fills, RFC 5681 §4.2).
    Delay(Duration),
}

impl Default for AckPolicy {
    fn default() -> Self {
        AckPolicy::linux()
    }
}

impl AckPolicy {
    /// Linux's policy (the default), with `quickack_psh_mss` on as in Linux >= 6.7.
    pub const fn linux() -> Self {
        AckPolicy {
            mode: AckMode::Linux,
            quickack_psh_mss: true,
        }
    }
    /// RFC 5681 §4.2: every second segment, at most 500 ms late.
    pub const fn rfc5681() -> Self {
        Self::every(2)
    }
    /// An ACK every `n` segments (at least 1), at most 500 ms late (RFC 5681 §4.2).
    pub const fn every(n: u16) -> Self {
        AckPolicy {
            mode: AckMode::EveryN {
                n: if n == 0 { 1 } else { n },
                max_delay: RFC5681_MAX_DELAY,
            },
            quickack_psh_mss: false,
        }
    }
    /// Acknowledge in-order data only after `delay`.
    pub const fn delay(delay: Duration) -> Self {
        AckPolicy {
            mode: AckMode::Delay(delay),
            quickack_psh_mss: false,
        }
    }
    /// The same policy with the `quickack_psh_mss` switch set.
    pub const fn with_quickack_psh_mss(mut self, on: bool) -> Self {
        self.quickack_psh_mss = on;
        self
    }
}

/// Why an [`AckPolicy`] string did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AckPolicyParseError {
    /// Not one of the known presets.
    UnknownPreset(String),
    /// The number after `every:` or `delay:` is missing, not a number, or zero.
    BadNumber(String),
    /// An unknown `,switch=value` suffix.
    UnknownSwitch(String),
}

impl fmt::Display for AckPolicyParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownPreset(s) => write!(
                f,
                "unknown ACK policy {s:?}: use linux, rfc5681, every:N or delay:NS, \
                 optionally followed by ,quickack_psh_mss=on|off"
            ),
            Self::BadNumber(s) => write!(
                f,
                "bad number in ACK policy {s:?}: every:N takes segments (1..=65535), \
                 delay:NS nanoseconds (> 0)"
            ),
            Self::UnknownSwitch(s) => write!(
                f,
                "unknown ACK policy switch {s:?}: the only switch is quickack_psh_mss=on|off"
            ),
        }
    }
}

impl std::error::Error for AckPolicyParseError {}

impl FromStr for AckPolicy {
    type Err = AckPolicyParseError;
    /// Parses `linux`, `rfc5681`, `every:N`, `delay:NS`, each optionally followed by
    /// `,quickack_psh_mss=on` or `,quickack_psh_mss=off`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.trim().split(',');
        let preset = parts.next().unwrap_or("").trim();
        let mut p = match preset {
            "linux" => AckPolicy::linux(),
            "rfc5681" => AckPolicy::rfc5681(),
            _ => {
                if let Some(n) = preset.strip_prefix("every:") {
                    match n.parse::<u16>() {
                        Ok(n) if n > 0 => AckPolicy::every(n),
                        _ => return Err(AckPolicyParseError::BadNumber(s.to_string())),
                    }
                } else if let Some(n) = preset.strip_prefix("delay:") {
                    match n.parse::<u64>() {
                        Ok(n) if n > 0 => AckPolicy::delay(Duration::from_nanos(n)),
                        _ => return Err(AckPolicyParseError::BadNumber(s.to_string())),
                    }
                } else {
                    return Err(AckPolicyParseError::UnknownPreset(s.to_string()));
                }
            }
        };
        for sw in parts {
            match sw.trim() {
                "quickack_psh_mss=on" | "quickack_psh_mss" => p.quickack_psh_mss = true,
                "quickack_psh_mss=off" => p.quickack_psh_mss = false,
                other => return Err(AckPolicyParseError::UnknownSwitch(other.to_string())),
            }
        }
        Ok(p)
    }
}

impl fmt::Display for AckPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mode {
            AckMode::Linux => f.write_str("linux")?,
            AckMode::EveryN { n, .. } => write!(f, "every:{n}")?,
            AckMode::Delay(d) => write!(f, "delay:{}", d.as_nanos())?,
        }
        let default_switch = matches!(self.mode, AckMode::Linux);
        if self.quickack_psh_mss != default_switch {
            let v = if self.quickack_psh_mss { "on" } else { "off" };
            write!(f, ",quickack_psh_mss={v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_presets() {
        assert_eq!("linux".parse::<AckPolicy>(), Ok(AckPolicy::linux()));
        assert_eq!("rfc5681".parse::<AckPolicy>(), Ok(AckPolicy::every(2)));
        assert_eq!("every:3".parse::<AckPolicy>(), Ok(AckPolicy::every(3)));
        assert_eq!(
            "delay:500000".parse::<AckPolicy>(),
            Ok(AckPolicy::delay(Duration::from_micros(500)))
        );
        assert_eq!(
            "linux,quickack_psh_mss=off".parse::<AckPolicy>(),
            Ok(AckPolicy::linux().with_quickack_psh_mss(false))
        );
        assert!(matches!(
            "every:0".parse::<AckPolicy>(),
            Err(AckPolicyParseError::BadNumber(_))
        ));
        assert!(matches!(
            "bsd".parse::<AckPolicy>(),
            Err(AckPolicyParseError::UnknownPreset(_))
        ));
        assert!(matches!(
            "linux,foo".parse::<AckPolicy>(),
            Err(AckPolicyParseError::UnknownSwitch(_))
        ));
        for s in ["linux", "every:2", "delay:7", "linux,quickack_psh_mss=off"] {
            let p: AckPolicy = s.parse().expect("parses");
            assert_eq!(p.to_string(), s);
        }
    }
}
