//! `--config FILE`: a program's options from a TOML file, for any clap command.
//!
//! Every key of the file is the long name of one of the command's options (`gro_flush_ns`
//! or `gro-flush-ns` for `--gro-flush-ns`); the file becomes `--long value` arguments that
//! go in front of the command line's own, so clap parses and validates both the same way.
//! The rules, checked before clap sees anything:
//!
//! - a key that is no long option of the command is an error that names it;
//! - a value is checked with the option's own value parser; a bad one is an error that
//!   names the key and says why;
//! - `key = true` sets a flag, `key = false` leaves it unset; a list repeats the option
//!   (`port = [5001, 5002]`), for options that take several values only;
//! - an option given on the command line replaces the file's value (for repeatable options,
//!   the whole list).
//!
//! ```toml
//! # weir-sink.toml
//! port = [5001, 5002]
//! gro_flush_ns = 50000
//! ack_policy = "every:2"
//! quiet = true
//! ```

use std::path::{Path, PathBuf};

use clap::{Arg, ArgAction, Command};

/// The option that names the file.
pub const CONFIG_OPTION: &str = "config";

/// What went wrong with a configuration file; every message names the file and the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The OS's reason.
        reason: String,
    },
    /// The file is not valid TOML.
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        reason: String,
    },
    /// A key that is no option of the program.
    UnknownKey {
        /// The file.
        path: PathBuf,
        /// The key as written.
        key: String,
        /// The program.
        program: String,
    },
    /// A value the option does not accept.
    BadValue {
        /// The file.
        path: PathBuf,
        /// The key as written.
        key: String,
        /// Why.
        reason: String,
    },
    /// `--config` without a file name.
    MissingPath,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::Read { path, reason } => {
                write!(f, "--config {}: cannot read it: {reason}", path.display())
            }
            ConfigError::Syntax { path, reason } => {
                let reason = reason.lines().next().unwrap_or("").trim();
                write!(f, "--config {}: not valid TOML: {reason}", path.display())
            }
            ConfigError::UnknownKey { path, key, program } => write!(
                f,
                "--config {}: unknown key '{key}' ({program} has no --{} option; see {program} --help)",
                path.display(),
                key.replace('_', "-")
            ),
            ConfigError::BadValue { path, key, reason } => {
                write!(f, "--config {}: key '{key}': {reason}", path.display())
            }
            ConfigError::MissingPath => write!(f, "--config needs a file name"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Finds `--config FILE` (or `--config=FILE`) in `argv` (program name first). The last
/// one wins, as for any other option.
pub fn config_path(argv: &[String]) -> Result<Option<PathBuf>, ConfigError> {
    let flag = format!("--{CONFIG_OPTION}");
    let mut found = None;
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if *a == flag {
            found = Some(PathBuf::from(it.next().ok_or(ConfigError::MissingPath)?));
        } else if let Some(v) = a.strip_prefix(&format!("{flag}=")) {
            found = Some(PathBuf::from(v));
        }
    }
    Ok(found)
}

/// `argv` (program name first) with the settings of the `--config` file, if one is
/// named, inserted after the program name. `cmd` is the program's clap command
/// (`MyArgs::command()`); see the module documentation for the rules.
pub fn apply(argv: Vec<String>, cmd: &Command) -> Result<Vec<String>, ConfigError> {
    let Some(path) = config_path(&argv)? else {
        return Ok(argv);
    };
    let text = std::fs::read_to_string(&path).map_err(|e| ConfigError::Read {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    let from_file = args_from_toml(&text, &path, cmd, &argv)?;
    let mut out = Vec::with_capacity(argv.len() + from_file.len());
    let mut it = argv.into_iter();
    out.extend(it.next());
    out.extend(from_file);
    out.extend(it);
    Ok(out)
}

/// The `--long value` arguments for the TOML `text` (read from `path`, for messages),
/// leaving out options that `cli` (the command line, program name first) gives itself.
pub fn args_from_toml(
    text: &str,
    path: &Path,
    cmd: &Command,
    cli: &[String],
) -> Result<Vec<String>, ConfigError> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Syntax {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    let program = cmd.get_name().to_owned();
    let mut out = Vec::new();
    for (key, value) in &table {
        let long = key.replace('_', "-");
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(long.as_str()))
            .filter(|_| !matches!(long.as_str(), CONFIG_OPTION | "help" | "version"))
            .ok_or_else(|| ConfigError::UnknownKey {
                path: path.to_owned(),
                key: key.clone(),
                program: program.clone(),
            })?;
        let bad = |reason: String| ConfigError::BadValue {
            path: path.to_owned(),
            key: key.clone(),
            reason,
        };
        let values = to_values(value, arg).map_err(bad)?;
        for v in values.iter().flatten() {
            check_value(arg, v).map_err(bad)?;
        }
        if given_on_command_line(arg, cli) {
            continue;
        }
        for v in values {
            out.push(format!("--{long}"));
            out.extend(v);
        }
    }
    Ok(out)
}

/// Each occurrence of the option the TOML value stands for: `None` for a bare flag.
fn to_values(value: &toml::Value, arg: &Arg) -> Result<Vec<Option<String>>, String> {
    let is_flag = matches!(arg.get_action(), ArgAction::SetTrue);
    let repeatable = matches!(arg.get_action(), ArgAction::Append);
    match value {
        toml::Value::Boolean(b) if is_flag => Ok(if *b { vec![None] } else { vec![] }),
        _ if is_flag => Err(format!("expected true or false, got {value}")),
        toml::Value::Array(items) if repeatable => items
            .iter()
            .map(|v| scalar(v).map(Some))
            .collect::<Result<Vec<_>, _>>(),
        toml::Value::Array(_) => Err("takes one value, not a list".to_owned()),
        v => Ok(vec![Some(scalar(v)?)]),
    }
}

/// A TOML scalar as the command line would spell it.
fn scalar(v: &toml::Value) -> Result<String, String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        other => Err(format!(
            "expected a string, number or boolean, got {}",
            other.type_str()
        )),
    }
}

/// Runs the option's own value parser on `v` (through a one-option command, so clap's
/// own message says what is wrong).
fn check_value(arg: &Arg, v: &str) -> Result<(), String> {
    let Some(long) = arg.get_long() else {
        return Ok(());
    };
    let probe = Command::new("config-check")
        .color(clap::ColorChoice::Never)
        .disable_help_flag(true)
        .disable_version_flag(true)
        .arg(arg.clone().required(false));
    match probe.try_get_matches_from(["config-check".to_owned(), format!("--{long}={v}")]) {
        Ok(_) => Ok(()),
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid value").trim();
            let first = first.strip_prefix("error: ").unwrap_or(first);
            Err(first.to_owned())
        }
    }
}

/// `true` when `cli` (program name first) gives the option itself.
fn given_on_command_line(arg: &Arg, cli: &[String]) -> bool {
    let long = arg.get_long().map(|l| format!("--{l}"));
    let short = arg.get_short().map(|s| format!("-{s}"));
    cli.iter().skip(1).take_while(|a| *a != "--").any(|a| {
        long.as_ref()
            .is_some_and(|l| a == l || a.starts_with(&format!("{l}=")))
            || short.as_ref().is_some_and(|s| a.starts_with(s.as_str()))
    })
}

/// A configuration file for one test: its own name (tests run in parallel), removed when
/// dropped, whatever the test's outcome.
#[cfg(test)]
struct TempToml(PathBuf);

#[cfg(test)]
impl TempToml {
    fn new(text: &str) -> TempToml {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("weir-cfg-{}-{n}.toml", std::process::id()));
        std::fs::write(&p, text).expect("temp file");
        TempToml(p)
    }
}

#[cfg(test)]
impl Drop for TempToml {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    /// A stand-in with the kinds of options weir's programs have.
    #[derive(Parser, Debug)]
    #[command(name = "prog")]
    struct Opts {
        #[arg(long, default_values_t = [5001u16], value_parser = clap::value_parser!(u16).range(1..))]
        port: Vec<u16>,
        #[arg(long, default_value_t = 20_000)]
        gro_flush_ns: u64,
        #[arg(long)]
        quiet: bool,
        #[arg(long)]
        duration: Option<f64>,
        #[arg(long, value_parser = ["linux", "every:2"])]
        ack_policy: Option<String>,
        #[arg(long)]
        config: Option<PathBuf>,
    }

    fn parse(text: &str, cli: &[&str]) -> Result<Opts, String> {
        let file = TempToml::new(text);
        let mut argv = vec![
            "prog".to_owned(),
            "--config".to_owned(),
            file.0.display().to_string(),
        ];
        argv.extend(cli.iter().map(|s| s.to_string()));
        let argv = apply(argv, &Opts::command()).map_err(|e| e.to_string())?;
        Opts::try_parse_from(argv).map_err(|e| e.to_string())
    }

    #[test]
    fn file_values_are_used() {
        let o = parse(
            "port = [5001, 5002]\ngro_flush_ns = 5\nquiet = true\nduration = 1.5\nack-policy = \"every:2\"\n",
            &[],
        )
        .expect("valid file");
        assert_eq!(o.port, vec![5001, 5002]);
        assert_eq!(o.gro_flush_ns, 5);
        assert!(o.quiet);
        assert_eq!(o.duration, Some(1.5));
        assert_eq!(o.ack_policy.as_deref(), Some("every:2"));
    }

    #[test]
    fn command_line_overrides_the_file() {
        let o = parse(
            "port = [5001, 5002]\ngro_flush_ns = 5\n",
            &["--gro-flush-ns", "7", "--port=80"],
        )
        .expect("valid file");
        assert_eq!(o.gro_flush_ns, 7);
        assert_eq!(o.port, vec![80]);
    }

    #[test]
    fn false_flag_leaves_it_unset() {
        let o = parse("quiet = false\n", &[]).expect("valid file");
        assert!(!o.quiet);
    }

    #[test]
    fn unknown_key_is_named() {
        let e = parse("gro_flush_nss = 5\n", &[]).expect_err("unknown key");
        assert!(e.contains("unknown key 'gro_flush_nss'"), "{e}");
    }

    #[test]
    fn bad_value_names_the_key() {
        let e = parse("port = [0]\n", &[]).expect_err("port 0");
        assert!(e.contains("key 'port'"), "{e}");
        let e = parse("gro_flush_ns = \"soon\"\n", &[]).expect_err("not a number");
        assert!(e.contains("key 'gro_flush_ns'"), "{e}");
        let e = parse("quiet = 1\n", &[]).expect_err("flag with a number");
        assert!(
            e.contains("key 'quiet'") && e.contains("true or false"),
            "{e}"
        );
        let e = parse("gro_flush_ns = [1, 2]\n", &[]).expect_err("list for one value");
        assert!(e.contains("key 'gro_flush_ns'"), "{e}");
        let e = parse("ack_policy = \"sometimes\"\n", &[]).expect_err("not a possible value");
        assert!(e.contains("key 'ack_policy'"), "{e}");
    }

    #[test]
    fn bad_value_is_an_error_even_when_overridden() {
        // The file is wrong whether or not the command line hides the mistake.
        let e = parse("gro_flush_ns = -1\n", &["--gro-flush-ns", "3"]).expect_err("negative");
        assert!(e.contains("key 'gro_flush_ns'"), "{e}");
    }

    #[test]
    fn config_key_and_syntax_errors() {
        let e = parse("config = \"x.toml\"\n", &[]).expect_err("config in config");
        assert!(e.contains("unknown key 'config'"), "{e}");
        let e = parse("port = \n", &[]).expect_err("syntax");
        assert!(e.contains("not valid TOML"), "{e}");
    }

    #[test]
    fn no_config_leaves_argv_alone() {
        let argv = vec!["prog".to_owned(), "--quiet".to_owned()];
        assert_eq!(apply(argv.clone(), &Opts::command()), Ok(argv));
    }

    #[test]
    fn missing_file_is_named() {
        let argv = vec![
            "prog".to_owned(),
            "--config=/nonexistent/weir.toml".to_owned(),
        ];
        let e = apply(argv, &Opts::command()).expect_err("missing file");
        assert!(e.to_string().contains("/nonexistent/weir.toml"), "{e}");
    }
}

/// The real programs' option sets accept their own keys and name unknown ones.
#[cfg(test)]
mod program_tests {
    use super::*;
    use clap::CommandFactory;

    fn argv(file: &TempToml, extra: &[&str]) -> Vec<String> {
        let mut v = vec![
            "prog".to_owned(),
            "--config".to_owned(),
            file.0.display().to_string(),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }

    #[test]
    fn weir_sink_options() {
        let f = TempToml::new(
            "port = [5001, 5002]\ngro_flush_ns = 50000\nack_policy = \"every:2\"\nquiet = true\npcap_snaplen = 128\nmetrics = \"127.0.0.1:9108\"\n",
        );
        let v = apply(
            argv(&f, &["--gro-flush-ns", "7"]),
            &crate::sink::SinkArgs::command(),
        )
        .expect("valid");
        let a = <crate::sink::SinkArgs as clap::Parser>::try_parse_from(v).expect("parses");
        assert_eq!(a.ports, vec![5001, 5002]);
        assert_eq!(a.stack.gro_flush_ns, 7);
        assert!(a.quiet);
        assert_eq!(a.pcap_snaplen, 128);
        assert_eq!(a.stack.ack_policy.to_string(), "every:2");
        let f = TempToml::new("gro_flush = 1\n");
        let e = apply(argv(&f, &[]), &crate::sink::SinkArgs::command()).expect_err("unknown");
        assert!(e.to_string().contains("unknown key 'gro_flush'"), "{e}");
        let f = TempToml::new("ack_policy = \"sometimes\"\n");
        let e = apply(argv(&f, &[]), &crate::sink::SinkArgs::command()).expect_err("bad");
        assert!(e.to_string().contains("key 'ack_policy'"), "{e}");
    }

    #[test]
    fn weir_gen_options() {
        let f = TempToml::new("flows = 64\n");
        let v = apply(argv(&f, &[]), &crate::gen::cli::GenArgs::command()).expect("valid");
        let a = <crate::gen::cli::GenArgs as clap::Parser>::try_parse_from(v).expect("parses");
        assert_eq!(a.flows, 64);
        let f = TempToml::new("flowz = 64\n");
        let e = apply(argv(&f, &[]), &crate::gen::cli::GenArgs::command()).expect_err("unknown");
        assert!(e.to_string().contains("unknown key 'flowz'"), "{e}");
    }
}
