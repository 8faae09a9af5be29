//! JSON pointers (RFC 6901) read without allocating: [`Pointer::at`].
//!
//! ## Guarantees
//! - `value.at(pointer)` is exactly `value.pointer(pointer)` (serde_json's) for every value
//!   and pointer: the empty pointer is the whole value, a pointer not starting with `/` is
//!   `None`, `~1` in a token is `/` and `~0` is `~`, an array index has no sign and no leading
//!   zero (tested against serde_json below, escapes and indices included).
//! - A token without `~` is looked up as it stands, with no allocation; serde_json builds two
//!   `String`s per token (its two `replace`s), which made its `pointer` cost ~3,300
//!   instructions for `/metadata/managedFields` with the benchmark's counting allocator, seven
//!   times per PATCH. Only a token with an escape is unescaped into a new string here.
//! - A token's end and whether it has an escape are found in one pass over its bytes.

use serde_json::Value;

/// [`Value::pointer`] without its per-token allocations; see the module docs.
pub trait Pointer {
    /// The value `pointer` names, as [`Value::pointer`] finds it.
    fn at(&self, pointer: &str) -> Option<&Value>;
}

impl Pointer for Value {
    fn at(&self, pointer: &str) -> Option<&Value> {
        if pointer.is_empty() {
            return Some(self);
        }
        let mut rest = pointer.strip_prefix('/')?;
        let mut target = self;
        loop {
            // One pass over a token's bytes finds both its end and whether it has an escape
            // (a `split` and a `contains` were two searches a token, each set up per call).
            let bytes = rest.as_bytes();
            let mut end = 0;
            let mut escaped = false;
            while let Some(&byte) = bytes.get(end)
                && byte != b'/'
            {
                escaped |= byte == b'~';
                end += 1;
            }
            let token = &rest[..end];
            target = if escaped {
                step(target, &token.replace("~1", "/").replace("~0", "~"))?
            } else {
                step(target, token)?
            };
            if end == bytes.len() {
                return Some(target);
            }
            // `/` is one byte: the next token starts right after it.
            rest = &rest[end + 1..];
        }
    }
}

fn step<'v>(target: &'v Value, token: &str) -> Option<&'v Value> {
    match target {
        Value::Object(map) => map.get(token),
        Value::Array(list) => index(token).and_then(|i| list.get(i)),
        _ => None,
    }
}

/// An array index as RFC 6901 writes it (serde_json's `parse_index`).
fn index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn document() -> Value {
        json!({
            "metadata": {"name": "n", "managedFields": [{"manager": "m"}, {"manager": "k"}]},
            "a/b": {"c~d": 1, "": {"": 2}},
            "~1": "tilde one",
            "list": [0, [1, 2], {"x": null}],
            "10": "ten",
        })
    }

    #[test]
    fn agrees_with_serde_json_on_chosen_pointers() {
        let doc = document();
        for pointer in [
            "",
            "/",
            "//",
            "metadata",
            "/metadata",
            "/metadata/name",
            "/metadata/name/",
            "/metadata/managedFields/1/manager",
            "/metadata/managedFields/01/manager",
            "/metadata/managedFields/+1/manager",
            "/metadata/managedFields/-1",
            "/metadata/managedFields/2",
            "/a~1b/c~0d",
            "/a~1b//",
            "/a/b",
            "/~01",
            "/~1",
            "/list/1/0",
            "/list/2/x",
            "/list/2/x/y",
            "/list/18446744073709551616",
            "/10",
            "/missing/x",
        ] {
            assert_eq!(doc.at(pointer), doc.pointer(pointer), "{pointer:?}");
        }
        assert_eq!(doc.at("/metadata/name"), Some(&json!("n")));
        assert_eq!(doc.at("/a~1b/c~0d"), Some(&json!(1)));
        assert_eq!(doc.at("/metadata/managedFields/01/manager"), None);
    }

    proptest! {
        #[test]
        fn agrees_with_serde_json_on_any_pointer(
            tokens in proptest::collection::vec("[a-z0-9~/+]{0,4}|0|1|2|metadata|list|a/b|c~d", 0..5),
            slash in any::<bool>(),
        ) {
            let doc = document();
            let mut pointer = tokens.join("/");
            if slash {
                pointer.insert(0, '/');
            }
            prop_assert_eq!(doc.at(&pointer), doc.pointer(&pointer));
        }
    }
}
