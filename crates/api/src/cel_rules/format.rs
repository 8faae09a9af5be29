//! kube's CEL format library (`k8s.io/apiserver/pkg/cel/library/format.go`, in the base
//! environment since 1.31): named string formats that say what is wrong with a string.
//!
//! ## Guarantees
//! - `format.named(name)` is `optional.of(<format>)` for each of kube 1.33's names
//!   (`dns1123Label`, `dns1123Subdomain`, `dns1035Label`, `qualifiedName`,
//!   `dns1123LabelPrefix`, `dns1123SubdomainPrefix`, `dns1035LabelPrefix`, `labelValue`, `uri`,
//!   `uuid`, `byte`, `date`, `datetime`), else `optional.none()`; `format.<name>()` is the
//!   format itself.
//! - `<format>.validate(s)` is `optional.none()` when `s` is valid, else `optional.of` the list
//!   of kube's messages, in kube's order: apimachinery's `IsDNS1123Label`,
//!   `IsDNS1123Subdomain`, `IsDNS1035Label` (each its length message, then its pattern's;
//!   the `Prefix` forms on the name with a trailing `-` masked as kube masks it),
//!   `IsQualifiedName` (prefix part, then name part), `IsValidLabelValue`; Go's
//!   `ParseRequestURI` error for `uri`; kube-openapi's `uuid`, `byte`, `date` and `datetime`
//!   checks with kube's one message each.
//! - Every function costs a tenth per byte of its operands in the expression's bound.

use cel::common::types::{CelList, CelOptional, CelString, STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::library::{one, opaque_val, string, two};

const FORMAT: Type = Type::new_unspecified_type("kubernetes.NamedFormat");
static FORMAT_TYPE: Type = FORMAT;

/// kube 1.33's named formats (`ConstantFormats`), in kube's spelling.
const NAMES: [&str; 13] = [
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

/// A named format: its index in [`NAMES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Format(usize);

opaque_val!(Format, &FORMAT_TYPE, equal: |a: &Format, b: &Format| a == b);

/// Registers the library on `env`.
pub(super) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("format.named", "format-named", vec![STRING_TYPE], named)?;
    env.add_member_overload(
        "validate",
        "format-validate",
        FORMAT,
        vec![STRING_TYPE],
        validate,
    )?;
    macro_rules! constant {
        ($($index:literal),*) => {
            $(
                env.add_overload(
                    &format!("format.{}", NAMES[$index]),
                    &format!("format.{}", NAMES[$index]),
                    vec![],
                    |_| Ok(CowVal::owned(Format($index))),
                )?;
            )*
        };
    }
    constant!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);
    Ok(())
}

fn named<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let name = one(args)?;
    let name = string(name.as_ref(), "format.named")?;
    Ok(CowVal::owned(
        match NAMES.iter().position(|known| *known == name) {
            Some(index) => CelOptional::of(Box::new(Format(index))),
            None => CelOptional::none(),
        },
    ))
}

fn validate<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [format, text] = two(args)?;
    let format = *format
        .downcast_ref::<Format>()
        .ok_or_else(|| ExecutionError::function_error("validate", "no such overload"))?;
    let problems = problems(NAMES[format.0], string(text.as_ref(), "validate")?);
    if problems.is_empty() {
        return Ok(CowVal::owned(CelOptional::none()));
    }
    let list: Vec<Box<dyn Val + 'v>> = problems
        .into_iter()
        .map(|p| Box::new(CelString::from(p)) as Box<dyn Val + 'v>)
        .collect();
    Ok(CowVal::owned(CelOptional::of(Box::new(CelList::from(
        list,
    )))))
}

/// kube's `maskTrailingDash`: a name ending in `-` (and longer than one byte) has its last two
/// bytes replaced by `a`, so that a prefix may end in `-`.
fn mask_trailing_dash(name: &str) -> String {
    if name.len() > 1 && name.ends_with('-') {
        let cut = name.len() - 2;
        // A cut inside a character keeps the character out, as Go's byte slice would break it.
        let head = name
            .get(..cut)
            .unwrap_or_else(|| name.get(..cut - 1).unwrap_or(""));
        format!("{head}a")
    } else {
        name.to_owned()
    }
}

/// What is wrong with `s` in the format `name`, as kube's `ValidateFunc` says it.
fn problems(name: &str, s: &str) -> Vec<String> {
    let (base, prefix) = match name.strip_suffix("Prefix") {
        Some(base) => (base, true),
        None => (name, false),
    };
    let masked = if prefix {
        mask_trailing_dash(s)
    } else {
        s.to_owned()
    };
    let s_masked = masked.as_str();
    let one = |valid: bool, message: &str| {
        if valid {
            Vec::new()
        } else {
            vec![message.to_owned()]
        }
    };
    match base {
        "dns1123Label" => crate::names::dns1123_label_problems(s_masked),
        "dns1123Subdomain" => crate::names::dns1123_subdomain_problems(s_masked),
        "dns1035Label" => crate::names::dns1035_label_problems(s_masked),
        "qualifiedName" => crate::names::qualified_name_problems(s),
        "labelValue" => crate::names::label_value_problems(s),
        "uri" => crate::go_url::parse_request_uri(s)
            .err()
            .into_iter()
            .collect(),
        "uuid" => one(
            crate::strfmt::check("uuid", s) == Some(true),
            "does not match the UUID format",
        ),
        "byte" => one(
            crate::strfmt::check("byte", s) == Some(true),
            "invalid base64",
        ),
        "date" => one(
            crate::strfmt::check("date", s) == Some(true),
            "invalid date",
        ),
        "datetime" => one(
            crate::strfmt::check("datetime", s) == Some(true),
            "invalid datetime",
        ),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::{mask_trailing_dash, problems};

    #[test]
    fn formats_say_what_kube_says() {
        assert!(problems("dns1123Label", "my-name").is_empty());
        assert_eq!(
            problems("dns1123Label", &"A".repeat(64)),
            [
                "must be no more than 63 characters".to_owned(),
                crate::names::DNS1123_LABEL_MESSAGE.to_owned()
            ]
        );
        assert_eq!(problems("dns1123Label", "a.b"), ["must not contain dots"]);
        assert!(problems("dns1123LabelPrefix", "my-label-prefix-").is_empty());
        assert!(!problems("dns1123Label", "my-label-prefix-").is_empty());
        assert!(problems("dns1123SubdomainPrefix", "mysubdomain.prefix.-").is_empty());
        assert!(problems("dns1035Label", "1abc").len() == 1);
        assert!(problems("qualifiedName", "apiextensions.k8s.io/v1beta1").is_empty());
        assert_eq!(
            problems("qualifiedName", "/x"),
            ["prefix part must be non-empty"]
        );
        assert_eq!(
            problems("qualifiedName", "a/"),
            [
                "name part must be non-empty".to_owned(),
                crate::names::QUALIFIED_NAME_PART_MESSAGE.to_owned()
            ]
        );
        assert_eq!(
            problems("qualifiedName", "a/b/c"),
            [crate::names::QUALIFIED_NAME_MESSAGE]
        );
        assert!(problems("labelValue", "").is_empty());
        assert_eq!(
            problems("uri", "../x"),
            ["parse \"../x\": invalid URI for request"]
        );
        assert!(problems("uuid", "123e4567-e89b-12d3-a456-426614174000").is_empty());
        assert_eq!(problems("uuid", "x"), ["does not match the UUID format"]);
        assert!(problems("byte", "aGVsbG8=").is_empty());
        assert_eq!(problems("byte", "%%"), ["invalid base64"]);
        assert!(problems("date", "2021-01-01").is_empty());
        assert_eq!(problems("date", "2021-13-01"), ["invalid date"]);
        assert!(problems("datetime", "2021-01-01T00:00:00Z").is_empty());
        assert_eq!(problems("datetime", "yesterday"), ["invalid datetime"]);
        assert_eq!(mask_trailing_dash("ab-"), "aa");
        assert_eq!(mask_trailing_dash("-"), "-");
    }
}
