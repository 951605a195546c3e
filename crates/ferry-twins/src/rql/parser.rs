//! Ditto's RQL grammar (`RqlParserBase`, `RqlPredicateParser`,
//! `RqlOptionParser`, all parboiled2 PEGs) as one recursive descent.
//!
//! A PEG commits to the first alternative that matches, so a descent that
//! looks one character (or one word) ahead accepts exactly the same texts.
//! White space is allowed only where Ditto's rules consume it: before the
//! whole text, after a literal, after the comma between operands of
//! `and`/`or`. Errors are reported at the furthest position any rule
//! reached, with what was expected there, in parboiled2's format.

use super::ast::{CompareOp, Filter, Placeholder, Value};
use super::error::{ErrorKind, RqlError};
use super::field::{Field, Scope, Usage};
use super::like::LikePattern;
use super::limits::{MAX_DEPTH, MAX_INPUT_BYTES, MAX_IN_VALUES, MAX_NODES, MAX_SORT_FIELDS};

/// Why a rule stopped: a mismatch (the furthest one is reported), or a
/// failure no other alternative can repair.
enum Stop {
    Mismatch,
    Fatal(RqlError),
}

type Parsed<T> = Result<T, Stop>;

/// One option of `option=`, before its fields and values are checked
/// (Ditto checks them later than the syntax, after the filter).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RawOption {
    /// Entries of `sort(…)`: the property text, where it starts, and
    /// whether it is descending.
    Sort(Vec<(String, usize, bool)>),
    /// `limit(offset,count)` as Java `long`s.
    Limit(i64, i64),
    Cursor(String),
    /// `size(n)` as a Java `int`.
    Size(i32),
}

pub(crate) struct Parser<'a> {
    input: &'a str,
    pos: usize,
    furthest: usize,
    expected: Vec<&'static str>,
    scope: Scope<'a>,
    depth: usize,
    nodes: usize,
    /// Ditto parses the whole text before it looks at any field, and for
    /// `condition=` checks pointers before it classifies fields, so a
    /// syntax error anywhere wins over a bad field, and a bad pointer over
    /// an unknown field.
    bad_pointer: Option<RqlError>,
    bad_field: Option<RqlError>,
    /// "predicate" or "options", as in Ditto's messages.
    what: &'static str,
}

const WHITE_SPACE: [char; 5] = [' ', '\n', '\r', '\t', '\u{c}'];

impl<'a> Parser<'a> {
    fn new(input: &'a str, scope: Scope<'a>, what: &'static str) -> Self {
        Parser {
            input,
            pos: 0,
            furthest: 0,
            expected: Vec::new(),
            scope,
            depth: 0,
            nodes: 0,
            bad_pointer: None,
            bad_field: None,
            what,
        }
    }

    /// Parses a filter (`filter=`, `condition=`, an event filter).
    pub(crate) fn filter(input: &'a str, scope: Scope<'a>) -> Result<Filter, RqlError> {
        let mut parser = Parser::new(input, scope, "predicate");
        parser.check_length()?;
        parser.white_space();
        let filter = parser.query().and_then(|filter| parser.end().map(|()| filter));
        let filter = parser.finish(filter)?;
        match (parser.bad_pointer, parser.bad_field) {
            (Some(error), _) | (None, Some(error)) => Err(error),
            (None, None) => Ok(filter),
        }
    }

    /// Parses `option=` (its comma-separated options) up to the syntax.
    pub(crate) fn options(input: &'a str) -> Result<Vec<RawOption>, RqlError> {
        let mut parser = Parser::new(input, Scope::THINGS, "options");
        parser.check_length()?;
        parser.white_space();
        let options = parser.option_list().and_then(|options| parser.end().map(|()| options));
        parser.finish(options)
    }

    fn check_length(&self) -> Result<(), RqlError> {
        if self.input.len() > MAX_INPUT_BYTES {
            return Err(RqlError::new(
                ErrorKind::Syntax,
                MAX_INPUT_BYTES,
                format!(
                    "The RQL {} is {} bytes long; Ferry accepts at most {MAX_INPUT_BYTES}.",
                    self.what,
                    self.input.len()
                ),
            ));
        }
        Ok(())
    }

    fn finish<T>(&mut self, result: Parsed<T>) -> Result<T, RqlError> {
        match result {
            Ok(value) => Ok(value),
            Err(Stop::Fatal(error)) => Err(error),
            Err(Stop::Mismatch) => Err(self.syntax_error()),
        }
    }

    // ---- characters ----

    fn peek(&self) -> Option<char> {
        self.input[self.pos..].chars().next()
    }

    fn rest(&self) -> &'a str {
        &self.input[self.pos..]
    }

    fn advance(&mut self, c: char) {
        self.pos += c.len_utf8();
    }

    /// Notes that `what` would have matched here; the furthest position's
    /// notes make the error message.
    fn expect(&mut self, what: &'static str) {
        if self.pos > self.furthest {
            self.furthest = self.pos;
            self.expected.clear();
        }
        if self.pos == self.furthest && !self.expected.contains(&what) {
            self.expected.push(what);
        }
    }

    fn mismatch<T>(&mut self, what: &'static str) -> Parsed<T> {
        self.expect(what);
        Err(Stop::Mismatch)
    }

    fn char(&mut self, c: char, what: &'static str) -> Parsed<()> {
        if self.peek() == Some(c) {
            self.advance(c);
            Ok(())
        } else {
            self.mismatch(what)
        }
    }

    fn end(&mut self) -> Parsed<()> {
        if self.pos == self.input.len() {
            Ok(())
        } else {
            self.mismatch("end of input")
        }
    }

    fn white_space(&mut self) {
        while let Some(c) = self.peek().filter(|c| WHITE_SPACE.contains(c)) {
            self.advance(c);
        }
    }

    /// The operator or option name at the cursor.
    fn word(&mut self) -> &'a str {
        let start = self.pos;
        let len = self.rest().bytes().take_while(u8::is_ascii_lowercase).count();
        self.pos += len;
        &self.input[start..start + len]
    }

    fn fatal(&self, offset: usize, message: String) -> Stop {
        Stop::Fatal(RqlError::new(ErrorKind::Syntax, offset, message))
    }

    // ---- predicates ----

    /// Query = SingleComparisonOp | MultiComparisonOp | MultiLogicalOp
    ///       | SingleLogicalOp | ExistsOp | EmptyOp
    fn query(&mut self) -> Parsed<Filter> {
        let start = self.pos;
        self.depth += 1;
        self.nodes += 1;
        if self.depth > MAX_DEPTH {
            return Err(self
                .fatal(start, format!("The RQL predicate nests deeper than {MAX_DEPTH} levels.")));
        }
        if self.nodes > MAX_NODES {
            return Err(self
                .fatal(start, format!("The RQL predicate has more than {MAX_NODES} operators.")));
        }
        let filter = match self.word() {
            "eq" => self.comparison(CompareOp::Eq),
            "ne" => self.comparison(CompareOp::Ne),
            "gt" => self.comparison(CompareOp::Gt),
            "ge" => self.comparison(CompareOp::Ge),
            "lt" => self.comparison(CompareOp::Lt),
            "le" => self.comparison(CompareOp::Le),
            "like" => self.like(false),
            "ilike" => self.like(true),
            "in" => self.in_values(),
            "and" => self.logical(true),
            "or" => self.logical(false),
            "not" => self.not(),
            "exists" => self.presence(true),
            "empty" => self.presence(false),
            _ => {
                self.pos = start;
                self.mismatch(
                    "eq, ne, gt, ge, lt, le, like, ilike, in, and, or, not, exists or empty",
                )
            }
        };
        self.depth -= 1;
        filter
    }

    fn comparison(&mut self, op: CompareOp) -> Parsed<Filter> {
        self.char('(', "'('")?;
        let field = self.property(Usage::Filter)?;
        self.char(',', "','")?;
        let value = self.literal()?;
        self.char(')', "')'")?;
        Ok(Filter::Compare { op, field, value })
    }

    fn like(&mut self, ignore_case: bool) -> Parsed<Filter> {
        self.char('(', "'('")?;
        let field = self.property(Usage::Filter)?;
        self.char(',', "','")?;
        let value_at = self.pos;
        let value = self.literal()?;
        self.char(')', "')'")?;
        let pattern = match value {
            Value::String(pattern) => pattern,
            _ => {
                // Ditto's criteria factory refuses the value once parsed.
                let name = if ignore_case { "ilike" } else { "like" };
                self.bad_field.get_or_insert_with(|| {
                    RqlError::new(
                        ErrorKind::LikeNeedsString,
                        value_at,
                        format!("In the {name} predicate only string values are allowed."),
                    )
                });
                String::new()
            }
        };
        Ok(Filter::Like { field, pattern: LikePattern::new(pattern, ignore_case) })
    }

    fn in_values(&mut self) -> Parsed<Filter> {
        self.char('(', "'('")?;
        let field = self.property(Usage::Filter)?;
        let mut values = Vec::new();
        loop {
            let comma_at = self.pos;
            self.char(',', "','")?;
            if values.len() == MAX_IN_VALUES {
                return Err(self.fatal(
                    comma_at,
                    format!("The RQL 'in' has more than {MAX_IN_VALUES} values."),
                ));
            }
            values.push(self.literal()?);
            if self.peek() != Some(',') {
                break;
            }
        }
        self.char(')', "',' or ')'")?;
        Ok(Filter::In { field, values })
    }

    fn logical(&mut self, and: bool) -> Parsed<Filter> {
        self.char('(', "'('")?;
        let mut operands = vec![self.query()?];
        while self.peek() == Some(',') {
            self.advance(',');
            self.white_space();
            operands.push(self.query()?);
        }
        self.char(')', "',' or ')'")?;
        Ok(if and { Filter::And(operands) } else { Filter::Or(operands) })
    }

    fn not(&mut self) -> Parsed<Filter> {
        self.char('(', "'('")?;
        let operand = self.query()?;
        self.char(')', "')'")?;
        Ok(Filter::Not(Box::new(operand)))
    }

    fn presence(&mut self, exists: bool) -> Parsed<Filter> {
        self.char('(', "'('")?;
        let field = self.property(Usage::Exists)?;
        self.char(')', "')'")?;
        Ok(if exists { Filter::Exists(field) } else { Filter::Empty(field) })
    }

    /// PropertyLiteral, classified. A field Ditto would refuse is noted
    /// and replaced by a stand-in so that parsing goes on to find any
    /// syntax error, which Ditto reports first.
    fn property(&mut self, usage: Usage) -> Parsed<Field> {
        let start = self.pos;
        let text = self.characters();
        match Field::classify(&text, usage, self.scope, start) {
            Ok(field) => Ok(field),
            Err(error) => {
                let slot = match error.kind {
                    ErrorKind::InvalidPointer(_) => &mut self.bad_pointer,
                    _ => &mut self.bad_field,
                };
                slot.get_or_insert(error);
                Ok(Field::stand_in())
            }
        }
    }

    /// Characters = { NormalChar | '\' EscapedChar }, NormalChar being
    /// anything but `,` `)` `"` `\`.
    fn characters(&mut self) -> String {
        let mut text = Utf16Text::default();
        while let Some(c) = self.peek() {
            match c {
                ',' | ')' | '"' => break,
                '\\' => {
                    let at = self.pos;
                    self.advance('\\');
                    match self.escape('"') {
                        Some(unit) => text.push(unit),
                        None => {
                            self.pos = at;
                            break;
                        }
                    }
                }
                c => {
                    self.advance(c);
                    text.push(Unit::Char(c));
                }
            }
        }
        text.finish()
    }

    /// EscapedChar after the backslash: the quote (`"` in double-quoted
    /// text and properties, `'` in single-quoted text), `\`, `/`, `b` `f`
    /// `n` `r` `t`, or `u` and four hex digits.
    fn escape(&mut self, quote: char) -> Option<Unit> {
        let c = self.peek();
        let unit = match c {
            Some(c) if c == quote || c == '\\' || c == '/' => Unit::Char(c),
            Some('b') => Unit::Char('\u{8}'),
            Some('f') => Unit::Char('\u{c}'),
            Some('n') => Unit::Char('\n'),
            Some('r') => Unit::Char('\r'),
            Some('t') => Unit::Char('\t'),
            Some('u') => {
                let hex =
                    self.rest().get(1..5).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
                let Some(hex) = hex else {
                    self.pos += 1;
                    self.expect("4 hex digits");
                    self.pos -= 1;
                    return None;
                };
                let unit = u16::from_str_radix(hex, 16).expect("four hex digits");
                self.pos += 5;
                return Some(Unit::Utf16(unit));
            }
            _ => {
                self.expect("an escape: '\"', '\\', '/', 'b', 'f', 'n', 'r', 't' or 'u'");
                return None;
            }
        };
        self.advance(c.expect("matched above"));
        Some(unit)
    }

    /// Literal = DoubleLiteral | LongLiteral | StringLiteral
    ///         | StringSingleQuoteLiteral | PlaceholderLiteral
    ///         | "true" | "false" | "null", then white space.
    fn literal(&mut self) -> Parsed<Value> {
        let value = match self.peek() {
            Some(c) if c == '+' || c == '-' || c.is_ascii_digit() => self.number()?,
            Some(q @ ('"' | '\'')) => Value::String(self.string(q)?),
            _ if self.rest().starts_with("time:") => {
                self.pos += "time:".len();
                let start = self.pos;
                // Ditto keeps the placeholder as written (a capture), so
                // escapes in its name stay escapes.
                self.characters();
                Value::Placeholder(Placeholder {
                    prefix: "time".to_string(),
                    name: self.input[start..self.pos].to_string(),
                })
            }
            _ if self.rest().starts_with("true") => {
                self.pos += 4;
                Value::Bool(true)
            }
            _ if self.rest().starts_with("false") => {
                self.pos += 5;
                Value::Bool(false)
            }
            _ if self.rest().starts_with("null") => {
                self.pos += 4;
                Value::Null
            }
            _ => return self.mismatch("a number, a string, time:…, true, false or null"),
        };
        self.white_space();
        Ok(value)
    }

    /// DoubleLiteral = Integer Frac; LongLiteral = !"-0" Integer;
    /// Integer = ['+'|'-'] ('1'..'9' {Digit} | Digit); Frac = '.' Digit {Digit}.
    fn number(&mut self) -> Parsed<Value> {
        let start = self.pos;
        self.integer()?;
        let rest = self.rest().as_bytes();
        if rest.first() == Some(&b'.') && rest.get(1).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
            self.digits();
            let text = &self.input[start..self.pos];
            let value: f64 = text.parse().expect("the grammar admits only decimal digits");
            if !value.is_finite() {
                // Java would read Infinity and compare with it; Ferry's
                // values are finite so that they print back.
                return Err(
                    self.fatal(start, format!("The number {text} is too large for a double."))
                );
            }
            return Ok(Value::Float(value));
        }
        self.long_from(start).map(Value::Int)
    }

    fn integer(&mut self) -> Parsed<()> {
        if let Some(sign @ ('+' | '-')) = self.peek() {
            self.advance(sign);
        }
        match self.peek() {
            Some('0') => self.advance('0'),
            Some('1'..='9') => self.digits(),
            _ => return self.mismatch("Digit"),
        }
        Ok(())
    }

    fn digits(&mut self) {
        self.pos += self.rest().bytes().take_while(u8::is_ascii_digit).count();
    }

    /// The integer read since `start` as a Java `long`, which Ditto's
    /// grammar refuses to begin with `-0`.
    fn long_from(&mut self, start: usize) -> Parsed<i64> {
        let text = &self.input[start..self.pos];
        if text.starts_with("-0") {
            self.pos = start;
            return self.mismatch("a number that does not start with -0");
        }
        text.parse().map_err(|_| self.number_format(start, text))
    }

    /// Java's `NumberFormatException`, which Ditto's parser wraps.
    fn number_format(&self, start: usize, text: &str) -> Stop {
        self.fatal(
            start,
            format!("Unknown error during parsing {}: For input string: \"{text}\"", self.what),
        )
    }

    fn string(&mut self, quote: char) -> Parsed<String> {
        let name = if quote == '"' { "'\"'" } else { "'''" };
        self.char(quote, name)?;
        let mut text = Utf16Text::default();
        loop {
            match self.peek() {
                Some(c) if c == quote => {
                    self.advance(c);
                    return Ok(text.finish());
                }
                Some('\\') => {
                    self.advance('\\');
                    match self.escape(quote) {
                        Some(unit) => text.push(unit),
                        None => return Err(Stop::Mismatch),
                    }
                }
                Some(c) => {
                    self.advance(c);
                    text.push(Unit::Char(c));
                }
                None => return self.mismatch(name),
            }
        }
    }

    // ---- options ----

    /// Options = Option {',' Option}
    fn option_list(&mut self) -> Parsed<Vec<RawOption>> {
        let mut options = vec![self.option()?];
        while self.peek() == Some(',') {
            self.advance(',');
            options.push(self.option()?);
        }
        Ok(options)
    }

    /// Option = Sort | Limit | Cursor | Size
    fn option(&mut self) -> Parsed<RawOption> {
        let start = self.pos;
        match self.word() {
            "sort" => self.sort(),
            "limit" => {
                self.char('(', "'('")?;
                let offset = self.long_literal()?;
                self.char(',', "','")?;
                let count = self.long_literal()?;
                self.char(')', "')'")?;
                Ok(RawOption::Limit(offset, count))
            }
            "cursor" => {
                self.char('(', "'('")?;
                let cursor = self.characters();
                self.char(')', "')'")?;
                Ok(RawOption::Cursor(cursor))
            }
            "size" => {
                self.char('(', "'('")?;
                let digits_at = self.pos;
                self.digits();
                if self.pos == digits_at {
                    return self.mismatch("Digit");
                }
                let text = &self.input[digits_at..self.pos];
                let size = text.parse::<i32>().map_err(|_| self.number_format(digits_at, text))?;
                self.char(')', "')'")?;
                Ok(RawOption::Size(size))
            }
            _ => {
                self.pos = start;
                self.mismatch("sort, limit, cursor or size")
            }
        }
    }

    /// Sort = "sort(" SortProperty {',' SortProperty} ')';
    /// SortProperty = ('+' | '-') PropertyLiteral.
    fn sort(&mut self) -> Parsed<RawOption> {
        self.char('(', "'('")?;
        let mut entries = Vec::new();
        loop {
            let descending = match self.peek() {
                Some('+') => false,
                Some('-') => true,
                _ => return self.mismatch("'+' or '-'"),
            };
            if entries.len() == MAX_SORT_FIELDS {
                return Err(self.fatal(
                    self.pos,
                    format!("The RQL sort has more than {MAX_SORT_FIELDS} fields."),
                ));
            }
            self.pos += 1;
            let start = self.pos;
            entries.push((self.characters(), start, descending));
            if self.peek() != Some(',') {
                break;
            }
            self.advance(',');
        }
        self.char(')', "',' or ')'")?;
        Ok(RawOption::Sort(entries))
    }

    fn long_literal(&mut self) -> Parsed<i64> {
        let start = self.pos;
        self.integer()?;
        let value = self.long_from(start)?;
        self.white_space();
        Ok(value)
    }

    // ---- errors ----

    /// parboiled2's message: `Invalid input 'x', expected … (line 1,
    /// column 5):`, the line, and a caret under the position.
    fn syntax_error(&self) -> RqlError {
        let at = self.furthest;
        let line_start = self.input[..at].rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.input[at..].find('\n').map_or(self.input.len(), |i| at + i);
        let line = self.input[..at].matches('\n').count() + 1;
        let column = self.input[line_start..at].chars().count() + 1;
        let found = match self.input[at..].chars().next() {
            Some(c) => format!("Invalid input '{}'", c.escape_debug()),
            None => "Unexpected end of input".to_string(),
        };
        let expected = match self.expected.as_slice() {
            [] => String::new(),
            [one] => format!(", expected {one}"),
            [init @ .., last] => format!(", expected {} or {last}", init.join(", ")),
        };
        RqlError::new(
            ErrorKind::Syntax,
            at,
            format!(
                "{found}{expected} (line {line}, column {column}):\n{}\n{}^",
                &self.input[line_start..line_end],
                " ".repeat(column - 1)
            ),
        )
    }
}

/// One character of RQL text once unescaped: `\uXXXX` is a UTF-16 code
/// unit, as in Java.
enum Unit {
    Char(char),
    Utf16(u16),
}

/// Text built from characters and UTF-16 code units: surrogate pairs
/// written as two escapes join into one character; a lone surrogate, which
/// a Java string may hold but a Rust one may not, becomes U+FFFD.
#[derive(Default)]
struct Utf16Text {
    text: String,
    high: Option<u16>,
}

impl Utf16Text {
    fn push(&mut self, unit: Unit) {
        match unit {
            Unit::Utf16(low @ 0xDC00..=0xDFFF) if self.high.is_some() => {
                let high = self.high.take().expect("checked");
                let c = char::decode_utf16([high, low]).next().and_then(Result::ok);
                self.text.push(c.unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            Unit::Utf16(high @ 0xD800..=0xDBFF) => {
                self.flush();
                self.high = Some(high);
            }
            Unit::Utf16(unit) => {
                self.flush();
                self.text
                    .push(char::from_u32(u32::from(unit)).unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            Unit::Char(c) => {
                self.flush();
                self.text.push(c);
            }
        }
    }

    fn flush(&mut self) {
        if self.high.take().is_some() {
            self.text.push(char::REPLACEMENT_CHARACTER);
        }
    }

    fn finish(mut self) -> String {
        self.flush();
        self.text
    }
}
