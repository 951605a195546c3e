//! RQL, Ditto's query language: search's `filter=` and `option=`,
//! `condition=` on every request, and event filters. One parser and one
//! evaluator serve all three; what differs between them is which errors
//! answer ([`RqlError::to_ditto_error`], [`RqlError::to_condition_error`])
//! and which of Ditto's evaluators to agree with ([`Semantics`]).
//!
//! ```
//! use ferry_twins::rql::{Filter, NoPlaceholders, Scope, Semantics};
//! let filter = Filter::parse(r#"and(eq(attributes/owner,"SID123"),gt(features/t/properties/c,20))"#, Scope::THINGS).unwrap();
//! let thing = serde_json::json!({
//!     "thingId": "org.example:lamp-1",
//!     "attributes": {"owner": "SID123"},
//!     "features": {"t": {"properties": {"c": 21.5}}}
//! });
//! assert!(filter.matches(&thing, Semantics::Things, &NoPlaceholders));
//! ```
//!
//! # Grammar
//!
//! Ditto's parboiled2 grammars (`RqlParserBase`, `RqlPredicateParser`,
//! `RqlOptionParser`) in EBNF. White space (`" " | "\n" | "\r" | "\t" |
//! "\f"`) is allowed only where `ws` stands: `eq(a, 1)` is refused, as it
//! is by Ditto, and so is white space after the last `)`.
//!
//! ```text
//! Filter      = ws Query EOI
//! Query       = Comparison | In | Logical | Not | Exists | Empty
//! Comparison  = ("eq"|"ne"|"gt"|"ge"|"lt"|"le"|"like"|"ilike") "(" Property "," Literal ")"
//! In          = "in" "(" Property ("," Literal)+ ")"
//! Logical     = ("and"|"or") "(" Query ("," ws Query)* ")"
//! Not         = "not" "(" Query ")"
//! Exists      = "exists" "(" Property ")"
//! Empty       = "empty" "(" Property ")"
//! Property    = (Char - ("," | ")" | '"' | "\") | "\" Escape)*        (* may be empty *)
//! Literal     = (Double | Long | String | SqString | Placeholder
//!               | "true" | "false" | "null") ws
//! Double      = Integer "." Digit+                      (* no exponent *)
//! Long        = Integer - ("-0" ...)                     (* "-0" never starts a long *)
//! Integer     = ["+"|"-"] ("1".."9" Digit* | Digit)
//! String      = '"' (Char - ('"'|"\") | "\" Escape)* '"'
//! SqString    = "'" (Char - ("'"|"\") | "\" SqEscape)* "'"
//! Escape      = '"' | "\" | "/" | "b" | "f" | "n" | "r" | "t" | "u" Hex Hex Hex Hex
//! SqEscape    = "'" | "\" | "/" | "b" | "f" | "n" | "r" | "t" | "u" Hex Hex Hex Hex
//! Placeholder = "time:" Property                         (* kept as written *)
//!
//! Options     = ws Option ("," Option)* EOI
//! Option      = "sort" "(" ("+"|"-") Property ("," ("+"|"-") Property)* ")"
//!             | "limit" "(" Long ws "," Long ws ")"
//!             | "cursor" "(" Property ")"
//!             | "size" "(" Digit+ ")"
//! ```
//!
//! Properties are then classified as Ditto's field factory does
//! ([`Field`]): `thingId`, `_namespace`, `policyId`, `_revision`,
//! `_created`, `_modified`, `definition`, `_metadata`, `attributes/…`,
//! `_metadata/…`, `features/<id>/properties/…`,
//! `features/<id>/desiredProperties/…`, `features/<id>/definition`, and in
//! `exists`/`empty` also `features/<id>`, `…/properties` and
//! `…/desiredProperties`; a leading `/` is dropped; `<id>` may be `*`.
//! Anything else is `Unknown property name: …`.
//!
//! # Semantics
//!
//! A field's values are found by Ditto's `getValueFlatteningArrays`: a
//! level holding an array continues into each object in it; the values at
//! the end are then taken element by element (arrays in arrays included,
//! objects yield nothing), and an operator matches when any value does.
//!
//! | point | `Semantics::Things` (`condition=`, events) | `Semantics::Search` |
//! |---|---|---|
//! | `5` vs `5.0` | equal | equal |
//! | `"5"` vs `5` | equal: a numeric string is a `BigDecimal` | not equal |
//! | other mixed types | compared by Java texts: `"true"` equals `true` | never equal or ordered |
//! | strings in `gt`/`lt` | UTF-16 code units (Java `compareTo`) | code points (UTF-8 bytes) |
//! | `ne` on a missing field | matches (`!anyMatch(eq)`) | does not (`$ne` and `$exists`) |
//! | `not(eq(…))` on a missing field | matches | matches |
//! | `eq(f,null)` | `f` is `null` or holds one | same, and `f` must exist |
//! | `in(f,…,null,…)` | `null` matches nothing (Ditto throws) | matches `null` and a missing `f` |
//! | `exists(f)` | present, `null` included | same |
//! | `empty(f)` | absent, `null`, `""`, `[]`, `{}` | same |
//! | `features/*/…` | a feature whose id is `*` | any feature |
//! | `like` | anchored; `*` any run, `?` one character, neither crosses a line break; numbers and booleans by their Java text | strings only |
//! | `ilike` | ASCII letters fold | all letters fold |
//! | placeholder value unresolved | `null` | `null` |
//!
//! # Limits
//!
//! See [`limits`]: input length, nesting depth, operator count, `in`
//! values, sort fields, JSON depth; each refused with a `Syntax` error
//! naming it.
//!
//! # Not done
//!
//! `time:now±duration` and `time:now[unit]` placeholders resolve to
//! nothing (so compare as `null`); parser messages follow parboiled2's
//! shape but list Ferry's own expectations; numbers that do not fit a
//! double are refused rather than read as infinity.

mod ast;
mod error;
mod eval;
mod field;
mod java_text;
mod like;
pub mod limits;
mod options;
mod parser;

pub use ast::{CompareOp, Filter, Placeholder, Value};
pub use error::{ErrorKind, RqlError};
pub use eval::{NoPlaceholders, Placeholders, Semantics, TimePlaceholders};
pub use field::{FeaturePart, Field, FieldKind, Scope, ANY_FEATURE};
pub(crate) use java_text::grouped;
pub use like::{CaseFold, LikePattern};
pub use options::{SearchOptions, SearchQuery, SortEntry};

impl Filter {
    /// Parses a filter: the text of `filter=`, `condition=` or an event
    /// filter. `scope` says which placeholders may stand as fields.
    pub fn parse(text: &str, scope: Scope<'_>) -> Result<Filter, RqlError> {
        parser::Parser::filter(text, scope)
    }
}

#[cfg(test)]
mod tests;
