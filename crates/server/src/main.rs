//! The `watchkeeper` command.

use clap::{Parser, Subcommand};
use watchkeeper::config::{ServeArgs, ServeConfig};

/// watchkeeper: a Kubernetes-style watch cache server.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the Kubernetes API over the cache.
    Serve(Box<ServeArgs>),
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(*args),
    }
}

fn serve(args: ServeArgs) -> std::process::ExitCode {
    // Before anything opens a descriptor: the connection bound derives from this limit.
    if let Some(limit) = watchkeeper::limits::connections::raise_descriptor_limit() {
        tracing::debug!(limit, "descriptor limit");
    }
    let config = match ServeConfig::load(args) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("watchkeeper: {error}");
            return std::process::ExitCode::from(2);
        }
    };
    let runtime = match watchkeeper::runtime_builder(config.runtime_workers).build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("watchkeeper: cannot start the runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let server = match watchkeeper::start(config).await {
            Ok(server) => server,
            Err(error) => {
                eprintln!("watchkeeper: {error}");
                return std::process::ExitCode::FAILURE;
            }
        };
        wait_for_signal().await;
        tracing::info!("shutting down");
        server.shutdown().await;
        std::process::ExitCode::SUCCESS
    })
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
