//! Driving the real `kubectl` against an in-process server: a private kubeconfig and HOME per
//! test (so the discovery cache is the test's own), one-shot commands, and `get -w` read line
//! by line. Every wait is on output, bounded by a generous hang guard.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::sync::mpsc;

/// A kubectl command or a watched line that takes longer than this is hung, not slow.
pub const KUBECTL_HANG_GUARD: Duration = Duration::from_secs(60);

/// The output of one kubectl run.
#[derive(Debug)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// kubectl configured for one server.
pub struct Kubectl {
    home: tempfile::TempDir,
    kubeconfig: PathBuf,
    binary: PathBuf,
}

/// The kubectl on PATH (the Cloud SDK dispatcher, which runs the bundled kubectl matching the
/// server's `/version`), or `$KUBECTL` when set.
fn kubectl_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("KUBECTL") {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("kubectl"))
        .find(|candidate| candidate.is_file())
        .expect(
            "kubectl is not on PATH: these tests drive the real kubectl (install it, or set KUBECTL)",
        )
}

impl Kubectl {
    pub fn new(addr: SocketAddr) -> Kubectl {
        let home = tempfile::tempdir().unwrap();
        let kubeconfig = home.path().join("kubeconfig.yaml");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: local, cluster: {{server: \"http://{addr}\"}}}}]\nusers: [{{name: anon, user: {{}}}}]\ncontexts: [{{name: local, context: {{cluster: local, user: anon, namespace: default}}}}]\ncurrent-context: local\n"
            ),
        )
        .unwrap();
        Kubectl {
            home,
            kubeconfig,
            binary: kubectl_binary(),
        }
    }

    /// kubectl with a kubeconfig of the test's own (e.g. TLS, a token or a client certificate).
    pub fn with_kubeconfig(text: &str) -> Kubectl {
        let home = tempfile::tempdir().unwrap();
        let kubeconfig = home.path().join("kubeconfig.yaml");
        std::fs::write(&kubeconfig, text).unwrap();
        Kubectl {
            home,
            kubeconfig,
            binary: kubectl_binary(),
        }
    }

    /// A scratch directory for manifests.
    pub fn dir(&self) -> &Path {
        self.home.path()
    }

    /// Writes a manifest into the scratch directory and returns its path as a string.
    pub fn manifest(&self, name: &str, text: &str) -> String {
        let path = self.home.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.home.path())
            // kubectl's temporary files (`edit` keeps a refused edit's copy) go with the test's
            // scratch directory, not into the machine's /tmp.
            .env("TMPDIR", self.home.path())
            .env_remove("KUBECTL_EXTERNAL_DIFF")
            .stdin(Stdio::null());
        command
    }

    /// Runs kubectl to completion.
    pub async fn run(&self, args: &[&str]) -> Output {
        self.run_with_env(args, &[]).await
    }

    /// Runs kubectl to completion with extra environment variables (e.g. `EDITOR` for
    /// `kubectl edit`).
    pub async fn run_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let command_args = with_flags(args, &["--request-timeout=30s"]);
        let mut command = self.command(&command_args);
        command.envs(env.iter().copied());
        let label = args.join(" ");
        let task = tokio::task::spawn_blocking(move || command.output());
        let output = tokio::time::timeout(KUBECTL_HANG_GUARD, task)
            .await
            .unwrap_or_else(|_| panic!("kubectl {label} hung"))
            .unwrap()
            .unwrap_or_else(|e| panic!("cannot run kubectl {label}: {e}"));
        Output {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs kubectl, asserts it succeeded and returns its standard output.
    pub async fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args).await;
        assert!(
            output.success(),
            "kubectl {} failed ({:?}):\nstdout: {}\nstderr: {}",
            args.join(" "),
            output.code,
            output.stdout,
            output.stderr
        );
        output.stdout
    }

    /// Runs kubectl until it succeeds (for what the server makes asynchronously, such as a
    /// namespace's `default` ServiceAccount), failing the test at the hang guard.
    pub async fn eventually_ok(&self, args: &[&str]) -> String {
        let deadline = tokio::time::Instant::now() + KUBECTL_HANG_GUARD;
        loop {
            let output = self.run(args).await;
            if output.success() {
                return output.stdout;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "kubectl {} kept failing: {}",
                args.join(" "),
                output.stderr
            );
            tokio::task::yield_now().await;
        }
    }

    /// Runs kubectl, asserts it failed and returns its output.
    pub async fn fails(&self, args: &[&str]) -> Output {
        let output = self.run(args).await;
        assert!(
            !output.success(),
            "kubectl {} should have failed:\nstdout: {}",
            args.join(" "),
            output.stdout
        );
        output
    }

    /// Runs kubectl with `-o json` appended and parses the output.
    pub async fn json(&self, args: &[&str]) -> serde_json::Value {
        let args = with_flags(args, &["-o", "json"]);
        let stdout = self.ok(&args).await;
        serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!(
                "kubectl {} printed bad JSON ({e}): {stdout}",
                args.join(" ")
            )
        })
    }

    /// Starts a long-running kubectl (such as `get -w`) whose output is read line by line.
    pub fn spawn(&self, args: &[&str]) -> Streaming {
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run kubectl {}: {e}", args.join(" ")));
        let (sender, lines) = mpsc::unbounded_channel();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let err_sender = sender.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(Line::Out(line)).is_err() {
                    break;
                }
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if err_sender.send(Line::Err(line)).is_err() {
                    break;
                }
            }
        });
        Streaming {
            child,
            lines,
            seen: Vec::new(),
            label: args.join(" "),
        }
    }
}

#[derive(Debug)]
enum Line {
    Out(String),
    Err(String),
}

/// A running kubectl; killed when dropped.
pub struct Streaming {
    child: Child,
    lines: mpsc::UnboundedReceiver<Line>,
    seen: Vec<String>,
    label: String,
}

impl Streaming {
    /// Waits for a standard-output line matching `predicate` and returns it. Panics with
    /// everything seen so far when the stream ends or the hang guard expires first.
    pub async fn line_matching(&mut self, predicate: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + KUBECTL_HANG_GUARD;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(Line::Out(line))) => {
                    self.seen.push(line.clone());
                    if predicate(&line) {
                        return line;
                    }
                }
                Ok(Some(Line::Err(line))) => self.seen.push(format!("stderr: {line}")),
                Ok(None) => panic!(
                    "kubectl {} ended before the expected line; output:\n{}",
                    self.label,
                    self.seen.join("\n")
                ),
                Err(_) => panic!(
                    "kubectl {} did not print the expected line; output:\n{}",
                    self.label,
                    self.seen.join("\n")
                ),
            }
        }
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `args` with extra flags placed before any `--` (after which everything is the command line
/// of a container).
pub fn with_flags<'a>(args: &[&'a str], flags: &[&'a str]) -> Vec<&'a str> {
    let split = args.iter().position(|a| *a == "--").unwrap_or(args.len());
    let mut out = args[..split].to_vec();
    out.extend_from_slice(flags);
    out.extend_from_slice(&args[split..]);
    out
}

/// The first whitespace-separated column of each line after the header of a table.
pub fn names(table: &str) -> Vec<String> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}
