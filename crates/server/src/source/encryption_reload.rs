//! kube-apiserver's `--encryption-provider-config-automatic-reload`: the encryption
//! configuration ([`super::encryption`]) read again when its file changes, as kube's
//! `DynamicEncryptionConfigContent` controller does
//! (`staging/src/k8s.io/apiserver/pkg/server/options/encryptionconfig/controller`).
//!
//! ## Guarantees
//! - **Polling**: the file is read every `--encryption-provider-config-reload-interval-ms`
//!   (default 60000, kube's `EncryptionConfigFileChangePollDuration` of one minute) and its
//!   content's SHA-256 compared with the configuration in use (kube compares content hashes
//!   too); the same content does nothing, whatever its modification time.
//! - **A changed file that is valid** replaces the rules at once
//!   ([`super::encryption::Encryption::replace`]): every value written or read is handled by
//!   one whole configuration, the old or the new, never a mix; writes after the swap use the
//!   new first provider, and values stored under the old keys stay readable as long as the
//!   new file still lists those keys (kube's rotation). Counted as a success.
//! - **A changed file that cannot be used** (unreadable, not an `EncryptionConfiguration`,
//!   refused by the same validation as at start) keeps the configuration in use, untouched;
//!   it is logged (`error processing encryption config file <path>: <why>`, kube's words)
//!   and counted as a failure, once per distinct content (kube retries the same content with
//!   a rate-limited backoff and counts each retry; this server waits for the content to
//!   change instead, so a bad file does not fill the log).
//! - **Metrics** (kube v1.33's names): `apiserver_encryption_config_controller_automatic_reloads_total`
//!   and `apiserver_encryption_config_controller_automatic_reload_last_timestamp_seconds`
//!   (whole seconds), each by `status` (`success`, `failure`) and `apiserver_id_hash`
//!   (`sha256:` of this server's identity, `apiserver-<uuid>`, new at each start).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::encryption::Encryption;

/// The SHA-256 of a file's content.
type Digest = [u8; 32];

fn digest(bytes: &[u8]) -> Digest {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref());
    out
}

/// What one poll did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poll {
    /// The content is the configuration in use (or the last refused one): nothing done.
    Unchanged,
    /// A new configuration is in use.
    Reloaded,
    /// The new content was refused; the configuration in use stays.
    Failed,
}

/// Counts and last times (Unix seconds) of one outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcomes {
    /// Successful reloads.
    pub successes: u64,
    /// Failed reloads.
    pub failures: u64,
    /// When the last success happened (`None`: never).
    pub last_success: Option<u64>,
    /// When the last failure happened (`None`: never).
    pub last_failure: Option<u64>,
}

#[derive(Debug)]
struct State {
    /// The content of the configuration in use.
    loaded: Digest,
    /// The last content refused, not tried again until the file changes.
    refused: Option<Digest>,
    /// Whether the last read failed (counted once until a read succeeds).
    unreadable: bool,
    outcomes: Outcomes,
}

/// The configuration in use and the file it is reloaded from.
#[derive(Debug)]
pub struct Reloading {
    encryption: Arc<Encryption>,
    path: PathBuf,
    prefix: String,
    id_hash: String,
    state: Mutex<State>,
}

impl Reloading {
    /// Reads the file at `path` (for keys under `prefix`) once: the configuration in use and
    /// the content it was read from.
    ///
    /// # Errors
    /// As [`Encryption::load`].
    pub fn load(path: &Path, prefix: &str) -> Result<Reloading, String> {
        let bytes = Encryption::read(path)?;
        let encryption = Encryption::from_bytes(&bytes, path, prefix)?;
        let id = format!("apiserver-{}", uuid::Uuid::new_v4());
        let id_hash = format!("sha256:{}", hex(&digest(id.as_bytes())));
        Ok(Reloading {
            encryption: Arc::new(encryption),
            path: path.to_owned(),
            prefix: prefix.to_owned(),
            id_hash,
            state: Mutex::new(State {
                loaded: digest(&bytes),
                refused: None,
                unreadable: false,
                outcomes: Outcomes::default(),
            }),
        })
    }

    /// The configuration in use (the same value for the server's life; its rules change).
    #[must_use]
    pub fn encryption(&self) -> &Arc<Encryption> {
        &self.encryption
    }

    /// The metrics' `apiserver_id_hash`.
    #[must_use]
    pub fn id_hash(&self) -> &str {
        &self.id_hash
    }

    /// The reloads so far.
    #[must_use]
    pub fn outcomes(&self) -> Outcomes {
        self.lock().outcomes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads the file once and reloads it if its content changed (see the module docs).
    pub fn poll(&self) -> Poll {
        let mut state = self.lock();
        let bytes = match Encryption::read(&self.path) {
            Ok(bytes) => bytes,
            // An unreadable file is counted once until it can be read again.
            Err(_) if state.unreadable => return Poll::Unchanged,
            Err(why) => {
                state.unreadable = true;
                return self.failed(&mut state, &why);
            }
        };
        state.unreadable = false;
        let content = digest(&bytes);
        if content == state.loaded || Some(content) == state.refused {
            return Poll::Unchanged;
        }
        match Encryption::from_bytes(&bytes, &self.path, &self.prefix) {
            Ok(new) => {
                self.encryption.replace(new);
                state.loaded = content;
                state.refused = None;
                state.outcomes.successes += 1;
                state.outcomes.last_success = Some(unix_now());
                tracing::info!(path = %self.path.display(), "loaded a new encryption configuration");
                Poll::Reloaded
            }
            Err(why) => {
                state.refused = Some(content);
                self.failed(&mut state, &why)
            }
        }
    }

    /// A refused reload: logged and counted.
    fn failed(&self, state: &mut State, why: &str) -> Poll {
        state.outcomes.failures += 1;
        state.outcomes.last_failure = Some(unix_now());
        tracing::error!(
            "error processing encryption config file {}: {why}",
            self.path.display()
        );
        Poll::Failed
    }
}

/// Polls `reloading` every `interval` until the server shuts down (the first poll one
/// interval after the start).
pub async fn run(
    reloading: Arc<Reloading>,
    interval: std::time::Duration,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let poll = move || {
        let reloading = Arc::clone(&reloading);
        Some(Box::pin(async move {
            reloading.poll();
        }) as futures_util::future::BoxFuture<'static, ()>)
    };
    super::consistency::run_periodic(interval, poll, shutdown).await;
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use watchkeeper_store::ValueTransformer as _;

    const KEY_A: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    const KEY_B: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";
    const SECRET: &[u8] = b"/registry/secrets/default/s";

    fn config(keys: &[(&str, &str)]) -> String {
        let keys: Vec<String> = keys
            .iter()
            .map(|(name, secret)| format!("{{\"name\": \"{name}\", \"secret\": \"{secret}\"}}"))
            .collect();
        format!(
            "{{\"apiVersion\": \"apiserver.config.k8s.io/v1\", \"kind\": \"EncryptionConfiguration\", \"resources\": [{{\"resources\": [\"secrets\"], \"providers\": [{{\"aescbc\": {{\"keys\": [{}]}}}}, {{\"identity\": {{}}}}]}}]}}",
            keys.join(", ")
        )
    }

    #[test]
    fn a_changed_file_is_used_and_a_bad_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("encryption.json");
        std::fs::write(&path, config(&[("a", KEY_A)])).unwrap();
        let reloading = Reloading::load(&path, "/registry").unwrap();
        let encryption = Arc::clone(reloading.encryption());
        let old = encryption.stored_form(SECRET, "v".into()).unwrap();
        assert!(old.starts_with(b"k8s:enc:aescbc:v1:a:"));
        assert_eq!(reloading.poll(), Poll::Unchanged);

        std::fs::write(&path, config(&[("b", KEY_B), ("a", KEY_A)])).unwrap();
        assert_eq!(reloading.poll(), Poll::Reloaded);
        let new = encryption.stored_form(SECRET, "v".into()).unwrap();
        assert!(new.starts_with(b"k8s:enc:aescbc:v1:b:"));
        assert_eq!(encryption.read_stored(SECRET, old.clone()).unwrap(), "v");
        assert_eq!(reloading.poll(), Poll::Unchanged);

        // A file the validation refuses: counted once, the rules in use kept.
        std::fs::write(&path, config(&[("c", "c2hvcnQ=")])).unwrap();
        assert_eq!(reloading.poll(), Poll::Failed);
        assert_eq!(reloading.poll(), Poll::Unchanged);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(reloading.poll(), Poll::Failed);
        assert_eq!(reloading.poll(), Poll::Unchanged);
        let kept = encryption.stored_form(SECRET, "v".into()).unwrap();
        assert!(kept.starts_with(b"k8s:enc:aescbc:v1:b:"));
        let outcomes = reloading.outcomes();
        assert_eq!((outcomes.successes, outcomes.failures), (1, 2));
        assert!(outcomes.last_success.is_some() && outcomes.last_failure.is_some());

        // Back to the first content: a change from the one in use, so reloaded.
        std::fs::write(&path, config(&[("a", KEY_A)])).unwrap();
        assert_eq!(reloading.poll(), Poll::Reloaded);
        assert!(reloading.id_hash().starts_with("sha256:") && reloading.id_hash().len() == 71);
    }
}
