//! weir-serve: echo, sockperf, iperf3, tbench, HTTP or a sink on weir's TCP. See
//! `weir-serve --help`.

fn main() -> std::process::ExitCode {
    apps::logs::quiet_broken_pipe();
    apps::serve::run::main(std::env::args().collect())
}
