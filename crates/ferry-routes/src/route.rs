//! `Route`: one `FROM <filter> [WHERE <condition>] INTO <endpoint>`
//! statement.

use std::fmt;

use ferry_mqtt::topic::{is_shared_filter, is_valid_topic_filter};

use crate::condition::{Condition, Parser};
use crate::error::{ErrorKind, RouteError};
use crate::lexer::{Token, TokenKind};
use crate::limits::MAX_ROUTE_BYTES;

/// A parsed route. Matching its filter is the broker's job (the route
/// subscribes to it like a client would); `condition` then decides about
/// each message the filter lets through.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    name: String,
    filter: String,
    condition: Option<Condition>,
    endpoint: String,
}

impl Route {
    /// Parses `text`; `name` (the config key, `telemetry` in
    /// `[routes.telemetry]`) names the route in errors.
    pub fn parse(name: &str, text: &str) -> Result<Route, RouteError> {
        let error = |offset, kind| RouteError::at(name, text, offset, kind);
        if text.len() > MAX_ROUTE_BYTES {
            return Err(error(0, ErrorKind::TooLong { len: text.len(), max: MAX_ROUTE_BYTES }));
        }
        // FROM and the filter are read as words between whitespace, not as
        // tokens: a filter is made of characters (`/`, `#`, `+`, `$`, …)
        // that mean other things in a condition.
        let (from, after_from) = word(text, 0);
        if !text[from..after_from].eq_ignore_ascii_case("FROM") {
            return Err(error(from, ErrorKind::ExpectedFrom));
        }
        let (start, end) = word(text, after_from);
        let filter = &text[start..end];
        if filter.is_empty()
            || filter.eq_ignore_ascii_case("WHERE")
            || filter.eq_ignore_ascii_case("INTO")
        {
            return Err(error(start, ErrorKind::MissingFilter));
        }
        if is_shared_filter(filter) {
            return Err(error(start, ErrorKind::SharedFilter(filter.to_owned())));
        }
        if !is_valid_topic_filter(filter) {
            return Err(error(start, ErrorKind::InvalidFilter(filter.to_owned())));
        }

        let mut parser = Parser::new(name, text, end)?;
        let condition = if parser.peek().is_keyword("WHERE") {
            parser.advance()?;
            Some(Condition(parser.condition()?))
        } else {
            None
        };
        let into = parser.advance()?;
        if !into.is_keyword("INTO") {
            let found = into.describe();
            let kind = match condition {
                Some(_) => ErrorKind::ExpectedInto { found },
                None => ErrorKind::MissingInto { found },
            };
            return Err(error(into.offset, kind));
        }
        let endpoint = match parser.advance()? {
            Token { kind: TokenKind::Word, text, .. } => text.to_owned(),
            token => {
                return Err(error(
                    token.offset,
                    ErrorKind::MissingEndpoint { found: token.describe() },
                ))
            }
        };
        let trailing = parser.peek();
        if trailing.kind != TokenKind::End {
            return Err(error(
                trailing.offset,
                ErrorKind::TrailingInput { found: trailing.describe() },
            ));
        }
        Ok(Route { name: name.to_owned(), filter: filter.to_owned(), condition, endpoint })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A valid MQTT topic filter, never a shared one.
    pub fn filter(&self) -> &str {
        &self.filter
    }

    /// `None` when the route has no WHERE: every message matches.
    pub fn condition(&self) -> Option<&Condition> {
        self.condition.as_ref()
    }

    /// The endpoint's name, to be looked up among the configured endpoints.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

/// The route in canonical form: keywords in capitals, the condition fully
/// parenthesised. It parses back to an equal route.
impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FROM {}", self.filter)?;
        if let Some(condition) = &self.condition {
            write!(f, " WHERE {condition}")?;
        }
        write!(f, " INTO {}", self.endpoint)
    }
}

/// The byte range of the first run of non-whitespace at or after `from`.
fn word(text: &str, from: usize) -> (usize, usize) {
    let rest = &text[from..];
    let start = from + (rest.len() - rest.trim_start().len());
    let end = text[start..].find(char::is_whitespace).map_or(text.len(), |len| start + len);
    (start, end)
}
