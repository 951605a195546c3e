//! The parsed filter: what the evaluator walks and what a store
//! translates to its query language.

use super::field::Field;
use super::like::LikePattern;
use std::fmt;

/// One RQL filter. `Display` writes it as canonical RQL (no white space,
/// double-quoted strings), which parses back to an equal filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// `and(q1,q2,…)`: at least one operand.
    And(Vec<Filter>),
    /// `or(q1,q2,…)`: at least one operand.
    Or(Vec<Filter>),
    /// `not(q)`.
    Not(Box<Filter>),
    /// `eq ne gt ge lt le (field,value)`.
    Compare { op: CompareOp, field: Field, value: Value },
    /// `in(field,v1,v2,…)`: at least one value.
    In { field: Field, values: Vec<Value> },
    /// `like(field,"pattern")`, or `ilike` when `pattern.ignores_case()`.
    Like { field: Field, pattern: LikePattern },
    /// `exists(field)`.
    Exists(Field),
    /// `empty(field)`: absent, `null`, `""`, `[]` or `{}`.
    Empty(Field),
}

/// The single-value comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompareOp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl CompareOp {
    pub fn name(self) -> &'static str {
        match self {
            CompareOp::Eq => "eq",
            CompareOp::Ne => "ne",
            CompareOp::Gt => "gt",
            CompareOp::Ge => "ge",
            CompareOp::Lt => "lt",
            CompareOp::Le => "le",
        }
    }
}

/// A literal on the right of a comparison.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// Ditto's `LongLiteral`: a Java `long`.
    Int(i64),
    /// Ditto's `DoubleLiteral`: digits with a fraction, no exponent;
    /// always finite here.
    Float(f64),
    String(String),
    /// `time:now` and friends, resolved at evaluation time.
    Placeholder(Placeholder),
}

/// A placeholder value as written: `prefix:name`. Ditto's parser knows the
/// prefix `time` only, and keeps the name as written (escapes included).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Placeholder {
    pub prefix: String,
    pub name: String,
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Filter::And(children) | Filter::Or(children) => {
                f.write_str(if matches!(self, Filter::And(_)) { "and(" } else { "or(" })?;
                for (i, child) in children.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{child}")?;
                }
                f.write_str(")")
            }
            Filter::Not(child) => write!(f, "not({child})"),
            Filter::Compare { op, field, value } => write!(f, "{}({field},{value})", op.name()),
            Filter::In { field, values } => {
                write!(f, "in({field}")?;
                for value in values {
                    write!(f, ",{value}")?;
                }
                f.write_str(")")
            }
            Filter::Like { field, pattern } => {
                let name = if pattern.ignores_case() { "ilike" } else { "like" };
                write!(f, "{name}({field},")?;
                write_string(f, pattern.as_str())?;
                f.write_str(")")
            }
            Filter::Exists(field) => write!(f, "exists({field})"),
            Filter::Empty(field) => write!(f, "empty({field})"),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => {
                // Rust writes the shortest text that reads back as the same
                // double, never with an exponent (which RQL lacks); RQL
                // needs a fraction to read it as a double at all.
                let text = x.to_string();
                f.write_str(&text)?;
                if !text.contains('.') {
                    f.write_str(".0")?;
                }
                Ok(())
            }
            Value::String(s) => write_string(f, s),
            Value::Placeholder(p) => {
                // The name was kept as written, so it is written back raw.
                write!(f, "{}:", p.prefix)?;
                f.write_str(&p.name)
            }
        }
    }
}

/// A double-quoted RQL string: only `"` and `\` need escaping.
fn write_string(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("\"")?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            c => fmt::Write::write_char(f, c)?,
        }
    }
    f.write_str("\"")
}
