//! The client child process (`watchkeeper-bench __clients MODE ...`): the suites run their
//! clients in a process of their own, so that the server's CPU and memory are read apart from
//! the clients'. Its entry point picks the mode's code: `scale` ([`crate::scale`]), `fanout`
//! and `alloc` ([`crate::e2e`]), `writes` ([`crate::writes`]).

use std::net::SocketAddr;

use serde_json::json;

use crate::e2e::{WriteLoad, arg, child_alloc, child_fanout, client_runtime};

/// The client child process's entry point (`watchkeeper-bench __clients fanout|alloc ...`).
#[must_use]
pub fn child_main(args: &[String]) -> i32 {
    crate::sys::raise_fd_limit();
    if args.first().map(String::as_str) == Some("scale") {
        return crate::scale::child_main(args);
    }
    let Some(addr) = arg::<SocketAddr>(args, "--addr") else {
        eprintln!("__clients needs --addr");
        return 2;
    };
    let rv: u64 = arg(args, "--rv").unwrap_or(0);
    let watchers: usize = arg(args, "--watchers").unwrap_or(1);
    let runtime = client_runtime(2);
    let result = match args.first().map(String::as_str) {
        Some("fanout") => runtime.block_on(child_fanout(
            addr,
            rv,
            watchers,
            WriteLoad {
                rate: arg(args, "--rate").unwrap_or(100.0),
                secs: arg(args, "--secs").unwrap_or(1.0),
                objects: arg(args, "--objects").unwrap_or(100),
                inflight: arg(args, "--inflight").unwrap_or(1),
                drain_secs: arg(args, "--drain-secs").unwrap_or(30.0),
            },
        )),
        Some("writes") => runtime.block_on(crate::writes::child_writes(args)),
        Some("alloc") => runtime.block_on(child_alloc(
            addr,
            rv,
            watchers,
            arg(args, "--patches").unwrap_or(10),
            arg::<String>(args, "--path").unwrap_or_default(),
        )),
        _ => Err("unknown client mode".to_owned()),
    };
    runtime.shutdown_background();
    match result {
        Ok(value) => {
            println!("done {value}");
            0
        }
        Err(message) => {
            eprintln!("client process: {message}");
            println!("done {}", json!({"error": message}));
            1
        }
    }
}
