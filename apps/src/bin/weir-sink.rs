//! weir-sink: receive TCP with weir's pipeline. See `weir-sink --help`.

fn main() -> std::process::ExitCode {
    apps::logs::quiet_broken_pipe();
    apps::sink::main(std::env::args().collect())
}
