//! The official Python client (`kubernetes` 37.0.2 from PyPI) against an in-process
//! watchkeeper: `tests/python/client_python.py` lists namespaces, writes, pages, watches the
//! changes a thread makes, does a streaming list ending with the initial-events-end bookmark,
//! and sees an in-stream 410 raised as `ApiException(410)`.
//!
//! The virtualenv is cached under the target directory, keyed by the client version, so only
//! the first run pays for `pip install`. A failing `python3 -m venv` or `pip install` fails the
//! test with pip's output: it is never skipped silently.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const CLIENT_VERSION: &str = "37.0.2";

fn describe(what: &str, output: &Output) -> String {
    format!(
        "{what} failed ({}):\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn run(what: &str, command: &mut Command) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {command:?}: {e}"));
    assert!(output.status.success(), "{}", describe(what, &output));
    output
}

/// The venv's python, creating the venv and installing the client on first use.
fn python_with_client() -> PathBuf {
    let venv =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("py-kubernetes-{CLIENT_VERSION}"));
    let python = venv.join("bin").join("python");
    // Written only after a complete install, so an interrupted one is redone.
    let marker = venv.join("watchkeeper-installed");
    if marker.exists() && python.exists() {
        return python;
    }
    if venv.exists() {
        std::fs::remove_dir_all(&venv).expect("remove a partial venv");
    }
    run(
        "python3 -m venv",
        Command::new("python3").arg("-m").arg("venv").arg(&venv),
    );
    run(
        &format!("pip install kubernetes=={CLIENT_VERSION}"),
        Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            &format!("kubernetes=={CLIENT_VERSION}"),
        ]),
    );
    let version = run(
        "import kubernetes",
        Command::new(&python).args(["-c", "import kubernetes; print(kubernetes.__version__)"]),
    );
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        CLIENT_VERSION,
        "the venv has the wrong client version"
    );
    std::fs::write(&marker, CLIENT_VERSION).expect("write the venv marker");
    python
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_lists_writes_watches_and_streams() {
    let python = tokio::task::spawn_blocking(python_with_client)
        .await
        .expect("venv setup");
    // Without history rebuilding the cache's history starts at its first list, so the script's
    // watch from resourceVersion 1 is below it and gets the in-stream 410 it checks (with
    // rebuilding, a store that still holds revision 1 serves that watch instead).
    let server = common::server_with(watchkeeper::config::ServeArgs {
        rebuild_history: Some(false),
        ..watchkeeper::config::ServeArgs::default()
    })
    .await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/client_python.py");
    let url = format!("http://{}", server.addr);
    // The script has its own hang guard (SIGALRM after 120 s).
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(url)
            .env("PYTHONUNBUFFERED", "1")
            .output()
            .expect("run the python script")
    })
    .await
    .expect("python script");
    assert!(
        output.status.success(),
        "{}",
        describe("the python client script", &output)
    );
    print!("{}", String::from_utf8_lossy(&output.stdout));
    server.shutdown().await;
}
