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
const CONCURRENT_CHILD_ENV: &str = "WATCHKEEPER_STORE_CRASH_CONCURRENT_CHILD_DIR";
const CONCURRENT_TEST_NAME: &str = "crash::kill9_keeps_every_acknowledged_concurrent_write";
/// Writers of the concurrent crash test: enough that commits group several transactions.
const WRITERS: u64 = 16;

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
    run_child_and_kill(TEST_NAME, CHILD_ENV, dir, n)
        .into_iter()
        .map(|a| (a[0], a[1]))
        .collect()
}

/// Runs `test` as the writer child (with `env` set to `dir`) until it has printed `n`
/// `ack ...` lines, kills it with SIGKILL, returns every ack's numbers.
fn run_child_and_kill(test: &str, env: &str, dir: &std::path::Path, n: usize) -> Vec<Vec<u64>> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(env, dir)
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
                let _ = tx.send(
                    rest.split(' ')
                        .map(|x| x.parse::<u64>().unwrap())
                        .collect::<Vec<u64>>(),
                );
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
        // A runtime per round: shutting it down ends the tasks that keep the store
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

/// The concurrent writer: `WRITERS` tasks, each committing transactions in a loop (its own
/// key `/c/<task>` = step, and a large value), printing `ack <revision> <task> <step>` for
/// each acknowledged one; concurrent transactions share commits (group commit).
async fn concurrent_child(dir: &str) {
    let s = EmbeddedStore::open(config(dir.as_ref())).unwrap();
    let mut tasks = Vec::new();
    for task in 0..WRITERS {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let key = format!("/c/{task}");
            let mut step: u64 = s.get(key.clone()).await.unwrap().map_or(0, |kv| {
                String::from_utf8_lossy(&kv.value).parse::<u64>().unwrap() + 1
            });
            loop {
                let v = step.to_string();
                let txn = TxnRequest::default()
                    .then(TxnOp::Put {
                        key: key.clone().into(),
                        value: v.clone().into(),
                    })
                    .then(TxnOp::Put {
                        key: format!("/big/{task}").into(),
                        value: v.repeat(300).into(),
                    });
                let resp = s.txn(txn).await.unwrap();
                println!("ack {} {task} {step}", resp.revision);
                step += 1;
            }
        }));
    }
    // The writers never end (the parent kills this process); one that fails ends the child.
    let mut set = tokio::task::JoinSet::new();
    for task in tasks {
        set.spawn(task);
    }
    let first = set.join_next().await;
    panic!("a writer ended: {first:?}");
}

#[test]
fn kill9_keeps_every_acknowledged_concurrent_write() {
    if let Ok(dir) = std::env::var(CONCURRENT_CHILD_ENV) {
        runtime().block_on(concurrent_child(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut all: Vec<Vec<u64>> = Vec::new();
    for round in 0..2 {
        all.extend(run_child_and_kill(
            CONCURRENT_TEST_NAME,
            CONCURRENT_CHILD_ENV,
            dir.path(),
            400,
        ));
        runtime().block_on(verify_concurrent(dir.path(), round, &all));
    }
}

/// Reopens the store after a kill and checks every acknowledged concurrent write.
async fn verify_concurrent(dir: &std::path::Path, round: usize, all: &[Vec<u64>]) {
    let s = EmbeddedStore::open(config(dir)).unwrap();
    let report = s.check_integrity().unwrap();
    let mut revisions = std::collections::BTreeSet::new();
    let mut last_step: BTreeMap<u64, u64> = BTreeMap::new();
    for ack in all {
        let (rev, task, step) = (ack[0], ack[1], ack[2]);
        assert!(revisions.insert(rev), "revision {rev} acknowledged twice");
        assert!(
            rev <= report.current,
            "round {round}: acknowledged {rev} lost (current {})",
            report.current
        );
        // Each task's writes are acknowledged in order (one step at a time within a round;
        // a round may start one step further, after a write committed but not printed).
        if let Some(prev) = last_step.insert(task, step) {
            assert!(prev < step, "task {task}: step {step} after {prev}");
        }
        let r = s
            .range(RangeRequest::key(format!("/c/{task}")).at_revision(rev))
            .await
            .unwrap();
        assert_eq!(r.kvs[0].value, step.to_string(), "revision {rev}");
        assert_eq!(r.kvs[0].mod_revision, rev);
    }
    // Per task, at most one write after its last ack (committed, not yet printed), and whole.
    for (task, step) in last_step {
        let kv = s.get(format!("/c/{task}")).await.unwrap().unwrap();
        let now: u64 = String::from_utf8_lossy(&kv.value).parse().unwrap();
        assert!(
            now == step || now == step + 1,
            "task {task}: {now} after {step}"
        );
        let big = s.get(format!("/big/{task}")).await.unwrap().unwrap();
        assert_eq!(
            big.mod_revision, kv.mod_revision,
            "task {task}: half a revision"
        );
        assert_eq!(big.value, now.to_string().repeat(300));
    }
}
