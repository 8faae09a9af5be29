//! The request context: what a handler knows about the request it serves — who sent it (the
//! authenticated user, the peer address), what it says (method, path, raw and parsed query,
//! headers, body) and, for a resource request, its target and Kubernetes verb. Built once by the
//! HTTP layer and passed down, instead of task-locals and long argument lists.

use std::net::SocketAddr;

use axum::http::{HeaderMap, Method};
use bytes::Bytes;
use watchkeeper_api::query::Options;

use crate::auth::User;

/// One request, as every handler sees it.
#[derive(Debug)]
pub struct RequestContext {
    /// The HTTP method.
    pub method: Method,
    /// The URL path.
    pub path: String,
    /// The raw query string, if any.
    pub query: Option<String>,
    /// The request headers.
    pub headers: HeaderMap,
    /// The whole body (the limits layer read it within its bounds).
    pub body: Bytes,
    /// The authenticated (and possibly impersonated) user.
    pub user: User,
    /// The client's address, when the transport reports it.
    pub peer: Option<SocketAddr>,
}

impl RequestContext {
    /// The body as JSON, for a handler that reads JSON: a protobuf body (client-go's typed
    /// clients send one: a scheduler's `Binding`, a scale client's `Scale`) decoded as one of
    /// `def`'s objects (its type is the envelope's; `def`'s when the envelope names none), any
    /// other body as it is. The audit log then keeps the decoded body.
    ///
    /// # Errors
    /// 400 for a malformed protobuf body, 415 for one this server has no schema for.
    pub fn json_body(
        &self,
        def: &watchkeeper_api::ResourceDef,
    ) -> Result<Bytes, watchkeeper_api::ApiError> {
        let protobuf = self
            .headers
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(watchkeeper_api::is_protobuf_media_type);
        if !protobuf || self.body.is_empty() {
            return Ok(self.body.clone());
        }
        let json = Bytes::from(watchkeeper_api::decode_protobuf(def, &self.body)?.to_string());
        crate::audit::context::request_body(&json);
        Ok(json)
    }
}

/// The Kubernetes verb of a resource request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// A watch (the `/watch/` path or `watch=true`).
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
    /// Any other method (answered 405).
    Other,
}

impl Verb {
    /// The verb of `method` on a target with or without a name.
    #[must_use]
    pub fn of(method: &Method, named: bool, watch: bool) -> Verb {
        match *method {
            Method::GET if watch => Verb::Watch,
            Method::GET if named => Verb::Get,
            Method::GET => Verb::List,
            Method::POST => Verb::Create,
            Method::PUT => Verb::Update,
            Method::PATCH => Verb::Patch,
            Method::DELETE if named => Verb::Delete,
            Method::DELETE => Verb::DeleteCollection,
            _ => Verb::Other,
        }
    }

    /// The verb as authorization sees it (`get`, `list`, ...; another method in lower case,
    /// the only one made per request).
    #[must_use]
    pub fn authorization_name(self, method: &Method) -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed(match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Other => return method.as_str().to_ascii_lowercase().into(),
        })
    }

    /// The verb label of the request metrics (`GET`, `LIST`, ...; empty for another method).
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::List => "LIST",
            Verb::Watch => "WATCH",
            Verb::Create => "CREATE",
            Verb::Update => "UPDATE",
            Verb::Patch => "PATCH",
            Verb::Delete => "DELETE",
            Verb::DeleteCollection => "DELETECOLLECTION",
            Verb::Other => "",
        }
    }
}

/// The parsed target of a resource request (borrowing the request's path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target<'a> {
    /// API group (empty for the core group).
    pub group: &'a str,
    /// API version.
    pub version: &'a str,
    /// Resource plural.
    pub plural: &'a str,
    /// Namespace, when the path names one.
    pub namespace: Option<&'a str>,
    /// Object name, when the path names one.
    pub name: Option<&'a str>,
    /// Subresource (`status`, `finalize`).
    pub subresource: Option<&'a str>,
    /// Whether the path is under `/watch/`.
    pub watch_path: bool,
}

impl<'a> Target<'a> {
    /// The target of `rest` (the path after `/api/v1` or `/apis/{group}/{version}`), routed
    /// like Kubernetes: `namespaces/{name}` is a namespace, `namespaces/{ns}/{resource}` a
    /// namespaced collection.
    #[must_use]
    pub fn parse(group: &'a str, version: &'a str, rest: &[&'a str]) -> Option<Target<'a>> {
        let (watch_path, rest) = match rest.first() {
            Some(&"watch") => (true, &rest[1..]),
            _ => (false, rest),
        };
        let target = |plural, namespace, name, subresource| Target {
            group,
            version,
            plural,
            namespace,
            name,
            subresource,
            watch_path,
        };
        Some(match rest {
            [plural] => target(*plural, None, None, None),
            ["namespaces", name] => target("namespaces", None, Some(*name), None),
            ["namespaces", name, sub @ ("status" | "finalize")] => {
                target("namespaces", None, Some(*name), Some(*sub))
            }
            ["namespaces", namespace, plural] => target(*plural, Some(*namespace), None, None),
            ["namespaces", namespace, plural, name] => {
                target(*plural, Some(*namespace), Some(*name), None)
            }
            ["namespaces", namespace, plural, name, sub] => {
                target(*plural, Some(*namespace), Some(*name), Some(*sub))
            }
            [plural, name] => target(*plural, None, Some(*name), None),
            [plural, name, sub] => target(*plural, None, Some(*name), Some(*sub)),
            // The `proxy` subresource takes a path of its own after it (`pods/p/proxy/a/b`,
            // see `http::resource_proxy`).
            ["namespaces", namespace, plural, name, "proxy", _, ..] => {
                target(*plural, Some(*namespace), Some(*name), Some("proxy"))
            }
            [plural, name, "proxy", _, ..] if *plural != "namespaces" => {
                target(*plural, None, Some(*name), Some("proxy"))
            }
            _ => return None,
        })
    }
}

/// A resource request: the context, its target, its parsed query and its verb.
#[derive(Debug)]
pub struct ResourceRequest<'a> {
    /// The request.
    pub context: &'a RequestContext,
    /// What it addresses.
    pub target: Target<'a>,
    /// The parsed query.
    pub options: Options,
    /// The Kubernetes verb.
    pub verb: Verb,
}

impl ResourceRequest<'_> {
    /// Whether the query asks for a dry run (`dryRun=All`).
    #[must_use]
    pub fn dry_run(&self) -> bool {
        self.context
            .query
            .as_deref()
            .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
            .is_some_and(|pairs| pairs.iter().any(|(k, v)| k == "dryRun" && !v.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_route_like_kubernetes() {
        let t = Target::parse("", "v1", &["namespaces", "default", "pods", "x"]).unwrap();
        assert_eq!(
            (t.plural, t.namespace, t.name),
            ("pods", Some("default"), Some("x"))
        );
        let t = Target::parse("", "v1", &["namespaces", "default"]).unwrap();
        assert_eq!(
            (t.plural, t.namespace, t.name),
            ("namespaces", None, Some("default"))
        );
        let t = Target::parse("", "v1", &["watch", "namespaces", "ns", "pods"]).unwrap();
        assert!(t.watch_path);
        assert_eq!((t.plural, t.namespace, t.name), ("pods", Some("ns"), None));
        let t = Target::parse("", "v1", &["nodes", "n1", "status"]).unwrap();
        assert_eq!(
            (t.plural, t.name, t.subresource),
            ("nodes", Some("n1"), Some("status"))
        );
        assert!(Target::parse("", "v1", &["a", "b", "c", "d", "e", "f", "g"]).is_none());
    }
}
