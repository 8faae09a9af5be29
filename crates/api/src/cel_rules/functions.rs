//! The names of the functions kube-apiserver 1.33's CEL environments declare: what an
//! expression may call without cel-go's checker refusing it with `undeclared reference to
//! 'foo' (in container '')` (see [`super::compile_in`]). Macros are expanded before the check
//! (the crate's and the two-variable comprehensions: `super::comprehensions`).
//!
//! ## Guarantees
//! - **Names only**: a name is declared when any overload of it is, global or member, of
//!   any arity and type (`'abc'.size()`, `int('1')`, even `'a'.int()`, which cel-go refuses
//!   with `found no matching overload`, are all declared names). So an expression is never
//!   refused here for a call kube accepts.
//! - **Every version up to 1.33, every environment**: kube's base environment
//!   (`k8s.io/apiserver/pkg/cel/environment/base.go` at v0.33.10, the staging copy of
//!   kube 1.33) gives each library a version it was introduced at (`ext.Sets` 1.29, the
//!   `ip`/`cidr` libraries 1.30, `format` 1.31, two-variable comprehensions 1.32, `semver`
//!   1.33); kube compiles a new expression in the environment of its compatibility version
//!   (by default one minor below its own: 1.32 for 1.33, which refuses a new `semver(...)`)
//!   and a stored one in the newest. The set here is the union of all of them (1.33
//!   included), and the same for CRD rules,
//!   admission policies and webhook match conditions (kube's CRD and admission environments
//!   are the same base environment with different variables).
//! - **Not declared, as in kube 1.33**: cel-go's `ext.Bindings` (`cel.bind`: in no kube
//!   version's environment, stored expressions' included; `cel.bind(x, a, b)` is `bind` on an
//!   undeclared `cel`), `ext.Math` (`math.greatest`, ...),
//!   `ext.Lists` (`lists.range`, `distinct`, `sortBy`, ...: kube 1.34's base environment adds
//!   it), `ext.Encoders` (`base64.encode`), `ext.Protos`, strings version 3's `reverse`, and
//!   `jsonpatch.escapeKey` (only in the environment of MutatingAdmissionPolicies' patches,
//!   `admission/plugin/cel/compile.go`'s `hasPatchTypes`, which this server does not
//!   evaluate).
//!
//! ## Sources (cel-go v0.23.2, the version kube 1.33's `go.mod` requires; kube v0.33.10)
//! - cel-go `common/stdlib/standard.go`: conversions, `size`, `contains`, `startsWith`,
//!   `endsWith`, `matches`, the time accessors; `cel/library.go`: the optional types
//!   library (`cel.OptionalTypes()`, all versions: `optional.of`, ..., `first`, `last`,
//!   `optional.unwrap`; macros `optMap`, `optFlatMap`).
//! - cel-go `ext/strings.go` at `StringsVersion(2)` (kube 1.29+; 0 before): `charAt` ...
//!   `upperAscii`, `format`, `strings.quote`, `join` — not version 3's `reverse`;
//!   `ext/sets.go` (`sets.contains`, `sets.equivalent`, `sets.intersects`);
//!   `ext/comprehensions.go` (macros only: `all`/`exists`/`existsOne`/`exists_one` with two
//!   variables, `transformList`, `transformMap`, `transformMapEntry`).
//! - kube `staging/src/k8s.io/apiserver/pkg/cel/library/`: `lists.go`, `regex.go`,
//!   `urls.go`, `authz.go` (with `AuthzSelectors`), `quantity.go`, `ip.go`, `cidr.go`,
//!   `format.go` (`validate`, `format.named` and one `format.<name>` per `ConstantFormats`
//!   entry), `semverlib.go`; cross-checked against `library_compatibility_test.go`'s list.
//!
//! ## Differs from kube
//! - A new expression may call 1.33's `semver` library, which kube 1.33 accepts only in
//!   stored expressions (see above).

/// Every function name kube-apiserver 1.33's CEL environments declare (see the module docs
/// for the files they come from), namespaced ones by their full name (`sets.contains`).
/// Operators (`_+_`, `@in`, ...) are not listed: only the parser writes them.
const DECLARED: &[&str] = &[
    // cel-go common/stdlib/standard.go: type conversions and `type`/`dyn`.
    "bool",
    "bytes",
    "double",
    "duration",
    "dyn",
    "int",
    "string",
    "timestamp",
    "type",
    "uint",
    // ... the size and string functions.
    "size",
    "contains",
    "endsWith",
    "startsWith",
    "matches",
    // ... the timestamp and duration accessors.
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
    // ... the operators' old names, valid identifiers a user can call.
    "_in_",
    "__not_strictly_false__",
    // cel-go cel/library.go: the optional types library.
    "optional.of",
    "optional.ofNonZeroValue",
    "optional.none",
    "optional.unwrap",
    "value",
    "hasValue",
    "or",
    "orValue",
    "first",
    "last",
    "unwrapOpt",
    // cel-go ext/strings.go, versions 0 to 2.
    "charAt",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "replace",
    "split",
    "substring",
    "trim",
    "upperAscii",
    "format",
    "strings.quote",
    "join",
    // cel-go ext/sets.go.
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    // kube library/lists.go (`indexOf`, `lastIndexOf` above).
    "isSorted",
    "sum",
    "max",
    "min",
    // kube library/regex.go.
    "find",
    "findAll",
    // kube library/urls.go.
    "url",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    "isURL",
    // kube library/authz.go, Authz and AuthzSelectors.
    "path",
    "group",
    "serviceAccount",
    "resource",
    "subresource",
    "namespace",
    "name",
    "check",
    "errored",
    "error",
    "allowed",
    "reason",
    "fieldSelector",
    "labelSelector",
    // kube library/quantity.go (`isGreaterThan`, `isLessThan`, `compareTo` also semver's).
    "quantity",
    "isQuantity",
    "sign",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    "asApproximateFloat",
    "asInteger",
    "isInteger",
    "add",
    "sub",
    // kube library/ip.go (`string` above).
    "ip",
    "family",
    "ip.isCanonical",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "isIP",
    // kube library/cidr.go (`ip`, `string` above).
    "cidr",
    "containsIP",
    "containsCIDR",
    "prefixLength",
    "masked",
    "isCIDR",
    // kube library/format.go.
    "validate",
    "format.named",
    "format.dns1123Label",
    "format.dns1123Subdomain",
    "format.dns1035Label",
    "format.qualifiedName",
    "format.dns1123LabelPrefix",
    "format.dns1123SubdomainPrefix",
    "format.dns1035LabelPrefix",
    "format.labelValue",
    "format.uri",
    "format.uuid",
    "format.byte",
    "format.date",
    "format.datetime",
    // kube library/semverlib.go.
    "semver",
    "isSemver",
    "major",
    "minor",
    "patch",
];

/// Whether `name` (a leading `.`, the root container, ignored as cel-go ignores it) is a
/// function kube declares.
pub(super) fn declared(name: &str) -> bool {
    DECLARED.contains(&name.strip_prefix('.').unwrap_or(name))
}

/// Whether `name` is an operator the parser wrote (`_+_`, `@in`, `_[?_]`): a name no
/// identifier spells, so no expression can call it.
pub(super) fn operator(name: &str) -> bool {
    !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_declared_once_and_operators_always() {
        let mut sorted = DECLARED.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), DECLARED.len(), "a name is listed twice");
        for name in [
            "size",
            ".size",
            "sets.contains",
            "_in_",
            "format.dns1123Label",
        ] {
            assert!(declared(name) && !operator(name), "{name}");
        }
        for name in [
            "_+_",
            "@in",
            "_[?_]",
            "!_",
            "-_",
            "_?._",
            "@not_strictly_false",
        ] {
            assert!(operator(name), "{name}");
        }
        for name in [
            "foo",
            "startWith",
            "math.greatest",
            "base64.encode",
            "reverse",
        ] {
            assert!(!declared(name) && !operator(name), "{name}");
        }
    }
}
