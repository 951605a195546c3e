//! Ferry's edge routes, first part: the route language. A route sends the
//! messages published on a topic filter that satisfy a condition to an
//! endpoint, as edgeHub's routes do in Azure IoT Edge:
//!
//! ```toml
//! [routes.telemetry]
//! route = "FROM telemetry/# WHERE $body.temp > 50 AND $user.site = 'plant-1' INTO cloud"
//! ```
//!
//! A route is parsed once, at load, into a tree whose names, paths and
//! functions are all resolved, so that evaluating it on the publish path
//! only walks the tree. This crate does no I/O.
//!
//! ```
//! use ferry_routes::{Message, Route};
//!
//! let route = Route::parse("hot", "FROM telemetry/# WHERE $body.temp > 50 INTO cloud").unwrap();
//! assert_eq!(route.filter(), "telemetry/#");
//! let message = Message { topic: "telemetry/a", payload: br#"{"temp": 51}"#, ..Message::default() };
//! assert!(route.condition().unwrap().matches(&message));
//!
//! let error = Route::parse("hot", "FROM telemetry/# WHERE $body.temp > INTO cloud").unwrap_err();
//! assert_eq!(error.to_string(), "route \"hot\", column 37: expected a value after '>', found 'INTO'");
//! ```
//!
//! # Grammar
//!
//! In EBNF; keywords, function names, `true`, `false`, `null` and the `$`
//! names are case-insensitive, whitespace separates tokens and is otherwise
//! ignored. The topic filter runs from after FROM to the next whitespace.
//!
//! ```ebnf
//! route      = "FROM" filter [ "WHERE" condition ] "INTO" word ;
//! condition  = and { "OR" and } ;
//! and        = not { "AND" not } ;
//! not        = "NOT" not | comparison ;
//! comparison = operand [ ( "=" | "!=" | "<>" | "<" | "<=" | ">" | ">=" ) operand ] ;
//! operand    = number | string | "true" | "false" | "null"
//!            | reference | call | "(" condition ")" ;
//! call       = function "(" [ condition { "," condition } ] ")" ;
//! function   = "IS_DEFINED" | "STARTS_WITH" | "ENDS_WITH" | "CONTAINS"
//!            | "LOWER" | "UPPER" | "LENGTH" ;
//! reference  = "$body" { step } | "$topic" [ "[" index "]" ] | "$user" step
//!            | "$contentType" | "$qos" | "$clientId" | "$username" ;
//! step       = "." word | "[" index "]" | "[" string "]" ;
//! word       = ( letter | "_" ) { letter | digit | "_" | "-" } ;
//! index      = digit { digit } ;
//! number     = [ "-" ] digit { digit } [ "." digit { digit } ]
//!              [ ( "e" | "E" ) [ "+" | "-" ] digit { digit } ] ;
//! string     = "'" { any character but "'" | "''" } "'"
//!            | '"' { any character but '"' | '""' } '"' ;
//! ```
//!
//! A quote is written twice inside a string (`'it''s'`). A `$user` name
//! or `$body` key that is not a word is quoted in brackets:
//! `$user['x.site']`, `$body['a.b']`. What a condition means is in
//! `evaluate`'s module documentation; the limits are in `limits`.

mod body;
mod condition;
pub mod config;
pub mod endpoints;
mod error;
mod evaluate;
mod flow;
mod lexer;
pub mod limits;
mod message;
mod metrics;
mod route;
mod secret;
mod service;
pub mod sink;
mod stats;
mod table;
mod units;

pub use body::Body;
pub use condition::Condition;
pub use error::{ErrorKind, Plural, RouteError};
pub use message::{Message, MessageView};
pub use metrics::RoutesMetrics;
pub use route::Route;
pub use secret::Secret;
pub use service::{EndpointStatus, RoutesError, RoutesService};
pub use stats::EndpointFigures;
pub use units::Span;
