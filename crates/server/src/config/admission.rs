//! kube-apiserver's `--admission-control-config-file`: an `AdmissionConfiguration`
//! (`apiserver.config.k8s.io/v1`, `v1alpha1`, or `apiserver.k8s.io/v1alpha1`; YAML or JSON)
//! whose `plugins` give admission plugins their configuration, inline (`configuration`) or
//! in a file (`path`, relative to the configuration file's directory), as kube's
//! `ReadAdmissionConfiguration` reads it.
//!
//! ## Guarantees
//! - Read and validated once, at start: a file that cannot be read or decoded, a plugin
//!   configuration kube's plugin would refuse, or one this server cannot honour, stops the
//!   server with the reason; nothing configured is silently ignored.
//! - `PodSecurity`: its `PodSecurityConfiguration` (defaults and exemptions,
//!   [`watchkeeper_api::pod_security::config`]). Ignored, as kube ignores the configuration of
//!   a plugin it does not run, when the admission plugin flags turn PodSecurity off.
//! - Any other plugin with a configuration is refused: the plugins this server runs take
//!   none here (kube's `ResourceQuota` and webhook plugins do, and this server does not
//!   honour theirs; PodNodeSelector runs with kube's defaults only), and plugins it does not
//!   run cannot be configured. kube's legacy unversioned files (`imagePolicy`,
//!   `podNodeSelectorPluginConfig`) are refused too.

use std::path::{Path, PathBuf};

use serde_json::Value;
use watchkeeper_api::pod_security::Configuration as PodSecurity;

use crate::source::pod_admission::AdmissionPlugins;

/// The `AdmissionConfiguration` versions kube-apiserver's scheme decodes.
const VERSIONS: [&str; 3] = [
    "apiserver.config.k8s.io/v1",
    "apiserver.config.k8s.io/v1alpha1",
    "apiserver.k8s.io/v1alpha1",
];

/// What the file configures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// PodSecurity's defaults and exemptions (kube's defaults without a file).
    pub pod_security: PodSecurity,
}

/// The configuration `--admission-control-config-file` gives (`file`), for the plugins that
/// run (`enabled`).
///
/// # Errors
/// The flag's error: why the file cannot be used.
pub(super) fn from_flags(
    file: Option<&Path>,
    enabled: &AdmissionPlugins,
) -> Result<AdmissionConfig, super::ConfigError> {
    let Some(file) = file else {
        return Ok(AdmissionConfig::default());
    };
    load(file, enabled).map_err(|message| {
        super::ConfigError::flag(
            "--admission-control-config-file",
            format!("--admission-control-config-file: {message}"),
        )
    })
}

/// Reads and validates the file at `path` for the `enabled` plugins.
///
/// # Errors
/// Why the file cannot be used (see the module docs).
fn load(path: &Path, enabled: &AdmissionPlugins) -> Result<AdmissionConfig, String> {
    let value = read(path).map_err(|error| {
        format!(
            "unable to read admission control configuration from {:?} [{error}]",
            path.display().to_string()
        )
    })?;
    from_value(&value, path.parent().unwrap_or(Path::new(".")), enabled)
}

/// A YAML or JSON file as a JSON value.
fn read(path: &Path) -> Result<Value, String> {
    let bytes = std::fs::read(path).map_err(|error| format!("open {}: {error}", path.display()))?;
    let json = watchkeeper_api::yaml::json_from_yaml_body(&bytes).map_err(|e| e.message)?;
    serde_json::from_slice(&json).map_err(|error| error.to_string())
}

/// The configuration of `value`, an `AdmissionConfiguration` whose relative plugin paths are
/// read from `base`.
fn from_value(
    value: &Value,
    base: &Path,
    enabled: &AdmissionPlugins,
) -> Result<AdmissionConfig, String> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    if value.get("imagePolicy").is_some() || value.get("podNodeSelectorPluginConfig").is_some() {
        return Err(
            "a legacy configuration of ImagePolicyWebhook or PodNodeSelector: this server does not run the first and does not read the second's"
                .to_owned(),
        );
    }
    if kind.is_empty() {
        return Err(format!("Object 'Kind' is missing in '{value}'"));
    }
    if kind != "AdmissionConfiguration" || !VERSIONS.contains(&api_version) {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        return Err(format!(
            "no kind {kind:?} is registered for version \"{group}/{version}\"; expected an AdmissionConfiguration of {}",
            VERSIONS.join(", ")
        ));
    }
    let mut config = AdmissionConfig::default();
    let plugins = value
        .get("plugins")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut seen = std::collections::BTreeSet::new();
    for plugin in plugins {
        let name = plugin
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // kube's `ConfigFor` takes a plugin's first entry.
        if !seen.insert(name) {
            continue;
        }
        let configured = plugin.get("configuration").filter(|c| !c.is_null());
        let file = plugin
            .get("path")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty());
        if configured.is_none() && file.is_none() {
            continue;
        }
        match name {
            "PodSecurity" => {
                if !enabled.pod_security {
                    continue;
                }
                let body = match (configured, file) {
                    (Some(inline), _) => inline.clone(),
                    (None, Some(file)) => {
                        let file = absolute(file, base);
                        read(&file).map_err(|error| {
                            format!(
                                "couldn't open admission plugin configuration {}: {error}",
                                file.display()
                            )
                        })?
                    }
                    (None, None) => unreachable!("an entry without a configuration was skipped"),
                };
                config.pod_security = PodSecurity::from_value(&body).map_err(|error| {
                    format!("couldn't init admission plugin \"PodSecurity\": {error}")
                })?;
            }
            other if AdmissionPlugins::NAMES.contains(&other) => {
                return Err(format!(
                    "admission plugin {other:?}: this server does not take a configuration for it (only PodSecurity's)"
                ));
            }
            other => {
                return Err(format!(
                    "admission plugin {other:?} is not run by this server; it runs {}",
                    AdmissionPlugins::NAMES.join(", ")
                ));
            }
        }
    }
    Ok(config)
}

/// kube's `makeAbs`: `path` as it is when absolute, else under `base`.
fn absolute(path: &str, base: &Path) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_owned()
    } else {
        base.join(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn admission(plugins: Value) -> Value {
        json!({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
            "plugins": plugins})
    }

    fn pod_security(body: Value) -> Value {
        let mut value = json!({"apiVersion": "pod-security.admission.config.k8s.io/v1",
            "kind": "PodSecurityConfiguration"});
        value
            .as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        value
    }

    #[test]
    fn inline_and_file_configurations_are_read() {
        let inline = admission(json!([{"name": "PodSecurity", "configuration":
            pod_security(json!({"defaults": {"enforce": "restricted"}}))}]));
        let config = from_value(&inline, Path::new("."), &AdmissionPlugins::default()).unwrap();
        assert_eq!(
            config.pod_security.defaults.enforce.to_string(),
            "restricted:latest"
        );

        let dir = tempfile::tempdir().unwrap();
        let yaml = "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\nexemptions:\n  namespaces: [kube-system]\n";
        std::fs::write(dir.path().join("psa.yaml"), yaml).unwrap();
        let main = "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  path: psa.yaml\n";
        std::fs::write(dir.path().join("admission.yaml"), main).unwrap();
        let config = load(
            &dir.path().join("admission.yaml"),
            &AdmissionPlugins::default(),
        )
        .unwrap();
        assert!(config.pod_security.exempt_namespace("kube-system"));
    }

    #[test]
    fn what_cannot_be_honoured_is_refused() {
        let bad = admission(json!([{"name": "PodSecurity", "configuration":
            pod_security(json!({"defaults": {"enforce": "strict"}}))}]));
        assert_eq!(
            from_value(&bad, Path::new("."), &AdmissionPlugins::default()).unwrap_err(),
            r#"couldn't init admission plugin "PodSecurity": defaults.enforce: Invalid value: "strict": must be one of privileged, baseline, restricted"#
        );
        // Disabled, its configuration is not read (as kube does not init the plugin).
        let disabled = AdmissionPlugins::without(&["PodSecurity".to_owned()]).unwrap();
        assert_eq!(
            from_value(&bad, Path::new("."), &disabled).unwrap(),
            AdmissionConfig::default()
        );
        let quota = admission(json!([{"name": "ResourceQuota", "configuration": {}}]));
        assert!(
            from_value(&quota, Path::new("."), &AdmissionPlugins::default())
                .unwrap_err()
                .contains("does not take a configuration")
        );
        let unknown = admission(json!([{"name": "EventRateLimit", "path": "x.yaml"}]));
        assert!(
            from_value(&unknown, Path::new("."), &AdmissionPlugins::default())
                .unwrap_err()
                .starts_with(r#"admission plugin "EventRateLimit" is not run by this server"#)
        );
        let wrong = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        assert!(from_value(&wrong, Path::new("."), &AdmissionPlugins::default()).is_err());
        let missing = load(
            Path::new("/nonexistent/admission.yaml"),
            &AdmissionPlugins::default(),
        );
        assert!(missing.unwrap_err().starts_with(
            r#"unable to read admission control configuration from "/nonexistent/admission.yaml" ["#
        ));
        // An entry without a configuration configures nothing.
        let empty = admission(json!([{"name": "ResourceQuota"}]));
        assert_eq!(
            from_value(&empty, Path::new("."), &AdmissionPlugins::default()).unwrap(),
            AdmissionConfig::default()
        );
    }
}
