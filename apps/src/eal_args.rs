//! DPDK's usual command-line form: `PROGRAM [EAL options] -- [program options]`.

/// The command line split at the first `--`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitArgs {
    /// EAL options, or `None` when the user gave none (no `--`): use the embedded default.
    pub eal: Option<Vec<String>>,
    /// The program's own options, with the program name first (for clap).
    pub app: Vec<String>,
}

/// Splits `argv` (program name first) at the first `--`. Without `--`, every argument is
/// the program's own.
pub fn split(argv: Vec<String>) -> SplitArgs {
    let mut it = argv.into_iter();
    let prog = it.next().unwrap_or_else(|| "weir".to_string());
    let rest: Vec<String> = it.collect();
    match rest.iter().position(|a| a == "--") {
        Some(i) => {
            let mut app = vec![prog.clone()];
            app.extend_from_slice(&rest[i + 1..]);
            let mut eal = vec![prog];
            eal.extend_from_slice(&rest[..i]);
            SplitArgs {
                eal: Some(eal),
                app,
            }
        }
        None => {
            let mut app = vec![prog];
            app.extend(rest);
            SplitArgs { eal: None, app }
        }
    }
}

/// `true` when hugepages are reserved and free on this machine (`HugePages_Free` > 0 in
/// /proc/meminfo) and a hugetlbfs is mounted: then the default EAL arguments use them.
pub fn hugepages_available() -> bool {
    let free = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("HugePages_Free:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let mounted = std::fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(2) == Some("hugetlbfs"))
        })
        .unwrap_or(false);
    free > 0 && mounted
}

/// The embedded default EAL arguments: no PCI probing (the machine's own NIC is never
/// touched), a net_tap vdev named `tap_iface`, `lcores` lcores starting at 0, hugepages when
/// configured and `--no-huge` otherwise, and a per-process file prefix so several weir
/// processes (and tests) can run side by side.
pub fn default_eal(prog: &str, tap_iface: &str, lcores: usize) -> Vec<String> {
    let mut v = vec![
        prog.to_string(),
        "--no-pci".to_string(),
        format!("--vdev=net_tap0,iface={tap_iface}"),
        format!("--file-prefix=weir-{}", std::process::id()),
        "--log-level=*:warning".to_string(),
    ];
    let last = lcores.max(1) - 1;
    v.push("-l".to_string());
    v.push(if last == 0 {
        "0".to_string()
    } else {
        format!("0-{last}")
    });
    if !hugepages_available() {
        v.push("--no-huge".to_string());
        v.push("-m".to_string());
        v.push("512".to_string());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn splits_at_double_dash() {
        let r = split(s(&["weir-sink", "-l", "0-1", "--", "--port", "80"]));
        assert_eq!(r.eal, Some(s(&["weir-sink", "-l", "0-1"])));
        assert_eq!(r.app, s(&["weir-sink", "--port", "80"]));
    }

    #[test]
    fn no_double_dash_means_default_eal() {
        let r = split(s(&["weir-sink", "--port", "80"]));
        assert_eq!(r.eal, None);
        assert_eq!(r.app, s(&["weir-sink", "--port", "80"]));
    }

    #[test]
    fn default_eal_never_probes_pci() {
        let v = default_eal("weir-sink", "weirtap0", 2);
        assert!(v.contains(&"--no-pci".to_string()));
        assert!(v.contains(&"0-1".to_string()));
    }
}
