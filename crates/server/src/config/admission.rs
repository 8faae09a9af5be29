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
//! - Each plugin's configuration is read when the plugin runs, as kube's `ConfigFor` reads
//!   it (the first entry of a name counts; a `path` that cannot be read is an error only for
//!   a plugin that runs), and refused in the plugin's words (`couldn't init admission plugin
//!   "EventRateLimit": ...`). The configuration of a plugin the flags turn off is ignored,
//!   as kube ignores it.
//! - `PodSecurity`: its `PodSecurityConfiguration` (defaults and exemptions,
//!   [`watchkeeper_api::pod_security::config`]).
//! - `EventRateLimit`: its `Configuration` ([`crate::source::event_rate_limit`]); required
//!   when the plugin runs, as in kube.
//! - `PodTolerationRestriction`: its `Configuration`
//!   ([`crate::source::pod_toleration_restriction`]).
//! - `PodNodeSelector`: its `podNodeSelectorPluginConfig`
//!   ([`crate::source::plugin_admission::node_selectors`]).
//! - `ResourceQuota`: its `ResourceQuotaConfiguration`'s `limitedResources`
//!   ([`crate::source::resource_quota::limited_resources`]).
//! - `ImagePolicyWebhook`: its `imagePolicy` ([`crate::source::image_policy`]); required
//!   when the plugin runs, as in kube, its kubeconfig read at start.
//! - kube's legacy unversioned file (a file that is not an `AdmissionConfiguration` but has
//!   `imagePolicy` or `podNodeSelectorPluginConfig`) is the configuration of ImagePolicyWebhook
//!   and PodNodeSelector, as in kube.
//! - Any other plugin with a configuration is refused: the other plugins this server runs
//!   take none here, and plugins it does not run cannot be configured.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use watchkeeper_api::pod_security::Configuration as PodSecurity;

use crate::source::event_rate_limit::{self, EventRateLimit};
use crate::source::image_policy::{self, ImagePolicy};
use crate::source::plugin_admission::{self, NodeSelectors};
use crate::source::pod_admission::AdmissionPlugins;
use crate::source::pod_toleration_restriction;
use crate::source::resource_quota::{self, LimitedResource};

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
    /// EventRateLimit's limits and buckets, when it runs.
    pub event_rate_limit: Option<Arc<EventRateLimit>>,
    /// PodTolerationRestriction's cluster defaults and whitelist.
    pub pod_toleration_restriction: pod_toleration_restriction::Config,
    /// PodNodeSelector's cluster default selector and namespace whitelists.
    pub node_selectors: NodeSelectors,
    /// ResourceQuota's `limitedResources`.
    pub limited_resources: Vec<LimitedResource>,
    /// ImagePolicyWebhook's configuration and answers kept, when it runs.
    pub image_policy: Option<Arc<ImagePolicy>>,
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
    let configs = match file {
        None => Ok(BTreeMap::new()),
        Some(file) => load(file),
    };
    configs
        .and_then(|configs| build(&configs, enabled))
        .map_err(|message| {
            super::ConfigError::flag(
                "--admission-control-config-file",
                format!("--admission-control-config-file: {message}"),
            )
        })
}

/// Reads the file at `path`: each plugin's configuration, by name.
///
/// # Errors
/// Why the file cannot be used (see the module docs).
fn load(path: &Path) -> Result<Configs, String> {
    let value = read(path).map_err(|error| {
        format!(
            "unable to read admission control configuration from {:?} [{error}]",
            path.display().to_string()
        )
    })?;
    plugin_configs(&value, path.parent().unwrap_or(Path::new(".")))
}

/// A YAML or JSON file as a JSON value.
fn read(path: &Path) -> Result<Value, String> {
    let bytes = std::fs::read(path).map_err(|error| format!("open {}: {error}", path.display()))?;
    let json = watchkeeper_api::yaml::json_from_yaml_body(&bytes).map_err(|e| e.message)?;
    serde_json::from_slice(&json).map_err(|error| error.to_string())
}

/// The plugins' configurations in `value`, an `AdmissionConfiguration` whose relative plugin
/// paths are read from `base` (each plugin's first entry, as kube's `ConfigFor` takes), or
/// kube's legacy unversioned file (`imagePolicy`, `podNodeSelectorPluginConfig`), which is
/// the configuration of both ImagePolicyWebhook and PodNodeSelector.
fn plugin_configs(value: &Value, base: &Path) -> Result<Configs, String> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let admission = kind == "AdmissionConfiguration" && VERSIONS.contains(&api_version);
    if !admission
        && (value.get("imagePolicy").is_some()
            || value.get("podNodeSelectorPluginConfig").is_some())
    {
        return Ok(LEGACY
            .iter()
            .filter(|name| AdmissionPlugins::NAMES.contains(name))
            .map(|name| ((*name).to_owned(), Ok(value.clone())))
            .collect());
    }
    if kind.is_empty() {
        return Err(format!("Object 'Kind' is missing in '{value}'"));
    }
    if !admission {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        return Err(format!(
            "no kind {kind:?} is registered for version \"{group}/{version}\"; expected an AdmissionConfiguration of {}",
            VERSIONS.join(", ")
        ));
    }
    let plugins = value
        .get("plugins")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut configs = BTreeMap::new();
    for plugin in plugins {
        let name = plugin
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if configs.contains_key(name) {
            continue;
        }
        let configured = plugin.get("configuration").filter(|c| !c.is_null());
        let file = plugin
            .get("path")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty());
        let body = match (configured, file) {
            (Some(inline), _) => Ok(inline.clone()),
            (None, Some(file)) => {
                let file = absolute(file, base);
                read(&file).map_err(|error| {
                    format!(
                        "couldn't open admission plugin configuration {}: {error}",
                        file.display()
                    )
                })
            }
            (None, None) => continue,
        };
        configs.insert(name.to_owned(), body);
    }
    Ok(configs)
}

/// Each plugin's configuration by name, or why its file could not be read (told only if the
/// plugin runs: kube reads a plugin's file when it starts the plugin).
type Configs = BTreeMap<String, Result<Value, String>>;

/// The plugins kube gives a legacy unversioned file to.
const LEGACY: [&str; 2] = ["ImagePolicyWebhook", "PodNodeSelector"];

/// kube's `couldn't init admission plugin "Name": <error>`.
fn init_error(name: &str) -> impl Fn(String) -> String + '_ {
    move |error| format!("couldn't init admission plugin {name:?}: {error}")
}

/// The `enabled` plugins initialised with their `configs`, in kube's order (the first that
/// fails is told, as kube's start tells it).
fn build(configs: &Configs, enabled: &AdmissionPlugins) -> Result<AdmissionConfig, String> {
    let mut config = AdmissionConfig::default();
    for name in configs.keys() {
        if !AdmissionPlugins::NAMES.contains(&name.as_str()) {
            return Err(format!(
                "admission plugin {name:?} is not run by this server; it runs {}",
                AdmissionPlugins::NAMES.join(", ")
            ));
        }
    }
    let mut on = *enabled;
    for name in super::admission_plugins::KUBE_PLUGINS {
        if !on.switch(name).is_some_and(|on| *on) {
            continue;
        }
        let given = configs.get(name).cloned().transpose()?;
        let given = given.as_ref();
        match name {
            "PodSecurity" => {
                if let Some(body) = given {
                    config.pod_security =
                        PodSecurity::from_value(body).map_err(init_error(name))?;
                }
            }
            "EventRateLimit" => {
                let limits = event_rate_limit::parse(given).map_err(init_error(name))?;
                config.event_rate_limit = Some(Arc::new(EventRateLimit::new(limits)));
            }
            "ImagePolicyWebhook" => {
                let policy = image_policy::parse(given).map_err(init_error(name))?;
                // kube reads the kubeconfig when the plugin starts; its client is made
                // once the runtime runs.
                kube::config::Kubeconfig::read_from(&policy.kubeconfig)
                    .map_err(|error| init_error(name)(error.to_string()))?;
                config.image_policy = Some(Arc::new(ImagePolicy::new(policy)));
            }
            "ResourceQuota" => {
                config.limited_resources =
                    resource_quota::limited_resources(given).map_err(init_error(name))?;
            }
            "PodNodeSelector" => {
                config.node_selectors = plugin_admission::node_selectors(given);
            }
            "PodTolerationRestriction" => {
                config.pod_toleration_restriction =
                    pod_toleration_restriction::parse(given).map_err(init_error(name))?;
            }
            other if given.is_some() => {
                return Err(format!(
                    "admission plugin {other:?}: this server does not take a configuration for it (it does for {})",
                    CONFIGURED.join(", ")
                ));
            }
            _ => {}
        }
    }
    Ok(config)
}

/// The plugins whose configuration this server reads.
const CONFIGURED: [&str; 6] = [
    "PodSecurity",
    "EventRateLimit",
    "PodTolerationRestriction",
    "PodNodeSelector",
    "ResourceQuota",
    "ImagePolicyWebhook",
];

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

    fn from_value(
        value: &Value,
        base: &Path,
        enabled: &AdmissionPlugins,
    ) -> Result<AdmissionConfig, String> {
        plugin_configs(value, base).and_then(|configs| build(&configs, enabled))
    }

    fn load(path: &Path, enabled: &AdmissionPlugins) -> Result<AdmissionConfig, String> {
        super::load(path).and_then(|configs| build(&configs, enabled))
    }

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
        let ranger = admission(json!([{"name": "LimitRanger", "configuration": {}}]));
        assert!(
            from_value(&ranger, Path::new("."), &AdmissionPlugins::default())
                .unwrap_err()
                .contains("does not take a configuration")
        );
        let quota = admission(json!([{"name": "ResourceQuota", "configuration": {}}]));
        assert_eq!(
            from_value(&quota, Path::new("."), &AdmissionPlugins::default()).unwrap_err(),
            r#"couldn't init admission plugin "ResourceQuota": Object 'Kind' is missing in '{}'"#
        );
        // A plugin's file that cannot be read matters only when the plugin runs.
        let missing = admission(json!([{"name": "PodNodeSelector", "path": "/nonexistent.yaml"}]));
        assert_eq!(
            from_value(&missing, Path::new("."), &AdmissionPlugins::default()).unwrap(),
            AdmissionConfig::default()
        );
        let selector = AdmissionPlugins {
            pod_node_selector: true,
            ..AdmissionPlugins::default()
        };
        assert!(
            from_value(&missing, Path::new("."), &selector)
                .unwrap_err()
                .starts_with("couldn't open admission plugin configuration /nonexistent.yaml: ")
        );
        let unknown = admission(json!([{"name": "Nope", "configuration": {}}]));
        assert!(
            from_value(&unknown, Path::new("."), &AdmissionPlugins::default())
                .unwrap_err()
                .starts_with(r#"admission plugin "Nope" is not run by this server"#)
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
