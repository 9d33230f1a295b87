use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "gdrprov", version, about = "Make a Linux GPU host ready for NVIDIA GPUDirect RDMA, and prove it")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// RDMA benchmarks: loopback bandwidth with a data check, and the NIC dma-buf probe.
    Bench(gdrprov::bench::BenchArgs),
}

fn main() {
    let cli = Cli::parse();
    let code = match &cli.command {
        Command::Bench(a) => match gdrprov::bench::run_bench(a) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                2
            }
        },
    };
    std::process::exit(code);
}
