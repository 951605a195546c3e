//! `RouteError`: what is wrong with a route's text and where.

use std::fmt;

/// A route that does not parse: the route's name, the 1-based column (in
/// characters, from the start of the route text) where the problem is, and
/// what it is. The config loader adds the file and line, which this crate
/// never sees.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("route \"{route}\", column {column}: {kind}")]
pub struct RouteError {
    pub route: String,
    pub column: usize,
    pub kind: ErrorKind,
}

impl RouteError {
    /// `offset` is a byte offset into `text`; users count characters.
    pub(crate) fn at(route: &str, text: &str, offset: usize, kind: ErrorKind) -> RouteError {
        let column = text[..offset.min(text.len())].chars().count() + 1;
        RouteError { route: route.to_owned(), column, kind }
    }
}

/// Each way a route can be wrong, worded for the person who wrote it.
/// `found` and `after` fields hold a token as the user typed it, or "the
/// end of the route".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    #[error("the route is {len} bytes long; at most {max} are allowed")]
    TooLong { len: usize, max: usize },
    #[error("a route starts with FROM")]
    ExpectedFrom,
    #[error("expected a topic filter after FROM")]
    MissingFilter,
    #[error("'{0}' is not a valid MQTT topic filter ('#' only as the last level, '+' only as a whole level)")]
    InvalidFilter(String),
    #[error(
        "a route cannot use a shared subscription ('{0}'): it is the only subscriber of its filter"
    )]
    SharedFilter(String),
    #[error("expected WHERE or INTO after the topic filter, found {found}")]
    MissingInto { found: String },
    #[error("expected an endpoint name after INTO, found {found}")]
    MissingEndpoint { found: String },
    #[error("unexpected {found} after the endpoint name: INTO <endpoint> ends the route")]
    TrailingInput { found: String },
    #[error("unterminated string: no closing {quote}")]
    UnterminatedString { quote: char },
    #[error("bad number '{0}'")]
    BadNumber(String),
    #[error("unexpected character '{0}'")]
    UnexpectedChar(char),
    #[error("expected a name after '$' ($body, $topic, $user, $contentType, $qos, $clientId, $username)")]
    MissingName,
    #[error("unknown name '${0}'; known: $body, $topic, $user, $contentType, $qos, $clientId, $username")]
    UnknownName(String),
    #[error("unknown function '{0}'; known: IS_DEFINED, STARTS_WITH, ENDS_WITH, CONTAINS, LOWER, UPPER, LENGTH")]
    UnknownFunction(String),
    #[error("{function} takes {expected}, not {found}")]
    Arity { function: &'static str, expected: Plural, found: Plural },
    #[error("expected a value after {after}, found {found}")]
    ExpectedValue { after: String, found: String },
    #[error("expected {expected}, found {found}")]
    Expected { expected: &'static str, found: String },
    #[error("expected AND, OR or INTO after the condition, found {found}")]
    ExpectedInto { found: String },
    #[error("'{0}' needs a property name: ${0}.<name> or ${0}['<name>']")]
    MissingProperty(&'static str),
    #[error("index {0} is too large")]
    IndexTooLarge(String),
    #[error("expressions nest deeper than {max} levels")]
    TooDeep { max: usize },
    #[error("a $body path has more than {max} steps")]
    PathTooLong { max: usize },
}

/// A count of arguments, printed as "1 argument" or "2 arguments".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plural(pub usize);

impl fmt::Display for Plural {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = if self.0 == 1 { "" } else { "s" };
        write!(f, "{} argument{s}", self.0)
    }
}
