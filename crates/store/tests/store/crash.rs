//! The embedded store survives `kill -9`: every acknowledged write is there after reopening
//! and no revision is half-written.
//!
//! The test re-executes its own binary as the writer (selected by an environment
//! variable): the child commits transactions in a loop and prints each acknowledged
//! revision; the parent SIGKILLs it mid-stream, reopens the store and checks.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use watchkeeper_store::{
    EmbeddedConfig, EmbeddedStore, KeySelector, RangeRequest, Store, TxnOp, TxnRequest,
};

use crate::common::HANG_GUARD;

const CHILD_ENV: &str = "WATCHKEEPER_STORE_CRASH_CHILD_DIR";
const TEST_NAME: &str = "crash::kill9_keeps_every_acknowledged_write";

fn config(dir: &std::path::Path) -> EmbeddedConfig {
    let mut c = EmbeddedConfig::new(dir);
    c.retain_revisions = 0; // keep everything, so every acknowledged revision is checkable
    c
}

/// The writer: each transaction puts `step` under three keys and deletes one, at one
/// revision, then prints `ack <revision> <step>`.
async fn child(dir: &str) {
    let s = EmbeddedStore::open(config(dir.as_ref())).unwrap();
    let mut step: u64 = s.get("/last").await.unwrap().map_or(0, |kv| {
        String::from_utf8_lossy(&kv.value).parse::<u64>().unwrap() + 1
    });
    loop {
        let v = step.to_string();
        let txn = TxnRequest::default()
            .then(TxnOp::Put {
                key: "/last".into(),
                value: v.clone().into(),
            })
            .then(TxnOp::Put {
                key: format!("/k/{}", step % 7).into(),
                value: v.clone().into(),
            })
            .then(TxnOp::Put {
                key: format!("/big/{}", step % 3).into(),
                value: v.repeat(500).into(),
            })
            .then(TxnOp::Delete {
                key: format!("/k/{}", (step + 3) % 7).into(),
            });
        let resp = s.txn(txn).await.unwrap();
        println!("ack {} {step}", resp.revision);
        step += 1;
    }
}

/// Runs the child until it has acknowledged `n` writes, kills it, returns every ack.
fn run_and_kill(dir: &std::path::Path, n: usize) -> Vec<(u64, u64)> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.strip_prefix("ack ") {
                let mut it = rest.split(' ').map(|x| x.parse::<u64>().unwrap());
                let _ = tx.send((it.next().unwrap(), it.next().unwrap()));
            }
        }
    });
    let mut acks = Vec::new();
    while acks.len() < n {
        match rx.recv_timeout(HANG_GUARD) {
            Ok(a) => acks.push(a),
            Err(e) => {
                let _ = child.kill();
                panic!(
                    "writer stopped acknowledging after {} acks: {e}",
                    acks.len()
                );
            }
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    reader.join().unwrap();
    // Acks printed before the kill that were still in the pipe.
    acks.extend(rx.try_iter());
    acks
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn kill9_keeps_every_acknowledged_write() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        runtime().block_on(child(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut all: Vec<(u64, u64)> = Vec::new();
    for round in 0..2 {
        let acks = run_and_kill(dir.path(), 150);
        assert!(
            acks.windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 + 1 == w[1].1)
        );
        all.extend(acks);
        // A runtime per round: shutting it down ends the watch task, which keeps the store
        // (and redb's file lock) open, before the next writer starts.
        runtime().block_on(verify(dir.path(), round, &all));
    }
}

/// Reopens the store after a kill and checks every acknowledged write.
async fn verify(dir: &std::path::Path, round: usize, all: &[(u64, u64)]) {
    let s = EmbeddedStore::open(config(dir)).unwrap();
    let report = s.check_integrity().unwrap();
    let (max_rev, max_step) = *all.last().unwrap();
    assert!(
        report.current >= max_rev,
        "round {round}: acknowledged {max_rev} lost"
    );
    // Every acknowledged revision reads back exactly as written.
    for &(rev, step) in all {
        let r = s
            .range(RangeRequest::key("/last").at_revision(rev))
            .await
            .unwrap();
        assert_eq!(r.kvs[0].value, step.to_string(), "revision {rev}");
        assert_eq!(r.kvs[0].mod_revision, rev);
    }
    // A write after the last ack (committed but not yet printed) may exist; at most one,
    // and whole.
    let last = s.get("/last").await.unwrap().unwrap();
    let last_step: u64 = String::from_utf8_lossy(&last.value).parse().unwrap();
    assert!(last_step == max_step || last_step == max_step + 1);
    // The change log agrees: a watch from the first revision replays every revision whole
    // (four ops: three or four events).
    let first = all[0].0;
    let mut w = s.watch(KeySelector::prefix("/"), first).await.unwrap();
    let mut rev = first;
    while rev <= report.current {
        let (r, events) = crate::common::next_revision(&mut w).await;
        assert_eq!(r, rev);
        assert!(
            events.len() == 3 || events.len() == 4,
            "revision {r}: {events:?}"
        );
        rev += 1;
    }
    let mut counts = BTreeMap::new();
    for kv in s.range(RangeRequest::prefix("/")).await.unwrap().kvs {
        *counts.entry(kv.key.slice(..3)).or_insert(0) += 1;
    }
    assert_eq!(counts.get(&b"/la"[..]), Some(&1));
}
