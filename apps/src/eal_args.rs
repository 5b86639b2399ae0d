//! EAL arguments: DPDK's usual command-line form (`PROGRAM [EAL options] -- [program
//! options]`), the programs' embedded default, and the benchmarks' (with the [`Memory`]
//! they run on).

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

/// Where a benchmark's DPDK memory (its mbuf pools, `rte_gro`'s tables) comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// `--no-huge`: anonymous 4 KiB pages, 1 GiB; runs anywhere (CI, a laptop).
    NoHuge,
    /// 2 MiB hugepages from hugetlbfs, allocated as needed, as DPDK is deployed; they must
    /// be reserved first (`scripts/setup-hugepages.sh`). Mbuf-heavy rows miss the TLB
    /// far less: hundreds of held mbufs are hundreds of 4 KiB pages but a few 2 MiB ones.
    Hugepages,
}

impl Memory {
    /// `--hugepages` given or not.
    pub fn from_flag(hugepages: bool) -> Memory {
        if hugepages {
            Memory::Hugepages
        } else {
            Memory::NoHuge
        }
    }

    /// The EAL arguments that choose this memory (`no_huge_mb` of 4 KiB pages for
    /// [`Memory::NoHuge`]).
    pub fn eal_args(self, no_huge_mb: u32) -> Vec<String> {
        match self {
            Memory::NoHuge => vec!["--no-huge".into(), "-m".into(), no_huge_mb.to_string()],
            // No hugepage files left behind when the process ends.
            Memory::Hugepages => vec!["--huge-unlink".into()],
        }
    }

    /// What failed, for an EAL initialisation error on this memory: on hugepages, the
    /// likely cause and the script that fixes it.
    pub fn eal_init_context(self) -> &'static str {
        match self {
            Memory::NoHuge => "initialising the EAL",
            Memory::Hugepages => {
                "initialising the EAL on hugepages (are 2 MiB pages reserved and hugetlbfs \
                 mounted? scripts/setup-hugepages.sh does both)"
            }
        }
    }

    /// How the report names it.
    pub fn describe(self) -> &'static str {
        match self {
            Memory::NoHuge => "4 KiB pages (--no-huge)",
            Memory::Hugepages => "2 MiB hugepages",
        }
    }
}

/// EAL arguments for a benchmark process named `program` on lcores `lcores` (an `-l`
/// list): no PCI probing, `memory` (`no_huge_mb` MiB with [`Memory::NoHuge`]), a file
/// prefix unique to the process, warnings and errors only.
pub fn bench_eal_args(program: &str, lcores: &str, memory: Memory, no_huge_mb: u32) -> Vec<String> {
    let mut a = vec![program.to_string(), "--no-pci".into()];
    a.extend(memory.eal_args(no_huge_mb));
    a.extend([
        format!("--file-prefix={program}-{}", std::process::id()),
        "-l".into(),
        lcores.to_string(),
        "--log-level=*:warning".into(),
    ]);
    a
}

/// Splits `argv` ([`split`]), applies `--config` ([`crate::config::apply`]) and parses the
/// program's options as `T`, the way every weir program starts. On a usage error it prints
/// one line (`PROG: error: ... (see PROG --help)`) and returns exit code 2; `--help` and
/// `--version` print and exit as clap does.
pub fn parse_program<T: clap::Parser>(
    prog: &str,
    argv: Vec<String>,
) -> Result<(T, SplitArgs), std::process::ExitCode> {
    let mut split = split(argv);
    match crate::config::apply(split.app, &<T as clap::CommandFactory>::command()) {
        Ok(app) => split.app = app,
        Err(e) => {
            eprintln!("{prog}: error: {e}");
            return Err(std::process::ExitCode::from(2));
        }
    }
    match T::try_parse_from(&split.app) {
        Ok(a) => Ok((a, split)),
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("bad arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("{prog}: error: {first} (see {prog} --help)");
            Err(std::process::ExitCode::from(2))
        }
    }
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
