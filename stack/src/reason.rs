//! The one macro that makes weir's reason enums: why a frame was dropped
//! ([`crate::wire::DropReason`]), why GRO emitted a unit ([`crate::gro::FlushReason`]),
//! why an ACK was sent ([`crate::ack::AckReason`]), why TCP dropped a segment.
//!
//! Each is a list of counters: one variant per cause, a stable snake_case label per
//! variant (a JSON key in the stats output and a Prometheus label, so never renamed), and
//! a counter array indexed by the variant. The list is written once, in the macro call;
//! the enum, the label of each variant, the list of all of them and their number follow
//! from it, so they cannot disagree.

/// Makes a reason enum from one list of `Variant = "label",` entries, each with its doc
/// comment. The enum gets the attributes written before it (its doc comment, further
/// derives) and:
///
/// - `Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord`, `#[repr(u8)]`;
/// - `ALL`: every variant in declaration order (counter order), and `all()` as a slice;
/// - `COUNT`: the number of variants (the length of a counter array);
/// - `name()`: the variant's label;
/// - `index()`: its position in `ALL` (`self as usize`), for counter arrays;
/// - `Display`, which writes the label.
///
/// The order of the entries is the order of the counters: append new reasons, and keep
/// labels as they are (stats JSON and Prometheus metrics are keyed by them).
macro_rules! reason_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $label:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every reason, in declaration order: `ALL[r.index()] == r`.
            pub const ALL: [$name; [$($name::$variant),+].len()] = [$($name::$variant),+];
            /// Number of reasons (the length of a counter array indexed by `index`).
            pub const COUNT: usize = Self::ALL.len();

            /// Every reason, in declaration order (`ALL` as a slice).
            pub const fn all() -> &'static [$name] {
                &Self::ALL
            }

            /// The stable snake_case label: a JSON key and a Prometheus label.
            pub const fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $label, )+
                }
            }

            /// The reason's index in `0..COUNT` (for counter arrays).
            #[inline]
            pub const fn index(self) -> usize {
                self as usize
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

pub(crate) use reason_enum;

#[cfg(test)]
mod tests {
    use crate::ack::AckReason;
    use crate::gro::FlushReason;

    /// The labels are stats keys: their order and spelling are pinned here.
    #[test]
    fn labels_and_order_are_pinned() {
        let flush: Vec<_> = FlushReason::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(
            flush,
            [
                "timer",
                "size",
                "flags",
                "gap",
                "burst_end",
                "eviction",
                "passthrough",
                "shutdown",
                "bypass"
            ]
        );
        let ack: Vec<_> = AckReason::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(
            ack,
            [
                "stretch",
                "quick",
                "out_of_order",
                "duplicate",
                "gap_fill",
                "delayed_timer",
                "window_update",
                "psh",
                "handshake",
                "challenge",
                "fin",
                "rst"
            ]
        );
        for (i, r) in FlushReason::ALL.iter().enumerate() {
            assert_eq!((r.index(), FlushReason::COUNT), (i, 9));
            assert_eq!(r.to_string(), r.name());
        }
        for (i, r) in AckReason::ALL.iter().enumerate() {
            assert_eq!((r.index(), AckReason::COUNT), (i, 12));
        }
    }
}
