//! `Accept` header negotiation as kube-apiserver does it: the header is a list of media ranges,
//! each with parameters; Kubernetes' own parameters `g` (group), `v` (version) and `as` (kind)
//! ask the server to *convert* the response into another shape — an aggregated discovery
//! document (`as=APIGroupDiscoveryList`), a Table (`as=Table`), object metadata only
//! (`as=PartialObjectMetadata`).
//!
//! Guarantees:
//! - Ranges are tried in order of their `q` weight (highest first, `q=0` never), ties in the
//!   order the client wrote them — as the Go content negotiation library kube-apiserver uses.
//! - Parsing never fails: a clause that cannot be read is skipped, so a malformed header means
//!   "no preference" (kube-apiserver answers these with its default JSON too).
//! - The parser holds at most [`MAX_CLAUSES`] ranges, whatever the header's length, so a
//!   hostile header cannot make negotiation allocate without bound.
//! - [`negotiate`] answers protobuf (`application/vnd.kubernetes.protobuf`) for a resource
//!   whose kind has protobuf schemas, and for object metadata (`as=PartialObjectMetadata[List]`)
//!   of any resource, custom ones included, as kube-apiserver does; a protobuf range is
//!   otherwise passed over for the next one (a custom resource's objects, a Table), and a
//!   header with nothing else is a 406.

/// The most media ranges read from one `Accept` header; the rest are ignored.
pub const MAX_CLAUSES: usize = 32;

/// One media range of an `Accept` header.
#[derive(Clone, Debug, PartialEq)]
pub struct MediaRange {
    /// The type and subtype, lower case, e.g. `application/json` or `*/*`.
    pub essence: String,
    /// The `g` parameter (group of the conversion target), if any.
    pub group: Option<String>,
    /// The `v` parameter (version of the conversion target), if any.
    pub version: Option<String>,
    /// The `as` parameter (kind of the conversion target), if any.
    pub as_kind: Option<String>,
    /// The `q` weight, 0.0 to 1.0 (1.0 when absent).
    pub q: f32,
}

impl MediaRange {
    /// Whether this range accepts a JSON body (`application/json`, `application/*`, `*/*`).
    #[must_use]
    pub fn accepts_json(&self) -> bool {
        matches!(
            self.essence.as_str(),
            "application/json" | "application/*" | "*/*"
        )
    }

    /// Whether this range asks for a conversion (any of `g`, `v`, `as`).
    #[must_use]
    pub fn converts(&self) -> bool {
        self.group.is_some() || self.version.is_some() || self.as_kind.is_some()
    }

    /// Whether this range asks for exactly the conversion `group`/`version`/`kind`.
    #[must_use]
    pub fn converts_to(&self, group: &str, version: &str, kind: &str) -> bool {
        self.group.as_deref() == Some(group)
            && self.version.as_deref() == Some(version)
            && self.as_kind.as_deref() == Some(kind)
    }
}

fn unquote(value: &str) -> &str {
    let value = value.trim();
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value)
}

fn parse_range(clause: &str) -> Option<MediaRange> {
    let mut parts = clause.split(';');
    let essence = parts.next()?.trim().to_ascii_lowercase();
    let (kind, subtype) = essence.split_once('/')?;
    if kind.is_empty() || subtype.is_empty() {
        return None;
    }
    let mut range = MediaRange {
        essence,
        group: None,
        version: None,
        as_kind: None,
        q: 1.0,
    };
    for param in parts {
        let Some((name, value)) = param.split_once('=') else {
            continue;
        };
        let value = unquote(value);
        match name.trim().to_ascii_lowercase().as_str() {
            "g" => range.group = Some(value.to_owned()),
            "v" => range.version = Some(value.to_owned()),
            "as" => range.as_kind = Some(value.to_owned()),
            "q" => {
                range.q = value
                    .parse::<f32>()
                    .ok()
                    .filter(|q| (0.0..=1.0).contains(q))?
            }
            _ => {}
        }
    }
    Some(range)
}

/// The media ranges of an `Accept` header in the order they are tried (see the module doc).
/// An absent or empty header gives no ranges.
#[must_use]
pub fn parse_accept(accept: Option<&str>) -> Vec<MediaRange> {
    let mut ranges: Vec<MediaRange> = accept
        .unwrap_or("")
        .split(',')
        .filter(|clause| !clause.trim().is_empty())
        .take(MAX_CLAUSES)
        .filter_map(parse_range)
        .filter(|range| range.q > 0.0)
        .collect();
    // Stable: equal weights keep the client's order.
    ranges.sort_by(|a, b| b.q.total_cmp(&a.q));
    ranges
}

/// Whether `accept` is one range that takes JSON with no parameter (`application/json`,
/// `application/*`, `*/*`, as client-go, kube-rs and curl send it): [`negotiate`] answers it
/// with plain JSON whatever the kind's formats, and [`answers_in_yaml`] with `false`, exactly
/// as parsing it would; other spellings (upper case, a `q`) are parsed.
#[must_use]
pub fn is_plain_json_accept(accept: Option<&str>) -> bool {
    matches!(
        accept.map(str::trim),
        Some("application/json" | "application/*" | "*/*")
    )
}

/// The media types kube-apiserver serves resources in (its 406 message lists them).
pub const RESOURCE_MEDIA_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// The shape a resource response is converted into (`as=` in `meta.k8s.io`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conversion {
    /// The objects themselves.
    None,
    /// A `meta.k8s.io/v1` `Table` (`kubectl get`).
    Table,
    /// A `meta.k8s.io/v1` `PartialObjectMetadata` (one object, or each watch event's object).
    PartialObjectMetadata,
    /// A `meta.k8s.io/v1` `PartialObjectMetadataList` (a list).
    PartialObjectMetadataList,
}

impl Conversion {
    /// The kind a client names in `as=`.
    #[must_use]
    pub fn kind(self) -> &'static str {
        match self {
            Conversion::None => "",
            Conversion::Table => "Table",
            Conversion::PartialObjectMetadata => "PartialObjectMetadata",
            Conversion::PartialObjectMetadataList => "PartialObjectMetadataList",
        }
    }
}

fn conversion_of(range: &MediaRange) -> Option<Conversion> {
    if !range.converts() {
        return Some(Conversion::None);
    }
    if range.group.as_deref() != Some("meta.k8s.io") {
        return None;
    }
    // Tables exist in v1 and v1beta1 (answered as v1, as the server builds them); metadata
    // conversions are served in v1 only, so a v1beta1 range falls through to the next one.
    match (range.version.as_deref()?, range.as_kind.as_deref()?) {
        ("v1" | "v1beta1", "Table") => Some(Conversion::Table),
        ("v1", "PartialObjectMetadata") => Some(Conversion::PartialObjectMetadata),
        ("v1", "PartialObjectMetadataList") => Some(Conversion::PartialObjectMetadataList),
        _ => None,
    }
}

/// The wire format of a resource response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `application/json` (also the answer to wildcards, and to YAML ranges, which the server
    /// converts from it: [`answers_in_yaml`]).
    Json,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

/// What a resource request's `Accept` header negotiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// The shape of the answer.
    pub conversion: Conversion,
    /// Its wire format.
    pub format: Format,
    /// Whether the header accepts JSON too (a range of any weight, or no header): a protobuf
    /// answer this server cannot encode (a field outside its schemas) is then sent as JSON,
    /// which client-go decodes by the response's `Content-Type`.
    pub json_fallback: bool,
}

/// Negotiates a resource response: the first range (by weight, then the client's order) the
/// server can serve decides the conversion and the format. `protobuf` says whether the
/// resource's kind can be sent as protobuf; a plain protobuf range on such a resource is
/// [`Format::Protobuf`], on another resource it is passed over. Otherwise as
/// [`negotiate_conversion`].
///
/// # Errors
/// 406 NotAcceptable with kube-apiserver's message (listing the resource's media types) when no
/// range can be served.
pub fn negotiate(accept: Option<&str>, protobuf: bool) -> Result<Negotiated, crate::ApiError> {
    if is_plain_json_accept(accept) {
        // What the one range parses to, without parsing it (three negotiations per request).
        return Ok(Negotiated {
            conversion: Conversion::None,
            format: Format::Json,
            json_fallback: true,
        });
    }
    let ranges = parse_accept(accept);
    let json_fallback = ranges.is_empty() || ranges.iter().any(MediaRange::accepts_json);
    let answer = |conversion, format| {
        Ok(Negotiated {
            conversion,
            format,
            json_fallback,
        })
    };
    if ranges.is_empty() {
        return answer(Conversion::None, Format::Json);
    }
    for range in &ranges {
        if range.accepts_json() {
            if let Some(conversion) = conversion_of(range) {
                return answer(conversion, Format::Json);
            }
        } else if range.converts() {
            // Metadata in protobuf for every resource, custom ones too (kube-apiserver encodes
            // it with `metainternalversionscheme`'s codecs); a Table in JSON only.
            if range.essence == crate::protobuf::PROTOBUF_MEDIA_TYPE
                && let Some(
                    conversion @ (Conversion::PartialObjectMetadata
                    | Conversion::PartialObjectMetadataList),
                ) = conversion_of(range)
            {
                return answer(conversion, Format::Protobuf);
            }
        } else if range.essence == "application/yaml" {
            return answer(Conversion::None, Format::Json);
        } else if range.essence == crate::protobuf::PROTOBUF_MEDIA_TYPE && protobuf {
            return answer(Conversion::None, Format::Protobuf);
        }
    }
    // A custom resource's 406 lists protobuf too: kube-apiserver's serializer for them has it
    // (for `PartialObjectMetadata`), though a custom resource itself is never answered in it.
    Err(crate::ApiError::not_acceptable(format!(
        "only the following media types are accepted: {RESOURCE_MEDIA_TYPES}"
    )))
}

/// Whether an answer negotiated as JSON goes out in YAML: the first range (by weight, then the
/// client's order) that names JSON, YAML, protobuf or a wildcard is a plain `application/yaml`
/// (kube-apiserver serves YAML for every answer but a watch stream). A protobuf range decides
/// for the format [`negotiate`] picks, and a range that asks for a conversion is answered in
/// JSON, so neither makes the answer YAML.
#[must_use]
pub fn answers_in_yaml(accept: Option<&str>) -> bool {
    if is_plain_json_accept(accept) {
        return false;
    }
    parse_accept(accept)
        .iter()
        .find(|range| {
            range.accepts_json()
                || range.essence == "application/yaml"
                || range.essence == crate::protobuf::PROTOBUF_MEDIA_TYPE
        })
        .is_some_and(|range| range.essence == "application/yaml" && !range.converts())
}

/// The conversion a resource request's `Accept` header asks for: the first range (by weight,
/// then the client's order) the server can serve decides. JSON ranges (and `*/*`,
/// `application/*`) may ask for a conversion; YAML and protobuf ranges are answered as plain
/// objects and skipped when they ask for a conversion (the server answers conversions in
/// JSON only). No header, or an empty one, is [`Conversion::None`]. This is [`negotiate`] for
/// a resource with protobuf schemas, without the format.
///
/// # Errors
/// 406 NotAcceptable with kube-apiserver's message when the header names ranges and none can
/// be served (e.g. only `text/html`, or only an unknown conversion).
pub fn negotiate_conversion(accept: Option<&str>) -> Result<Conversion, crate::ApiError> {
    negotiate(accept, true).map(|negotiated| negotiated.conversion)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the plain JSON headers answered without parsing are answered as parsing them
    /// answers (the same range with `q=1` spelled out, which is parsed), for kinds with and
    /// without protobuf; anything else is parsed.
    #[test]
    fn plain_json_headers_negotiate_as_parsed() {
        for header in ["application/json", "application/*", "*/*", " */* "] {
            assert!(is_plain_json_accept(Some(header)), "{header}");
            let parsed = format!("{header};q=1");
            assert!(!is_plain_json_accept(Some(&parsed)));
            for protobuf in [true, false] {
                assert_eq!(
                    negotiate(Some(header), protobuf).ok(),
                    negotiate(Some(&parsed), protobuf).ok(),
                    "{header}"
                );
            }
            assert_eq!(
                answers_in_yaml(Some(header)),
                answers_in_yaml(Some(&parsed))
            );
            assert!(!answers_in_yaml(Some(header)));
        }
        for other in [
            None,
            Some(""),
            Some("APPLICATION/JSON"),
            Some("application/yaml"),
            Some("application/json;as=Table;g=meta.k8s.io;v=v1"),
            Some("application/json, application/yaml"),
        ] {
            assert!(!is_plain_json_accept(other), "{other:?}");
        }
    }

    #[test]
    fn conversions_as_clients_ask_for_them() {
        let kubectl_get = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            negotiate_conversion(Some(kubectl_get)).unwrap(),
            Conversion::Table
        );
        // client-go's metadata informer: protobuf first, for every resource (a custom one too),
        // with JSON to fall back on.
        let metadata_list = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(
            negotiate_conversion(Some(metadata_list)).unwrap(),
            Conversion::PartialObjectMetadataList
        );
        for protobuf in [true, false] {
            let negotiated = negotiate(Some(metadata_list), protobuf).unwrap();
            assert_eq!(
                (
                    negotiated.conversion,
                    negotiated.format,
                    negotiated.json_fallback
                ),
                (
                    Conversion::PartialObjectMetadataList,
                    Format::Protobuf,
                    true
                )
            );
        }
        // A Table is never protobuf, and a v1beta1 metadata range falls through.
        for skipped in [
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1, application/json",
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1, application/json",
        ] {
            let negotiated = negotiate(Some(skipped), true).unwrap();
            assert_eq!(
                (negotiated.conversion, negotiated.format),
                (Conversion::None, Format::Json),
                "{skipped}"
            );
        }
        let kube_rs = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        assert_eq!(
            negotiate_conversion(Some(kube_rs)).unwrap(),
            Conversion::PartialObjectMetadata
        );
        for plain in [
            "application/json",
            "application/vnd.kubernetes.protobuf,application/json",
            "application/yaml",
            "*/*",
            "text/html,application/xhtml+xml,*/*;q=0.8",
            "",
        ] {
            assert_eq!(
                negotiate_conversion(Some(plain)).unwrap(),
                Conversion::None,
                "{plain}"
            );
        }
        assert_eq!(negotiate_conversion(None).unwrap(), Conversion::None);
        // v1beta1 metadata is not served: the next range decides.
        assert_eq!(
            negotiate_conversion(Some(
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1,application/json"
            ))
            .unwrap(),
            Conversion::None
        );
        for refused in [
            "text/html",
            "application/json;as=Foo;g=meta.k8s.io;v=v1",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1",
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
        ] {
            let error = negotiate_conversion(Some(refused)).unwrap_err();
            assert_eq!(error.code, 406, "{refused}");
            assert_eq!(error.reason, "NotAcceptable");
            assert_eq!(
                error.message,
                "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
            );
        }
    }

    #[test]
    fn yaml_when_it_is_the_first_range_served() {
        for yaml in [
            "application/yaml",
            "application/yaml, application/json",
            "application/json;q=0.5, application/yaml",
            "text/html, application/yaml;q=0.9, */*;q=0.8",
        ] {
            assert!(answers_in_yaml(Some(yaml)), "{yaml}");
        }
        for json in [
            "",
            "*/*",
            "application/json, application/yaml",
            "application/vnd.kubernetes.protobuf, application/yaml",
            "application/yaml;as=Table;v=v1;g=meta.k8s.io",
            "application/json;as=Table;v=v1;g=meta.k8s.io, application/yaml",
        ] {
            assert!(!answers_in_yaml(Some(json)), "{json}");
        }
        assert!(!answers_in_yaml(None));
    }

    #[test]
    fn protobuf_for_kinds_with_schemas_only() {
        let client_go = "application/vnd.kubernetes.protobuf, application/json";
        let pb = |accept, protobuf| negotiate(Some(accept), protobuf).unwrap();
        assert_eq!(pb(client_go, true).format, Format::Protobuf);
        assert!(pb(client_go, true).json_fallback);
        // A custom resource: the JSON range answers.
        assert_eq!(pb(client_go, false).format, Format::Json);
        assert_eq!(pb(client_go, false).conversion, Conversion::None);
        let only = negotiate(Some("application/vnd.kubernetes.protobuf"), true).unwrap();
        assert_eq!(only.format, Format::Protobuf);
        assert!(!only.json_fallback);
        let error = negotiate(Some("application/vnd.kubernetes.protobuf"), false).unwrap_err();
        assert_eq!(error.code, 406);
        assert_eq!(
            error.message,
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
        );
        // Weights decide, and a conversion is answered in JSON.
        assert_eq!(
            pb(
                "application/json;q=0.5, application/vnd.kubernetes.protobuf",
                true
            )
            .format,
            Format::Protobuf
        );
        assert_eq!(
            pb(
                "application/vnd.kubernetes.protobuf;q=0.5, application/json",
                true
            )
            .format,
            Format::Json
        );
        let metadata = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(
            pb(metadata, true),
            Negotiated {
                conversion: Conversion::PartialObjectMetadataList,
                format: Format::Protobuf,
                json_fallback: true
            }
        );
        assert_eq!(pb("*/*", true).format, Format::Json);
        assert_eq!(negotiate(None, true).unwrap().format, Format::Json);
    }

    #[test]
    fn kubernetes_parameters_and_weights() {
        let ranges = parse_accept(Some(
            "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList, \
             application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList;q=0.9,\
             application/json;q=0.5, text/html;q=0",
        ));
        assert_eq!(ranges.len(), 3);
        assert_eq!(ranges[0].essence, "application/vnd.kubernetes.protobuf");
        assert!(ranges[0].converts_to("apidiscovery.k8s.io", "v2", "APIGroupDiscoveryList"));
        assert!(!ranges[0].accepts_json());
        assert_eq!(ranges[1].version.as_deref(), Some("v2beta1"));
        assert!(ranges[1].accepts_json() && ranges[1].converts());
        assert_eq!(ranges[2].essence, "application/json");
        assert!(!ranges[2].converts());
    }

    #[test]
    fn weights_reorder_and_ties_keep_the_clients_order() {
        let ranges = parse_accept(Some("a/x;q=0.2, b/y, c/z;q=0.2, d/w"));
        let order: Vec<&str> = ranges.iter().map(|r| r.essence.as_str()).collect();
        assert_eq!(order, ["b/y", "d/w", "a/x", "c/z"]);
    }

    #[test]
    fn malformed_clauses_are_skipped_and_the_count_is_bounded() {
        assert!(parse_accept(None).is_empty());
        assert!(parse_accept(Some("")).is_empty());
        let ranges = parse_accept(Some(
            "json, /x, a/, application/json;q=abc, */*;as=\"Table\"",
        ));
        assert_eq!(ranges.len(), 1);
        assert_eq!(ranges[0].as_kind.as_deref(), Some("Table"));
        let long = vec!["application/json"; 10_000].join(",");
        assert_eq!(parse_accept(Some(&long)).len(), MAX_CLAUSES);
    }
}
