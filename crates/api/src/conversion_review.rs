//! CustomResourceDefinition conversion webhooks' `ConversionReview`s, as kube-apiserver's
//! `apiextensions-apiserver/pkg/apiserver/conversion/webhook_converter.go` builds and checks
//! them (pure: the server's `source/webhook/conversion.rs` calls the webhook).
//!
//! ## Guarantees
//! - **The review** is `apiextensions.k8s.io/v1` or `v1beta1`, the first of the CRD's
//!   `conversionReviewVersions` supported (none: kube's `no supported conversion review
//!   versions`), with a fresh `request.uid`, `desiredAPIVersion` and the objects in order.
//! - **The answer is checked as kube checks it**, each failure kube's words behind
//!   `conversion webhook for <gvk> ...`: a `v1` answer's kind and uid (a `v1beta1` one's are
//!   not checked, as kube), `result.status` `Success` (else its message), as many objects as
//!   sent, each at the desired `apiVersion`, of the same `kind`, with the same name, namespace
//!   and uid; only its labels and annotations may change (valid ones): every other field of
//!   `metadata` is the original's (kube's `restoreObjectMeta`).
//! - An object already at the desired version is not sent (kube's `getObjectsToConvert`); the
//!   caller keeps it.
//! - Nothing here panics: a malformed answer is an error naming what is wrong.

use serde_json::{Map, Value, json};

/// A CRD's `spec.conversion.webhook`, as the server needs it to call the webhook.
#[derive(Clone, Debug, PartialEq)]
pub struct ConversionWebhook {
    /// The CRD's name (`widgets.example.com`), for logs.
    pub crd: String,
    /// `clientConfig` (`url` or `service`, `caBundle`).
    pub client_config: Value,
    /// `conversionReviewVersions`, in the CRD's order.
    pub review_versions: Vec<String>,
}

impl ConversionWebhook {
    /// The webhook of `crd` when its conversion strategy is `Webhook`.
    #[must_use]
    pub fn of(crd: &Value) -> Option<ConversionWebhook> {
        let conversion = crd.pointer("/spec/conversion")?;
        if conversion.get("strategy").and_then(Value::as_str) != Some("Webhook") {
            return None;
        }
        let webhook = conversion.get("webhook").cloned().unwrap_or(Value::Null);
        Some(ConversionWebhook {
            crd: crd
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            client_config: webhook
                .get("clientConfig")
                .cloned()
                .unwrap_or_else(|| json!({})),
            review_versions: webhook
                .get("conversionReviewVersions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        })
    }

    /// The review version used: the first of `conversionReviewVersions` supported.
    ///
    /// # Errors
    /// kube's `no supported conversion review versions`.
    pub fn review_version(&self) -> Result<&'static str, String> {
        self.review_versions
            .iter()
            .find_map(|v| match v.as_str() {
                "v1" => Some("v1"),
                "v1beta1" => Some("v1beta1"),
                _ => None,
            })
            .ok_or_else(|| "no supported conversion review versions".to_owned())
    }
}

/// Go's `schema.GroupVersionKind` as kube's errors print it: `example.com/v1, Kind=Widget`
/// (for a list of them, `kind` is the list's: `WidgetList`).
#[must_use]
pub fn printed_gvk(api_version: &str, kind: &str) -> String {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={kind}")
}

/// The `ConversionReview` asking for `objects` at `desired`.
#[must_use]
pub fn review(version: &str, uid: &str, desired: &str, objects: &[&Value]) -> Value {
    json!({
        "apiVersion": format!("apiextensions.k8s.io/{version}"),
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
    })
}

/// What was sent, to check the answer against.
#[derive(Clone, Copy, Debug)]
pub struct Sent<'a> {
    /// The review version.
    pub version: &'a str,
    /// `request.uid`.
    pub uid: &'a str,
    /// `desiredAPIVersion`.
    pub desired: &'a str,
    /// The objects, in order.
    pub objects: &'a [&'a Value],
    /// Whether kube would have converted them as a list (its errors name the list's kind and
    /// an index); a single object's errors differ.
    pub list: bool,
    /// The converted input's GVK as [`printed_gvk`] prints it.
    pub gvk: &'a str,
}

/// The converted objects of the webhook's answer `body` to the review `sent`, checked and
/// with their metadata restored (see the module's guarantees).
///
/// # Errors
/// kube's message for the first check that fails.
pub fn converted(sent: &Sent<'_>, body: &[u8]) -> Result<Vec<Value>, String> {
    let gvk = sent.gvk;
    let answer: Value = serde_json::from_slice(body)
        .map_err(|e| format!("conversion webhook for {gvk} failed: {e}"))?;
    let objects = answer_objects(sent, &answer)
        .map_err(|e| format!("conversion webhook for {gvk} failed: {e}"))?;
    if objects.len() != sent.objects.len() {
        return Err(format!(
            "conversion webhook for {gvk} returned {} objects, expected {}",
            objects.len(),
            sent.objects.len()
        ));
    }
    let mut out = Vec::with_capacity(objects.len());
    for (index, (original, converted)) in sent.objects.iter().zip(objects).enumerate() {
        out.push(checked(sent, index, original, converted.clone())?);
    }
    Ok(out)
}

/// The answer's `response.convertedObjects` (kube's `getConvertedObjectsFromResponse`).
fn answer_objects<'a>(sent: &Sent<'_>, answer: &'a Value) -> Result<&'a [Value], String> {
    if sent.version == "v1" {
        let api_version = answer
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = answer
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if api_version != "apiextensions.k8s.io/v1" || kind != "ConversionReview" {
            return Err(format!(
                "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {}",
                printed_gvk(api_version, kind)
            ));
        }
    }
    let response = answer
        .get("response")
        .filter(|r| r.is_object())
        .ok_or_else(|| "no response provided".to_owned())?;
    if sent.version == "v1" {
        let uid = response
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if uid != sent.uid {
            return Err(format!("expected response.uid={:?}, got {uid:?}", sent.uid));
        }
    }
    let result = response.get("result");
    let status = result
        .and_then(|r| r.get("status"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if status != "Success" {
        let message = result
            .and_then(|r| r.get("message"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !message.is_empty() {
            return Err(message.to_owned());
        }
        return Err(format!(
            "response.result.status was '{status}', not 'Success'"
        ));
    }
    Ok(response
        .get("convertedObjects")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice))
}

/// One converted object checked against its original (kube's checks of groupVersion and
/// kind, `validateConvertedObject`, `restoreObjectMeta`), in kube's words for a single object
/// or a list's item.
fn checked(
    sent: &Sent<'_>,
    index: usize,
    original: &Value,
    mut converted: Value,
) -> Result<Value, String> {
    let gvk = sent.gvk;
    let (invalid, metadata) = if sent.list {
        // kube counts the item before these checks: its index is one past the item's.
        (
            format!(
                "conversion webhook for {gvk} returned invalid converted object at index {}",
                index + 1
            ),
            format!(
                "conversion webhook for {gvk} returned invalid metadata in object at index {}",
                index + 1
            ),
        )
    } else {
        (
            format!("conversion webhook for {gvk} returned invalid object at index 0"),
            format!("conversion webhook for {gvk} returned invalid metadata"),
        )
    };
    if !converted.is_object() {
        return Err(format!(
            "conversion webhook for {gvk} returned invalid converted object at index {index}: Object 'Kind' is missing in '{converted}'"
        ));
    }
    let text = |value: &Value, pointer: &str| {
        value
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let got = text(&converted, "/apiVersion");
    if got != sent.desired {
        return Err(format!(
            "{invalid}: invalid groupVersion (expected {}, received {got})",
            sent.desired
        ));
    }
    let (expected, got) = (text(original, "/kind"), text(&converted, "/kind"));
    if expected != got {
        return Err(format!(
            "{invalid}: invalid kind (expected {expected}, received {got})"
        ));
    }
    let validation = if sent.list {
        invalid.clone()
    } else {
        format!("conversion webhook for {gvk} returned invalid object")
    };
    for (pointer, what) in [
        ("/kind", "kind"),
        ("/metadata/name", "name"),
        ("/metadata/namespace", "namespace"),
        ("/metadata/uid", "UID"),
    ] {
        let (a, b) = (text(original, pointer), text(&converted, pointer));
        if a != b {
            return Err(format!(
                "{validation}: must have the same {what}: {a} != {b}"
            ));
        }
    }
    restore_object_meta(original, &mut converted).map_err(|e| format!("{metadata}: {e}"))?;
    Ok(converted)
}

/// kube's `restoreObjectMeta`: the original's metadata, with the converted object's labels
/// and annotations (each a map of strings, valid when they changed).
fn restore_object_meta(original: &Value, converted: &mut Value) -> Result<(), String> {
    let answered = match converted.get("metadata") {
        None => return Err("missing metadata in converted object".to_owned()),
        Some(Value::Object(map)) => map.clone(),
        Some(other) => {
            return Err(format!(
                "invalid metadata of type {} in converted object",
                go_type(other)
            ));
        }
    };
    let mut restored = match original.get("metadata") {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    };
    for field in ["labels", "annotations"] {
        let response = match answered.get(field) {
            None | Some(Value::Null) => {
                restored.remove(field);
                continue;
            }
            Some(Value::Object(map)) => map,
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in converted object",
                    go_type(other)
                ));
            }
        };
        let before = restored.get(field).and_then(Value::as_object);
        let mut changed = before.map_or(0, Map::len) != response.len();
        for (key, value) in response {
            if !value.is_string() {
                return Err(format!(
                    "metadata.{field}[{key}] must be a string, but is {} in converted object",
                    go_type(value)
                ));
            }
            changed |= before.and_then(|b| b.get(key)) != Some(value);
        }
        if changed {
            let mut causes = Vec::new();
            let mut only = Map::new();
            only.insert(field.to_owned(), Value::Object(response.clone()));
            let path = if field == "labels" {
                "metadata"
            } else {
                // kube validates annotations at `metadata.annotation`.
                "metadata.annotation"
            };
            crate::names::validate_meta_maps(path, &only, &mut causes)?;
            if !causes.is_empty() {
                let texts: Vec<String> = causes
                    .iter()
                    .map(|(field, message, _)| {
                        let field =
                            field.replace("metadata.annotation.annotations", "metadata.annotation");
                        format!("{field}: {message}")
                    })
                    .collect();
                return Err(if texts.len() == 1 {
                    texts[0].clone()
                } else {
                    format!("[{}]", texts.join(", "))
                });
            }
        }
        restored.insert(field.to_owned(), Value::Object(response.clone()));
    }
    if let Some(map) = converted.as_object_mut() {
        map.insert("metadata".to_owned(), Value::Object(restored));
    }
    Ok(())
}

/// Go's name of a JSON value's type, as `%T` prints an unstructured one.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget(name: &str, version: &str) -> Value {
        json!({"apiVersion": format!("example.com/{version}"), "kind": "Widget",
            "metadata": {"name": name, "namespace": "default", "uid": "u-1",
                "resourceVersion": "7", "labels": {"a": "1"}},
            "spec": {"hostPort": "h:1"}})
    }

    fn answer(uid: &str, objects: Vec<Value>) -> Vec<u8> {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": uid, "result": {"status": "Success"}, "convertedObjects": objects}})
        .to_string()
        .into_bytes()
    }

    fn sent<'a>(objects: &'a [&'a Value], list: bool) -> Sent<'a> {
        Sent {
            version: "v1",
            uid: "abc",
            desired: "example.com/v2",
            objects,
            list,
            gvk: "example.com/v1, Kind=Widget",
        }
    }

    #[test]
    fn the_first_supported_review_version_is_used() {
        let crd = |versions: Value| {
            json!({"metadata": {"name": "widgets.example.com"}, "spec": {"conversion": {
                "strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://h/p"},
                "conversionReviewVersions": versions}}}})
        };
        let hook = ConversionWebhook::of(&crd(json!(["v2", "v1beta1", "v1"]))).unwrap();
        assert_eq!(hook.review_version(), Ok("v1beta1"));
        assert_eq!(hook.crd, "widgets.example.com");
        let none = ConversionWebhook::of(&crd(json!(["v9"]))).unwrap();
        assert_eq!(
            none.review_version(),
            Err("no supported conversion review versions".to_owned())
        );
        assert!(
            ConversionWebhook::of(&json!({"spec": {"conversion": {"strategy": "None"}}})).is_none()
        );
        let review = review("v1", "abc", "example.com/v2", &[&widget("a", "v1")]);
        assert_eq!(review["request"]["desiredAPIVersion"], "example.com/v2");
        assert_eq!(review["request"]["objects"][0]["metadata"]["name"], "a");
    }

    #[test]
    fn metadata_is_restored_but_labels_and_annotations() {
        let original = widget("a", "v1");
        let mut answered = widget("a", "v2");
        answered["metadata"]["resourceVersion"] = json!("999");
        answered["metadata"]["labels"] = json!({"b": "2"});
        answered["metadata"]["annotations"] = json!({"note": "x"});
        answered["spec"] = json!({"host": "h", "port": "1"});
        let objects = [&original];
        let out = converted(&sent(&objects, false), &answer("abc", vec![answered])).unwrap();
        assert_eq!(out[0]["metadata"]["resourceVersion"], "7");
        assert_eq!(out[0]["metadata"]["uid"], "u-1");
        assert_eq!(out[0]["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(out[0]["metadata"]["annotations"], json!({"note": "x"}));
        assert_eq!(out[0]["spec"], json!({"host": "h", "port": "1"}));
        // Labels left out of the answer are gone, as kube drops them.
        let mut bare = widget("a", "v2");
        bare["metadata"].as_object_mut().unwrap().remove("labels");
        let out = converted(&sent(&objects, false), &answer("abc", vec![bare])).unwrap();
        assert!(out[0]["metadata"].get("labels").is_none());
    }

    #[test]
    fn answers_are_refused_in_kubes_words() {
        let original = widget("a", "v1");
        let objects = [&original];
        let single = sent(&objects, false);
        let refused = |body: Vec<u8>| converted(&single, &body).unwrap_err();
        assert_eq!(
            refused(answer("other", vec![widget("a", "v2")])),
            "conversion webhook for example.com/v1, Kind=Widget failed: expected response.uid=\"abc\", got \"other\""
        );
        assert_eq!(
            refused(answer("abc", vec![])),
            "conversion webhook for example.com/v1, Kind=Widget returned 0 objects, expected 1"
        );
        assert_eq!(
            refused(answer("abc", vec![widget("b", "v2")])),
            "conversion webhook for example.com/v1, Kind=Widget returned invalid object: must have the same name: a != b"
        );
        assert_eq!(
            refused(answer("abc", vec![widget("a", "v1")])),
            "conversion webhook for example.com/v1, Kind=Widget returned invalid object at index 0: invalid groupVersion (expected example.com/v2, received example.com/v1)"
        );
        let mut gadget = widget("a", "v2");
        gadget["kind"] = json!("Gadget");
        assert_eq!(
            refused(answer("abc", vec![gadget])),
            "conversion webhook for example.com/v1, Kind=Widget returned invalid object at index 0: invalid kind (expected Widget, received Gadget)"
        );
        let mut bad_label = widget("a", "v2");
        bad_label["metadata"]["labels"] = json!({"a": 1});
        assert_eq!(
            refused(answer("abc", vec![bad_label])),
            "conversion webhook for example.com/v1, Kind=Widget returned invalid metadata: metadata.labels[a] must be a string, but is int64 in converted object"
        );
        let failed = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "abc", "result": {"status": "Failure", "message": "cannot"}}});
        assert_eq!(
            refused(failed.to_string().into_bytes()),
            "conversion webhook for example.com/v1, Kind=Widget failed: cannot"
        );
        let wrong_kind = json!({"apiVersion": "v1", "kind": "Status"});
        assert_eq!(
            refused(wrong_kind.to_string().into_bytes()),
            "conversion webhook for example.com/v1, Kind=Widget failed: expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got /v1, Kind=Status"
        );
        // A list's items are named by index (kube's, one past the item).
        let second = widget("b", "v1");
        let two = [&original, &second];
        let list = Sent {
            gvk: "example.com/v1, Kind=WidgetList",
            ..sent(&two, true)
        };
        assert_eq!(
            converted(
                &list,
                &answer("abc", vec![widget("a", "v2"), widget("c", "v2")])
            )
            .unwrap_err(),
            "conversion webhook for example.com/v1, Kind=WidgetList returned invalid converted object at index 2: must have the same name: b != c"
        );
    }

    #[test]
    fn v1beta1_answers_are_not_checked_for_kind_and_uid() {
        let original = widget("a", "v1");
        let objects = [&original];
        let beta = Sent {
            version: "v1beta1",
            ..sent(&objects, false)
        };
        let body = json!({"response": {"uid": "whatever", "result": {"status": "Success"},
            "convertedObjects": [widget("a", "v2")]}});
        let out = converted(&beta, body.to_string().as_bytes()).unwrap();
        assert_eq!(out[0]["apiVersion"], "example.com/v2");
    }
}
