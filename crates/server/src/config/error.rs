//! Why a configuration is refused: [`ConfigError`].

use std::path::PathBuf;

/// A refused configuration. Each variant carries what is at fault (the `--config` file, the
/// flag or flags) and why; the message names them as the flag is spelt on the command line
/// (the same key in the TOML file).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The `--config` file cannot be read.
    #[error("cannot read config file {}: {source}", path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The `--config` file is not TOML with the known keys.
    #[error("invalid config file {}: {source}", path.display())]
    ParseFile {
        /// The file.
        path: PathBuf,
        /// The parse error (it names the key and the position).
        #[source]
        source: Box<toml::de::Error>,
    },
    /// One flag's value is refused.
    #[error("{message}")]
    Flag {
        /// The flag, as spelt on the command line (`--max-header-bytes`).
        flag: &'static str,
        /// The message: the flag, the value when it helps, and the rule.
        message: String,
    },
    /// Flags that cannot go together, or a flag that needs another.
    #[error("{message}")]
    Combination {
        /// The flags involved, the one at fault first.
        flags: Vec<&'static str>,
        /// The message naming them.
        message: String,
    },
    /// The cache's tunables do not fit together (the field is named).
    #[error(transparent)]
    Cache(#[from] watchkeeper_core::ConfigError),
}

impl ConfigError {
    /// A refused value of `flag`.
    pub(crate) fn flag(flag: &'static str, message: impl Into<String>) -> ConfigError {
        ConfigError::Flag {
            flag,
            message: message.into(),
        }
    }

    /// A refused combination of `flags`.
    pub(crate) fn combination(flags: &[&'static str], message: impl Into<String>) -> ConfigError {
        ConfigError::Combination {
            flags: flags.to_vec(),
            message: message.into(),
        }
    }
}
