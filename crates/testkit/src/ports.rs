//! Loopback ports for servers a test stops and starts again on the same port (an etcd killed
//! and restarted on its data).
//!
//! A port the kernel hands out for `bind(0)` is in its *ephemeral* range, the same range it
//! takes the local ports of outgoing connections from. While the server is down, any
//! connection may get that port as its local port — above all a client reconnecting to the
//! server itself: on loopback a connect from port P to port P meets itself (a TCP
//! self-connect) and holds P — and the restart fails with "address already in use" (seen in
//! the store's etcd restart test). [`restartable_port`] picks a free port *below* the
//! ephemeral range instead, which no outgoing connection is given.
//!
//! This file has no dependencies: the store's tests include it by path (the store cannot
//! depend on the test kit, which depends on the server).

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// The lowest port of the kernel's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`;
/// Linux's default 32768 if it cannot be read).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// A loopback port that was free when asked and lies below the ephemeral range (from 10,000
/// up), so nothing but an explicit `bind` can take it while its server is down. Processes
/// running at once start their search at different places (by process id) and each call in
/// a process at the next one.
///
/// # Panics
/// No port between 10,000 and the ephemeral range is free.
#[must_use]
pub fn restartable_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 10_000;
    let high = u32::from(ephemeral_low()).max(LOW + 1_000);
    let span = high - LOW;
    let start = std::process::id().wrapping_mul(7_919) % span;
    for _ in 0..span {
        let offset = (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        let port = u16::try_from(LOW + offset).expect("below the ephemeral range");
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port between {LOW} and {high}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the ports are outside the range outgoing connections take theirs from, bindable,
    /// and not handed out twice in a row.
    #[test]
    fn ports_are_free_and_below_the_ephemeral_range() {
        let a = restartable_port();
        let b = restartable_port();
        assert_ne!(a, b);
        for port in [a, b] {
            assert!(port >= 10_000 && port < ephemeral_low(), "{port}");
            TcpListener::bind(("127.0.0.1", port)).expect("free");
        }
    }
}
