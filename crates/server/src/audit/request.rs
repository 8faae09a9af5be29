//! What an audit event says of its request, read once when it arrives: kube's `RequestInfo`
//! (verb, resource, namespace, name, subresource), the user, `sourceIPs` and `userAgent`.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderMap, Method};

use super::policy::Attributes;
use crate::auth::{Auth, Prepared, User};
use crate::request::{Target, Verb};

/// kube's `ObjectReference` of an event.
#[derive(Clone, Debug, Default)]
pub(super) struct ObjectRef {
    pub(super) resource: String,
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) api_group: String,
    pub(super) api_version: String,
    pub(super) subresource: String,
}

/// A request as its events describe it.
#[derive(Debug)]
pub(super) struct Info {
    pub(super) request_uri: String,
    pub(super) verb: String,
    pub(super) path: String,
    pub(super) object_ref: Option<ObjectRef>,
    /// The authenticated user; `None` when authentication failed.
    pub(super) user: Option<User>,
    /// The user it acts as, when it impersonates one.
    pub(super) impersonated: Option<User>,
    pub(super) source_ips: Vec<String>,
    pub(super) user_agent: Option<String>,
    /// A watch, or a pod's `log`, `exec`, `attach`, `portforward`, `proxy`.
    pub(super) long_running: bool,
}

impl Info {
    /// Reads `request` (authenticating it as the limits layer will, and its impersonation).
    pub(super) fn of(auth: &Auth, request: &Request, prepared: &Prepared) -> Info {
        let (method, uri, headers) = (request.method(), request.uri(), request.headers());
        let path = uri.path();
        let connection = request.extensions().get::<Arc<crate::limits::Connection>>();
        let user = auth
            .authenticate_peer(
                path,
                headers,
                connection.and_then(|c| c.peer.as_ref()),
                prepared,
            )
            .ok();
        let impersonated = match &user {
            Some(user) if headers.contains_key("impersonate-user") => {
                auth.impersonate(user.clone(), headers).ok()
            }
            _ => None,
        };
        let remote = connection.and_then(|c| c.remote).or_else(|| {
            request
                .extensions()
                .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
                .map(|info| info.0)
        });
        let (verb, object_ref) =
            resource_info(method, &crate::limits::decoded_path(path), uri.query());
        Info {
            request_uri: uri
                .path_and_query()
                .map_or_else(|| path.to_owned(), ToString::to_string),
            verb,
            path: path.to_owned(),
            object_ref,
            user,
            impersonated,
            source_ips: source_ips(headers, remote.map(|r| r.ip())),
            user_agent: headers
                .get(axum::http::header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            long_running: crate::limits::is_long_running(method, path, uri.query()),
        }
    }

    /// The request as the policy sees it, with the authenticated user.
    pub(super) fn attributes(&self) -> Attributes<'_> {
        let object = self.object_ref.as_ref();
        let field = |f: fn(&ObjectRef) -> &str| object.map_or("", f);
        Attributes {
            user: self.user.as_ref().map(|u| u.name.as_str()),
            groups: self.user.as_ref().map_or(&[], |u| u.groups.as_slice()),
            verb: &self.verb,
            resource_request: object.is_some(),
            namespace: field(|o| &o.namespace),
            group: field(|o| &o.api_group),
            resource: field(|o| &o.resource),
            subresource: field(|o| &o.subresource),
            name: field(|o| &o.name),
            path: &self.path,
        }
    }
}

/// kube's `RequestInfo`: the verb and, for a resource request, what it addresses.
fn resource_info(method: &Method, path: &str, query: Option<&str>) -> (String, Option<ObjectRef>) {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segments[..] {
        ["api", version, ref rest @ ..] if !rest.is_empty() => ("", version, rest),
        ["apis", group, version, ref rest @ ..] if !rest.is_empty() => (group, version, rest),
        _ => return (method.as_str().to_ascii_lowercase(), None),
    };
    let Some(target) = Target::parse(group, version, rest) else {
        return (method.as_str().to_ascii_lowercase(), None);
    };
    let watch = target.watch_path
        || (target.name.is_none()
            && watchkeeper_api::query::Options::parse(query).is_ok_and(|o| o.watch));
    let verb = Verb::of(method, target.name.is_some(), watch)
        .authorization_name(method)
        .into_owned();
    // kube: `namespaces/{name}` is the namespace's own request, in that namespace.
    let namespace = match (target.plural, target.namespace, target.name) {
        ("namespaces", None, Some(name)) => name,
        (_, namespace, _) => namespace.unwrap_or_default(),
    };
    let object_ref = ObjectRef {
        resource: target.plural.to_owned(),
        namespace: namespace.to_owned(),
        name: target.name.unwrap_or_default().to_owned(),
        api_group: target.group.to_owned(),
        api_version: target.version.to_owned(),
        subresource: target.subresource.unwrap_or_default().to_owned(),
    };
    (verb, Some(object_ref))
}

/// kube's `utilnet.SourceIPs`: the `X-Forwarded-For` addresses, `X-Real-Ip` unless already
/// there, then the peer unless it is the last one.
fn source_ips(headers: &HeaderMap, remote: Option<IpAddr>) -> Vec<String> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    };
    let mut ips: Vec<IpAddr> = text("x-forwarded-for")
        .split(',')
        .filter_map(|part| part.trim().parse().ok())
        .collect();
    if let Ok(real) = text("x-real-ip").trim().parse::<IpAddr>()
        && !ips.contains(&real)
    {
        ips.push(real);
    }
    if let Some(remote) = remote
        && ips.last() != Some(&remote)
    {
        ips.push(remote);
    }
    ips.iter().map(ToString::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_ips_are_kubes() {
        let remote: IpAddr = "10.0.0.9".parse().unwrap();
        let mut headers = HeaderMap::new();
        assert_eq!(source_ips(&headers, Some(remote)), ["10.0.0.9"]);
        headers.insert("x-forwarded-for", "1.2.3.4, junk, 5.6.7.8".parse().unwrap());
        headers.insert("x-real-ip", "5.6.7.8".parse().unwrap());
        assert_eq!(
            source_ips(&headers, Some(remote)),
            ["1.2.3.4", "5.6.7.8", "10.0.0.9"]
        );
        headers.insert("x-forwarded-for", "10.0.0.9".parse().unwrap());
        headers.remove("x-real-ip");
        assert_eq!(source_ips(&headers, Some(remote)), ["10.0.0.9"]);
    }

    #[test]
    fn verbs_and_object_refs_are_kubes() {
        let info = |method: Method, path: &str, query: Option<&str>| {
            let (verb, object) = resource_info(&method, path, query);
            let object = object.map(|o| {
                format!(
                    "{} {} {} {} {} {}",
                    o.api_group, o.api_version, o.resource, o.namespace, o.name, o.subresource
                )
            });
            (verb, object)
        };
        assert_eq!(
            info(Method::GET, "/api/v1/namespaces/ns/pods", Some("watch=1")),
            ("watch".into(), Some(" v1 pods ns  ".into()))
        );
        assert_eq!(
            info(Method::GET, "/api/v1/namespaces/ns/pods/p/log", None),
            ("get".into(), Some(" v1 pods ns p log".into()))
        );
        assert_eq!(
            info(
                Method::DELETE,
                "/apis/apps/v1/namespaces/ns/deployments",
                None
            ),
            (
                "deletecollection".into(),
                Some("apps v1 deployments ns  ".into())
            )
        );
        assert_eq!(
            info(Method::PUT, "/api/v1/namespaces/kube-system", None),
            (
                "update".into(),
                Some(" v1 namespaces kube-system kube-system ".into())
            )
        );
        assert_eq!(info(Method::POST, "/api/v1", None), ("post".into(), None));
        assert_eq!(info(Method::GET, "/healthz", None), ("get".into(), None));
    }
}
