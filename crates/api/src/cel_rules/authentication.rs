//! kube's authentication CEL (`k8s.io/apiserver/pkg/authentication/cel`): the expressions of
//! a JWT authenticator over `claims` (claim validation rules and claim mappings) or `user`
//! (user validation rules).
//!
//! ## Guarantees
//! - An expression compiles in the server's CEL environment (kube's libraries, see
//!   [`crate::cel_rules`]) with exactly one variable declared, `claims` or `user` (another
//!   identifier is cel-go's `undeclared reference to 'x' (in container '')`), and is compiled
//!   once, when the configuration is read.
//! - An evaluation is bounded as an admission policy's: its cost bound is computed before it
//!   runs, above kube's per-call limit it fails without running (`operation cancelled: actual
//!   cost limit exceeded`), and it runs on the large stack, a panic of the CEL library being an
//!   evaluation error.
//! - The value is given as [`Outcome`]: a bool, a string, a list of strings, null, or the name
//!   of another type (for the caller's kube-worded type error).

use std::sync::Arc;

use cel::common::ast::Expr;
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use serde_json::Value;

use super::{
    Compiled, Declared, Failure, Metered, PER_CALL_LIMIT, Sizes, children, compile_in, measured,
    run, to_val,
};

/// The variable an expression reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variable {
    /// `claims`: the token's verified claims.
    Claims,
    /// `user`: the mapped user (`username`, `uid`, `groups`, `extra`).
    User,
}

impl Variable {
    fn name(self) -> &'static str {
        match self {
            Variable::Claims => "claims",
            Variable::User => "user",
        }
    }
}

/// A compiled expression.
#[derive(Clone)]
pub struct Expression {
    compiled: Arc<Compiled>,
    variable: Variable,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expression")
            .field("variable", &self.variable)
            .finish_non_exhaustive()
    }
}

/// An expression's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A bool.
    Bool(bool),
    /// A string.
    String(String),
    /// A list whose items are all strings.
    Strings(Vec<String>),
    /// Null.
    Null,
    /// Anything else: cel-go's name of its type.
    Other(&'static str),
}

/// Compiles `text` over `variable`.
///
/// # Errors
/// CEL's message (`ERROR: <input>:1:6: Syntax error: ...`).
pub fn compile(text: &str, variable: Variable) -> Result<Expression, String> {
    let declared = match variable {
        Variable::Claims => Declared::Claims,
        Variable::User => Declared::User,
    };
    Ok(Expression {
        compiled: compile_in(text, declared)?,
        variable,
    })
}

struct One<'a> {
    name: &'static str,
    value: &'a dyn Val,
}

impl VariableResolver for One<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        (variable == self.name).then_some(CowVal::Borrowed(self.value))
    }
}

fn type_name(value: &cel::Value) -> &'static str {
    match value {
        cel::Value::List(_) => "list",
        cel::Value::Map(_) => "map",
        cel::Value::Int(_) => "int",
        cel::Value::UInt(_) => "uint",
        cel::Value::Float(_) => "double",
        cel::Value::String(_) => "string",
        cel::Value::Bytes(_) => "bytes",
        cel::Value::Bool(_) => "bool",
        cel::Value::Null => "null_type",
        _ => "object",
    }
}

impl Expression {
    /// Whether the expression selects `field` of its variable (`claims.email`, also in
    /// `has(claims.email)`), as kube's `hasSelectExp` looks for it.
    #[must_use]
    pub fn selects(&self, field: &str) -> bool {
        let operand = self.variable.name();
        let mut pending = vec![self.compiled.program.expression()];
        while let Some(expr) = pending.pop() {
            if let Expr::Select(select) = &expr.expr
                && select.field == field
                && matches!(&select.operand.expr, Expr::Ident(n) if n == operand)
            {
                return true;
            }
            pending.extend(children(expr));
        }
        false
    }

    /// The value of the expression with its variable bound to `value`.
    ///
    /// # Errors
    /// The evaluation's error (kube's words where it has them).
    pub fn evaluate(&self, value: &Value) -> Result<Outcome, String> {
        let converted = to_val(None, value, false);
        let roots = [(self.variable.name(), value)];
        let metered = Metered {
            data: measured(value),
            roots: &roots,
            resolver: &One {
                name: self.variable.name(),
                value: converted.as_ref(),
            },
        };
        let mut budget = PER_CALL_LIMIT;
        let value =
            run(&self.compiled, &metered, &mut budget, &mut Sizes::new()).map_err(|failure| {
                match failure {
                    Failure::Skip => "no such function".to_owned(),
                    Failure::Error(message) => {
                        message.unwrap_or_else(|| "no such overload".to_owned())
                    }
                    _ => "operation cancelled: actual cost limit exceeded".to_owned(),
                }
            })?;
        Ok(match &value {
            cel::Value::Bool(b) => Outcome::Bool(*b),
            cel::Value::String(s) => Outcome::String(s.to_string()),
            cel::Value::Null => Outcome::Null,
            cel::Value::List(items) => {
                let strings: Option<Vec<String>> = items
                    .iter()
                    .map(|item| match item {
                        cel::Value::String(s) => Some(s.to_string()),
                        _ => None,
                    })
                    .collect();
                strings.map_or(Outcome::Other("list"), Outcome::Strings)
            }
            other => Outcome::Other(type_name(other)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claims_expressions_map_and_validate() {
        let claims = json!({"sub": "alice", "groups": ["a", "b"], "email_verified": true,
            "email": "a@x"});
        let username = compile("'oidc:' + claims.sub", Variable::Claims).unwrap();
        assert_eq!(
            username.evaluate(&claims).unwrap(),
            Outcome::String("oidc:alice".to_owned())
        );
        let groups = compile("claims.groups.map(g, 'g:' + g)", Variable::Claims).unwrap();
        assert_eq!(
            groups.evaluate(&claims).unwrap(),
            Outcome::Strings(vec!["g:a".to_owned(), "g:b".to_owned()])
        );
        let rule = compile("claims.email_verified == true", Variable::Claims).unwrap();
        assert!(rule.selects("email_verified"));
        assert!(!rule.selects("email"));
        assert_eq!(rule.evaluate(&claims).unwrap(), Outcome::Bool(true));
        let missing = compile("claims.nope == 'x'", Variable::Claims).unwrap();
        assert!(missing.evaluate(&claims).is_err());
        let user = compile("!user.username.startsWith('system:')", Variable::User).unwrap();
        assert_eq!(
            user.evaluate(&json!({"username": "system:x"})).unwrap(),
            Outcome::Bool(false)
        );
        let error = compile("user.username", Variable::Claims).unwrap_err();
        assert!(error.contains("undeclared reference to 'user'"), "{error}");
    }
}
