//! weir-gen: emulated TCP senders on a DPDK port. See `weir-gen --help`.

fn main() -> std::process::ExitCode {
    apps::logs::quiet_broken_pipe();
    apps::gen::cli::main(std::env::args().collect())
}
