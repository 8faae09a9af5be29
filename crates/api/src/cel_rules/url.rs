//! kube's CEL URL library (`k8s.io/apiserver/pkg/cel/library/urls.go`, in the base
//! environment since 1.0): the `kubernetes.URL` type over [`crate::go_url`], the port of Go's
//! `net/url` parser that the `uri` format shares.
//!
//! ## Guarantees
//! - `url(s)` accepts what Go's `url.ParseRequestURI` accepts (an absolute URI or an absolute
//!   path, no control characters, a port of digits only, well-formed `%` escapes, no escaped
//!   ASCII in a host) and is then read as `url.Parse` reads it (the fragment cut off); else it
//!   fails with kube's error (`URL parse error during conversion from string: parse "...":
//!   invalid URI for request`, Go's own words after the prefix). `isURL(s)` says whether
//!   `ParseRequestURI` accepts `s`.
//! - `.getScheme()` (lower-cased), `.getHost()` (with the port, IPv6 in brackets),
//!   `.getHostname()` (without the port and brackets), `.getPort()`, `.getEscapedPath()` (Go's
//!   `EscapedPath`: the path as the client escaped it when that is a valid spelling, else
//!   escaped as Go escapes a path) and `.getQuery()` (Go's `ParseQuery`: `&`-separated pairs,
//!   `+` read as a space, a pair with a `;` or a bad escape left out, a key's values in order).
//! - Every function costs a tenth per byte of its operands in the expression's bound, as any
//!   string operation (a URL's parts are never longer than its text).

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::types::{CelBool, CelList, CelMap, CelMapKey, CelString, STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::library::{one, opaque_val, string};
use crate::go_url::{Url, parse, parse_request_uri};

const URL: Type = Type::new_unspecified_type("kubernetes.URL");
static URL_TYPE: Type = URL;

#[derive(Clone, Debug)]
struct UrlVal(Arc<Url>);

opaque_val!(UrlVal, &URL_TYPE, equal: |a: &UrlVal, b: &UrlVal| a.0 == b.0);

/// Registers the library on `env`.
pub(super) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("url", "string_to_url", vec![STRING_TYPE], to_url)?;
    env.add_overload("isURL", "is_url_string", vec![STRING_TYPE], is_url)?;
    env.add_member_overload("getScheme", "url_get_scheme", URL, vec![], get_scheme)?;
    env.add_member_overload("getHost", "url_get_host", URL, vec![], get_host)?;
    env.add_member_overload("getHostname", "url_get_hostname", URL, vec![], get_hostname)?;
    env.add_member_overload("getPort", "url_get_port", URL, vec![], get_port)?;
    env.add_member_overload(
        "getEscapedPath",
        "url_get_escaped_path",
        URL,
        vec![],
        get_escaped_path,
    )?;
    env.add_member_overload("getQuery", "url_get_query", URL, vec![], get_query)?;
    Ok(())
}

/// kube's `stringToUrl`: `ParseRequestURI` checks, `Parse` reads (the fragment cut off).
fn to_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = one(args)?;
    let text = string(text.as_ref(), "url")?;
    parse_request_uri(text)
        .and_then(|_| parse(text))
        .map(|url| CowVal::owned(UrlVal(Arc::new(url))))
        .map_err(|e| {
            ExecutionError::function_error(
                "url",
                format!("URL parse error during conversion from string: {e}"),
            )
        })
}

fn is_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = one(args)?;
    let text = string(text.as_ref(), "isURL")?;
    Ok(CowVal::owned(CelBool::from(
        parse_request_uri(text).is_ok(),
    )))
}

/// A string read off the URL a getter is called on.
fn text_of<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    read: impl Fn(&Url) -> String,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let value = one(args)?;
    let url = value
        .downcast_ref::<UrlVal>()
        .ok_or_else(|| ExecutionError::function_error("url", "no such overload"))?;
    Ok(CowVal::owned(CelString::from(read(&url.0))))
}

fn get_scheme<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    text_of(args, |url| url.scheme.clone())
}

fn get_host<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    text_of(args, |url| url.host.clone())
}

fn get_hostname<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    text_of(args, |url| url.hostname().to_owned())
}

fn get_port<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    text_of(args, |url| url.port().to_owned())
}

fn get_escaped_path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    text_of(args, Url::escaped_path)
}

/// `getQuery()`: a map of each key's values.
fn get_query<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let value = one(args)?;
    let url = value
        .downcast_ref::<UrlVal>()
        .ok_or_else(|| ExecutionError::function_error("getQuery", "no such overload"))?;
    let map: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = url
        .0
        .query()
        .into_iter()
        .map(|(key, values)| {
            let values: Vec<Box<dyn Val + 'v>> = values
                .into_iter()
                .map(|v| Box::new(CelString::from(v)) as Box<dyn Val + 'v>)
                .collect();
            (
                CelMapKey::from(key),
                Box::new(CelList::from(values)) as Box<dyn Val + 'v>,
            )
        })
        .collect();
    Ok(CowVal::owned(CelMap::from(map)))
}
