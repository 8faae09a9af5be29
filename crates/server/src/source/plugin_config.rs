//! The checks every admission plugin's configuration file shares (kube's
//! `admission.ReadAdmissionConfiguration` hands a plugin its entry; the plugin's own scheme
//! decodes it). A leaf: the plugins' modules ([`super::event_rate_limit`],
//! [`super::pod_toleration_restriction`], [`super::resource_quota`]) read their entries
//! through it.

use serde_json::Value;

/// Checks that `value`, an admission plugin's configuration, is of `kind` in one of
/// `versions`, as the plugin's own scheme (made at `scheme` in kube's source) decodes it.
///
/// # Errors
/// kube's decoding error (`Object 'Kind' is missing in '...'`, `no kind "X" is registered for
/// version "g/v" in scheme "..."`).
pub fn config_kind(
    value: &Value,
    versions: &[&str],
    kind: &str,
    scheme: &str,
) -> Result<(), String> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default();
    let (api_version, given) = (text("apiVersion"), text("kind"));
    if given.is_empty() {
        return Err(format!("Object 'Kind' is missing in '{value}'"));
    }
    if given != kind || !versions.contains(&api_version) {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        return Err(format!(
            "no kind {given:?} is registered for version \"{group}/{version}\" in scheme {scheme:?}"
        ));
    }
    Ok(())
}
