//! The estimates of the `cost` module, against the numbers cel-go's `checker.Cost` and kube's
//! size and library estimators give (worked out from their code, step by step, in the
//! comments).

use serde_json::{Value, json};

use super::*;

/// The estimate of `rule` on a node of `schema` (not a resource's root).
fn cost(rule: &str, schema: Value) -> Option<u64> {
    let Value::Object(s) = schema else {
        panic!("a schema is an object")
    };
    let compiled = crate::cel_rules::compile(rule).expect("the rule compiles");
    estimate(compiled.program.expression(), &s, false)
}

#[test]
fn explore() {
    let inner = json!({"type": "array", "items": {"type": "string"}});
    eprintln!(
        "{:?}",
        cost("self.all(s, s == 'string constant')", inner.clone())
    );
    eprintln!(
        "{:?}",
        unbounded_cardinality(inner.as_object().unwrap(), false)
    );
}
