//! Evaluating a condition against a message.
//!
//! # Semantics
//!
//! A value is one of: *undefined*, null, a boolean, a number (f64), a
//! string, or a JSON object or array (only from `$body`). A route matches
//! when its condition is exactly `true`; false, undefined and any other
//! value do not match.
//!
//! - `$topic` is the topic name; `$topic[i]` its level `i`, counted **from
//!   0** (`$topic[0]` of `a/b/c` is `a`), undefined past the last level. An
//!   empty level (`a//b`) is the empty string.
//! - `$user.<name>` is the first user property with that name (names are
//!   case-sensitive), undefined when there is none. `$contentType` and
//!   `$username` are undefined when the message or client has none;
//!   `$clientId` is a string, `$qos` the number 0, 1 or 2.
//! - `$body` is the payload parsed as JSON, `$body.a.b` and `$body.list[0]`
//!   walk into it; a missing key, an index out of range, a step into a
//!   value of the wrong kind, a payload that is not JSON or is larger than
//!   `MAX_BODY_BYTES` all make the reference undefined, never an error.
//!
//! Logic is three-valued, as in edgeHub (and SQL, with undefined for
//! unknown):
//!
//! - A comparison with an undefined operand is undefined, and so is `NOT`
//!   of undefined: when `$body.x` is missing, neither `$body.x = 1` nor
//!   `NOT ($body.x = 1)` matches. Ask `IS_DEFINED($body.x)` to tell.
//! - `a AND b` is false if either is false, true if both are true, else
//!   undefined; `a OR b` is true if either is true, false if both are
//!   false, else undefined. A value that is not a boolean counts as
//!   undefined there.
//! - `=` and `!=` compare two defined values of the same type (strings
//!   ordinally and case-sensitively, objects and arrays structurally);
//!   values of different types are never equal: there is no coercion, so
//!   `$body.n = '5'` is false for `{"n": 5}`, and `!=` true.
//! - `< <= > >=` order two numbers, or two strings by code point; any
//!   other pair is false.
//! - Functions return undefined when an argument is undefined or of the
//!   wrong type, except `IS_DEFINED`, which is true or false.
//!   `STARTS_WITH`, `ENDS_WITH`, `CONTAINS` take two strings; `LOWER`,
//!   `UPPER` a string (Unicode case mapping); `LENGTH` a string (counting
//!   characters, not bytes) or an array (counting elements).
//!
//! # Cost
//!
//! Nothing is allocated unless a condition reads `$body` (the parsed JSON,
//! once per message, see `Body`) or calls `LOWER`/`UPPER` (the new string).
//! Strings from the message, the payload and the route are borrowed.

use std::borrow::Cow;

use crate::body::Body;
use crate::condition::{CompareOp, Condition, Expr, Function, Reference, Step};
use crate::message::MessageView;

#[derive(Debug, Clone, PartialEq)]
enum Value<'a> {
    Undefined,
    Null,
    Bool(bool),
    Number(f64),
    Str(Cow<'a, str>),
    /// A JSON object or array.
    Composite(&'a serde_json::Value),
}

impl Condition {
    /// Whether `message` satisfies the condition. Parses the payload if a
    /// `$body` reference is reached; with several routes to check, use
    /// `matches_with_body` to parse it only once.
    pub fn matches<M: MessageView + ?Sized>(&self, message: &M) -> bool {
        self.matches_with_body(message, &Body::new(message.payload()))
    }

    /// `matches`, reading `$body` from `body`, which must be
    /// `Body::new(message.payload())`, shared by all the routes checked
    /// against one message.
    pub fn matches_with_body<M: MessageView + ?Sized>(&self, message: &M, body: &Body<'_>) -> bool {
        let context = Context { message, body };
        context.eval(&self.0) == Value::Bool(true)
    }
}

struct Context<'a, M: ?Sized> {
    message: &'a M,
    body: &'a Body<'a>,
}

impl<'a, M: MessageView + ?Sized> Context<'a, M> {
    fn eval(&self, expr: &'a Expr) -> Value<'a> {
        match expr {
            Expr::Null => Value::Null,
            Expr::Bool(b) => Value::Bool(*b),
            Expr::Number(n) => Value::Number(*n),
            Expr::Str(s) => Value::Str(Cow::Borrowed(s)),
            Expr::Ref(reference) => self.resolve(reference),
            Expr::Not(e) => match self.eval(e) {
                Value::Bool(b) => Value::Bool(!b),
                _ => Value::Undefined,
            },
            Expr::And(items) => self.connective(items, false),
            Expr::Or(items) => self.connective(items, true),
            Expr::Compare(op, pair) => compare(*op, &self.eval(&pair.0), &self.eval(&pair.1)),
            Expr::Call(function, args) => self.call(*function, args),
        }
    }

    /// AND (`decisive` false) and OR (`decisive` true): one operand equal
    /// to `decisive` decides, and the rest is not evaluated; otherwise the
    /// result is the other boolean if every operand was one, else undefined.
    fn connective(&self, items: &'a [Expr], decisive: bool) -> Value<'a> {
        let mut all_booleans = true;
        for item in items {
            match self.eval(item) {
                Value::Bool(b) if b == decisive => return Value::Bool(decisive),
                Value::Bool(_) => {}
                _ => all_booleans = false,
            }
        }
        if all_booleans {
            Value::Bool(!decisive)
        } else {
            Value::Undefined
        }
    }

    fn resolve(&self, reference: &'a Reference) -> Value<'a> {
        let message = self.message;
        let string =
            |s: Option<&'a str>| s.map_or(Value::Undefined, |s| Value::Str(Cow::Borrowed(s)));
        match reference {
            Reference::Topic => string(Some(message.topic())),
            Reference::TopicLevel(i) => string(message.topic().split('/').nth(*i)),
            Reference::User(name) => string(message.user_property(name)),
            Reference::ContentType => string(message.content_type()),
            Reference::Qos => Value::Number(f64::from(message.qos())),
            Reference::ClientId => string(Some(message.client_id())),
            Reference::Username => string(message.username()),
            Reference::Body(steps) => {
                let found = self.body.json().and_then(|json| {
                    steps.iter().try_fold(json, |json, step| match step {
                        Step::Key(key) => json.as_object()?.get(&**key),
                        Step::Index(i) => json.as_array()?.get(*i),
                    })
                });
                found.map_or(Value::Undefined, from_json)
            }
        }
    }

    fn call(&self, function: Function, args: &'a [Expr]) -> Value<'a> {
        let arg = |i: usize| self.eval(&args[i]);
        match function {
            Function::IsDefined => Value::Bool(arg(0) != Value::Undefined),
            Function::StartsWith => test(arg(0), arg(1), |s, prefix| s.starts_with(prefix)),
            Function::EndsWith => test(arg(0), arg(1), |s, suffix| s.ends_with(suffix)),
            Function::Contains => test(arg(0), arg(1), |s, part| s.contains(part)),
            Function::Lower => map(arg(0), str::to_lowercase),
            Function::Upper => map(arg(0), str::to_uppercase),
            Function::Length => match arg(0) {
                Value::Str(s) => Value::Number(s.chars().count() as f64),
                Value::Composite(serde_json::Value::Array(items)) => {
                    Value::Number(items.len() as f64)
                }
                _ => Value::Undefined,
            },
        }
    }
}

fn test<'a>(a: Value<'a>, b: Value<'a>, test: fn(&str, &str) -> bool) -> Value<'a> {
    match (a, b) {
        (Value::Str(a), Value::Str(b)) => Value::Bool(test(&a, &b)),
        _ => Value::Undefined,
    }
}

fn map<'a>(value: Value<'a>, map: fn(&str) -> String) -> Value<'a> {
    match value {
        Value::Str(s) => Value::Str(Cow::Owned(map(&s))),
        _ => Value::Undefined,
    }
}

fn from_json(json: &serde_json::Value) -> Value<'_> {
    match json {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        // Every JSON number is an f64 (perhaps rounded): serde_json is built
        // without arbitrary precision.
        serde_json::Value::Number(n) => n.as_f64().map_or(Value::Undefined, Value::Number),
        serde_json::Value::String(s) => Value::Str(Cow::Borrowed(s)),
        composite => Value::Composite(composite),
    }
}

fn compare<'a>(op: CompareOp, left: &Value<'a>, right: &Value<'a>) -> Value<'a> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    if *left == Value::Undefined || *right == Value::Undefined {
        return Value::Undefined;
    }
    let order = match (left, right) {
        (Value::Number(a), Value::Number(b)) => a.partial_cmp(b),
        (Value::Str(a), Value::Str(b)) => Some(a.cmp(b)),
        _ => None,
    };
    // Values of different types are unequal; derived equality says just
    // that, since each variant holds one type.
    Value::Bool(match op {
        CompareOp::Eq => left == right,
        CompareOp::Ne => left != right,
        CompareOp::Lt => order == Some(Less),
        CompareOp::Le => matches!(order, Some(Less | Equal)),
        CompareOp::Gt => order == Some(Greater),
        CompareOp::Ge => matches!(order, Some(Greater | Equal)),
    })
}
