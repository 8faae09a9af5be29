//! JSON pointers' tokens (RFC 6901), and where a JSON patch's text wrote a number.
//!
//! A leaf below both the patch and the schema walks: [`parse_pointer`] splits a JSON patch
//! operation's `path` or `from` into unescaped tokens with kube's (evanphx/json-patch's)
//! refusals, and [`json_patch_literal`] finds the literal a JSON patch sent for a number the
//! schema's decode check refuses, so the refusal quotes it as Go's decoder would.

use serde_json::Value;

/// Splits an RFC 6901 pointer into unescaped tokens.
pub(crate) fn parse_pointer(pointer: &str) -> Result<Vec<String>, String> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!(
            "JSON pointer {pointer:?} must be empty or start with '/'"
        ));
    };
    rest.split('/')
        .map(|token| {
            let mut out = String::with_capacity(token.len());
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => {
                            return Err(format!(
                                "JSON pointer {pointer:?} has an invalid escape: '~' must be followed by 0 or 1"
                            ));
                        }
                    }
                } else {
                    out.push(c);
                }
            }
            Ok(out)
        })
        .collect()
}

/// The literal a JSON patch's text `patch` sent for the number `number` at `path` of the
/// patched object: kube applies a JSON patch to the object's bytes keeping each operation's
/// value as sent (evanphx/json-patch's `lazyNode`), then decodes the result, so Go's decoder
/// judges and quotes a number placed by the patch by its literal (`number 1.50`, `-0.0`).
/// Found under the last `add` or `replace` whose path leads to `path`, and taken only if it
/// reads as `number` (a value a later `move` or `copy` carried elsewhere is not found: `None`,
/// as for a number the patch did not send). For errors only: the patch is read again.
pub(crate) fn json_patch_literal<'t>(
    patch: &'t [u8],
    path: &[crate::go_json::PathStep<'_>],
    number: f64,
) -> Option<&'t str> {
    use crate::go_json::PathStep;
    let operations: Value = serde_json::from_slice(patch).ok()?;
    let (index, tokens) =
        operations
            .as_array()?
            .iter()
            .enumerate()
            .rev()
            .find_map(|(index, operation)| {
                if !matches!(operation.get("op")?.as_str()?, "add" | "replace") {
                    return None;
                }
                let tokens = parse_pointer(operation.get("path")?.as_str()?).ok()?;
                let leads = tokens.len() <= path.len()
                    && tokens.iter().zip(path).all(|(token, step)| match step {
                        PathStep::Key(key) => token.as_str() == *key,
                        PathStep::Index(at) => token == "-" || token.parse::<usize>() == Ok(*at),
                    });
                leads.then_some((index, tokens))
            })?;
    let mut within = vec![PathStep::Index(index), PathStep::Key("value")];
    within.extend_from_slice(&path[tokens.len()..]);
    let literal = crate::go_json::literal_at(patch, &within)?;
    (literal.parse::<f64>().ok()? == number).then_some(literal)
}
