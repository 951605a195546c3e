//! Ditto's function expressions: a placeholder's value passed through
//! functions, `{{ header:device | fn:substring-after(':') | fn:default('x') }}`,
//! as Ditto's `placeholders` module evaluates them. An expression may also
//! start with a function, which then starts from nothing: that is how a
//! source's `acknowledgementRequests.filter` (`fn:filter(header:qos,'ne','0')`)
//! is written.
//!
//! Each template (`placeholder.rs` for what a source reads, `template.rs`
//! for a target's address) brings its own placeholders; the functions,
//! their arguments and how a template's pieces join are here, parsed once
//! when a connection is stored so that a misspelt function is refused
//! then, not met per message.

use base64::Engine;

/// Ditto's bound on the functions chained in one expression
/// (`MAX_COUNT_PIPELINE_FUNCTIONS`): a template is configuration, and ten
/// steps are more than any mapping needs.
pub const MAX_FUNCTIONS: usize = 10;

/// What an expression, or one of its steps, gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Element {
    /// No value: a missing header, a filter that did not hold, a
    /// `substring-before` whose text does not occur.
    Unresolved,
    /// Removed on purpose (`fn:delete()`): a template of deleted values
    /// only is left out, as an unresolved one is.
    Deleted,
    /// One value, or several after `fn:split`. Never empty.
    Resolved(Vec<String>),
}

impl Element {
    pub fn one(value: impl Into<String>) -> Element {
        Element::Resolved(vec![value.into()])
    }

    /// The optional `value` as an element.
    pub fn from_option(value: Option<impl Into<String>>) -> Element {
        value.map_or(Element::Unresolved, Element::one)
    }

    /// The values, or none when there are none.
    pub fn of(values: Vec<String>) -> Element {
        if values.is_empty() {
            Element::Unresolved
        } else {
            Element::Resolved(values)
        }
    }

    /// The first value, where there is one.
    pub fn into_first(self) -> Option<String> {
        match self {
            Element::Resolved(values) => values.into_iter().next(),
            Element::Unresolved | Element::Deleted => None,
        }
    }

    /// The values, none unless resolved: what an argument compares.
    fn into_values(self) -> Vec<String> {
        match self {
            Element::Resolved(values) => values,
            Element::Unresolved | Element::Deleted => Vec::new(),
        }
    }

    /// `step` applied to each value, those it keeps gathered: unresolved
    /// when it keeps none. Unresolved and deleted pass as they are.
    fn each(self, mut step: impl FnMut(String) -> Option<String>) -> Element {
        match self {
            Element::Resolved(values) => {
                Element::of(values.into_iter().filter_map(&mut step).collect())
            }
            other => other,
        }
    }
}

/// Why an expression was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpressionError {
    /// A placeholder the template cannot fill; the caller says which it can.
    Placeholder(String),
    /// Anything else, said in words.
    Invalid(String),
}

/// One `{{ … }}`: where it starts and the functions it goes through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expression<P> {
    /// `None` when the expression begins with a function, which starts
    /// from an unresolved value (so `fn:default('x')` alone gives `x`).
    start: Option<P>,
    functions: Vec<Function<P>>,
}

/// A function's argument: quoted text, or a placeholder of the template's.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Argument<P> {
    Text(String),
    Placeholder(P),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Function<P> {
    /// `fn:filter(value, test, compared)` keeps what came in when `value`
    /// passes; `fn:filter(test, compared)` keeps the incoming values that
    /// pass; `fn:filter(value, 'exists')` keeps it when `value` resolves.
    Filter {
        value: Option<Argument<P>>,
        test: Test,
        compared: Option<Argument<P>>,
    },
    Default(Argument<P>),
    SubstringBefore(String),
    SubstringAfter(String),
    Lower,
    Upper,
    Trim,
    UrlEncode,
    UrlDecode,
    Base64Encode,
    Base64Decode,
    Delete,
    Replace(String, String),
    Split(String),
    Join(String),
}

/// The comparisons `fn:filter` knows (Ditto's `FilterFunctions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Test {
    Eq,
    Ne,
    /// Alone: the value is not empty. With `'true'`/`'false'`: whether it
    /// is not empty is that.
    Exists,
    /// A pattern with `*` (any run), `?` (any one character) and `|`
    /// (either side).
    Like,
}

impl<P> Expression<P> {
    /// `text` is what stands between `{{` and `}}`; `placeholder` reads a
    /// placeholder's name, `None` when the template cannot fill it.
    pub fn parse(
        text: &str,
        placeholder: &impl Fn(&str) -> Option<P>,
    ) -> Result<Expression<P>, ExpressionError> {
        let stages = split_outside_quotes(text, '|')?;
        if stages.len() > MAX_FUNCTIONS + 1 {
            return Err(ExpressionError::Invalid(format!(
                "it chains more than {MAX_FUNCTIONS} functions"
            )));
        }
        let mut stages = stages.into_iter().map(str::trim).peekable();
        let first = stages.peek().copied().unwrap_or_default();
        let start = if first.starts_with("fn:") {
            None
        } else {
            stages.next();
            Some(named(first, placeholder)?)
        };
        let functions =
            stages.map(|stage| Function::parse(stage, placeholder)).collect::<Result<_, _>>()?;
        Ok(Expression { start, functions })
    }

    /// The expression's value, its placeholders filled in by `resolve`.
    pub fn evaluate(&self, resolve: &impl Fn(&P) -> Element) -> Element {
        let start = self.start.as_ref().map_or(Element::Unresolved, resolve);
        self.continue_from(start, resolve)
    }

    /// Whether the expression is functions only, with no placeholder of
    /// its own to start from: then it can continue another's value.
    pub fn is_functions_only(&self) -> bool {
        self.start.is_none()
    }

    /// The expression's functions applied to `start`.
    pub fn continue_from(&self, start: Element, resolve: &impl Fn(&P) -> Element) -> Element {
        self.functions.iter().fold(start, |element, function| function.apply(element, resolve))
    }
}

/// The placeholder `name`, or the error for one the template cannot fill.
fn named<P>(name: &str, placeholder: &impl Fn(&str) -> Option<P>) -> Result<P, ExpressionError> {
    placeholder(name).ok_or_else(|| ExpressionError::Placeholder(name.to_owned()))
}

impl<P> Function<P> {
    fn parse(
        stage: &str,
        placeholder: &impl Fn(&str) -> Option<P>,
    ) -> Result<Function<P>, ExpressionError> {
        let invalid = |why: String| ExpressionError::Invalid(why);
        let call = stage
            .strip_prefix("fn:")
            .ok_or_else(|| invalid(format!("'{stage}' is not a function (fn:name(…))")))?;
        let (name, rest) = call
            .split_once('(')
            .ok_or_else(|| invalid(format!("the function '{stage}' has no parentheses")))?;
        let inside = rest
            .trim_end()
            .strip_suffix(')')
            .ok_or_else(|| invalid(format!("the function '{stage}' does not end with ')'")))?;
        let mut arguments = if inside.trim().is_empty() {
            Vec::new()
        } else {
            split_outside_quotes(inside, ',')?
                .into_iter()
                .map(|argument| Argument::parse(argument.trim(), placeholder))
                .collect::<Result<Vec<_>, _>>()?
        };
        let name = name.trim();
        let wrong = |signature: &str| invalid(format!("'{stage}' does not match fn:{signature}"));
        let count = arguments.len();
        let text = |index: usize, signature: &str| match arguments.get(index) {
            Some(Argument::Text(text)) => Ok(text.clone()),
            _ => Err(wrong(signature)),
        };
        let function = match (name, count) {
            ("filter", 2 | 3) => return Function::filter(arguments, stage),
            ("default", 1) => Function::Default(arguments.remove(0)),
            ("substring-before", 1) => {
                Function::SubstringBefore(text(0, "substring-before('text')")?)
            }
            ("substring-after", 1) => Function::SubstringAfter(text(0, "substring-after('text')")?),
            ("replace", 2) => Function::Replace(
                text(0, "replace('from', 'to')")?,
                text(1, "replace('from', 'to')")?,
            ),
            ("split", 1) => {
                let separator = text(0, "split('separator')")?;
                if separator.is_empty() {
                    return Err(wrong("split('separator') with a separator that is not empty"));
                }
                Function::Split(separator)
            }
            ("join", 1) => Function::Join(text(0, "join('separator')")?),
            ("lower", 0) => Function::Lower,
            ("upper", 0) => Function::Upper,
            ("trim", 0) => Function::Trim,
            ("url-encode", 0) => Function::UrlEncode,
            ("url-decode", 0) => Function::UrlDecode,
            ("base64-encode", 0) => Function::Base64Encode,
            ("base64-decode", 0) => Function::Base64Decode,
            ("delete", 0) => Function::Delete,
            (
                "filter" | "default" | "substring-before" | "substring-after" | "replace" | "split"
                | "join" | "lower" | "upper" | "trim" | "url-encode" | "url-decode"
                | "base64-encode" | "base64-decode" | "delete",
                _,
            ) => return Err(invalid(format!("'{stage}' has the wrong number of arguments"))),
            _ => return Err(invalid(format!("the function 'fn:{name}' is not supported"))),
        };
        Ok(function)
    }

    /// `fn:filter`'s three forms, told apart as Ditto does: with two
    /// arguments, `'exists'` second means the first is the value tested.
    fn filter(
        mut arguments: Vec<Argument<P>>,
        stage: &str,
    ) -> Result<Function<P>, ExpressionError> {
        let test_named = |argument: &Argument<P>| match argument {
            Argument::Text(name) => Test::parse(name).ok_or_else(|| {
                ExpressionError::Invalid(format!(
                    "'{name}' in '{stage}' is not a filter test: use eq, ne, exists or like"
                ))
            }),
            Argument::Placeholder(_) => Err(ExpressionError::Invalid(format!(
                "the test of '{stage}' must be quoted: 'eq', 'ne', 'exists' or 'like'"
            ))),
        };
        let compared = arguments.pop();
        let (value, test, compared) = match arguments.len() {
            1 if matches!(&compared, Some(Argument::Text(name)) if name == "exists") => {
                (arguments.pop(), Test::Exists, None)
            }
            1 => (None, test_named(&arguments[0])?, compared),
            _ => {
                let test = test_named(&arguments[1])?;
                (Some(arguments.swap_remove(0)), test, compared)
            }
        };
        Ok(Function::Filter { value, test, compared })
    }

    fn apply(&self, element: Element, resolve: &impl Fn(&P) -> Element) -> Element {
        match self {
            Function::Filter { value, test, compared } => {
                let compared = compared.as_ref().map(|argument| argument.values(resolve));
                let Element::Resolved(incoming) = element else { return element };
                match value {
                    None => Element::of(
                        incoming
                            .into_iter()
                            .filter(|value| test.any(value, compared.as_deref()))
                            .collect(),
                    ),
                    Some(argument) => {
                        if test.holds_for_values(&argument.values(resolve), compared.as_deref()) {
                            Element::Resolved(incoming)
                        } else {
                            Element::Unresolved
                        }
                    }
                }
            }
            Function::Default(argument) => match element {
                Element::Unresolved => argument.element(resolve),
                other => other,
            },
            Function::SubstringBefore(text) => {
                element.each(|value| value.find(text.as_str()).map(|at| value[..at].to_owned()))
            }
            Function::SubstringAfter(text) => element.each(|value| {
                value.find(text.as_str()).map(|at| value[at + text.len()..].to_owned())
            }),
            Function::Lower => element.each(|value| Some(value.to_lowercase())),
            Function::Upper => element.each(|value| Some(value.to_uppercase())),
            Function::Trim => element.each(|value| Some(value.trim().to_owned())),
            Function::UrlEncode => element.each(|value| Some(crate::form::encode(&value))),
            Function::UrlDecode => element.each(|value| crate::form::decode(&value)),
            Function::Base64Encode => {
                element.each(|value| Some(base64::engine::general_purpose::STANDARD.encode(value)))
            }
            Function::Base64Decode => element.each(|value| {
                let bytes = base64::engine::general_purpose::STANDARD.decode(value).ok()?;
                String::from_utf8(bytes).ok()
            }),
            Function::Delete => Element::Deleted,
            Function::Replace(from, to) => element.each(|value| Some(value.replace(from, to))),
            Function::Split(separator) => match element {
                Element::Resolved(values) => Element::of(
                    values.iter().flat_map(|value| split_as_java(value, separator)).collect(),
                ),
                other => other,
            },
            Function::Join(separator) => match element {
                Element::Resolved(values) => Element::one(values.join(separator)),
                other => other,
            },
        }
    }
}

impl<P> Argument<P> {
    fn parse(
        text: &str,
        placeholder: &impl Fn(&str) -> Option<P>,
    ) -> Result<Argument<P>, ExpressionError> {
        for quote in ['\'', '"'] {
            if let Some(inner) = text.strip_prefix(quote).and_then(|rest| rest.strip_suffix(quote))
            {
                return Ok(Argument::Text(inner.to_owned()));
            }
        }
        if !text.contains(':') || text.contains(char::is_whitespace) {
            return Err(ExpressionError::Invalid(format!(
                "the argument '{text}' is neither quoted text nor a placeholder"
            )));
        }
        named(text, placeholder).map(Argument::Placeholder)
    }

    fn element(&self, resolve: &impl Fn(&P) -> Element) -> Element {
        match self {
            Argument::Text(text) => Element::one(text.clone()),
            Argument::Placeholder(placeholder) => resolve(placeholder),
        }
    }

    fn values(&self, resolve: &impl Fn(&P) -> Element) -> Vec<String> {
        self.element(resolve).into_values()
    }
}

impl Test {
    fn parse(name: &str) -> Option<Test> {
        Some(match name {
            "eq" => Test::Eq,
            "ne" => Test::Ne,
            "exists" => Test::Exists,
            "like" => Test::Like,
            _ => return None,
        })
    }

    fn holds(self, value: &str, compared: Option<&str>) -> bool {
        match (self, compared) {
            (Test::Eq, Some(compared)) => value == compared,
            (Test::Ne, Some(compared)) => value != compared,
            (Test::Exists, None) => !value.is_empty(),
            (Test::Exists, Some(should)) => should.eq_ignore_ascii_case("true") != value.is_empty(),
            (Test::Like, Some(pattern)) => pattern.split('|').any(|pattern| like(value, pattern)),
            (Test::Eq | Test::Ne | Test::Like, None) => false,
        }
    }

    /// Whether `value` passes against any of `compared` (or alone).
    fn any(self, value: &str, compared: Option<&[String]>) -> bool {
        match compared {
            Some(compared) => compared.iter().any(|compared| self.holds(value, Some(compared))),
            None => self.holds(value, None),
        }
    }

    /// Ditto's rule for a filter given its own value: any pair passes, an
    /// unresolved side counting as the empty text.
    fn holds_for_values(self, values: &[String], compared: Option<&[String]>) -> bool {
        const EMPTY: &[String] = &[String::new()];
        let values = if values.is_empty() { EMPTY } else { values };
        let compared = compared.map(|compared| if compared.is_empty() { EMPTY } else { compared });
        values.iter().any(|value| self.any(value, compared))
    }
}

/// Whether `value` matches `pattern` whole: `*` any run, `?` any one
/// character, everything else itself.
fn like(value: &str, pattern: &str) -> bool {
    let value: Vec<char> = value.chars().collect();
    let pattern: Vec<char> = pattern.chars().collect();
    // The classic two-pointer match with one backtrack point per `*`:
    // linear in practice, never exponential.
    let (mut v, mut p) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while v < value.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, v));
                p += 1;
            }
            Some(&c) if c == '?' || c == value[v] => {
                v += 1;
                p += 1;
            }
            _ => match star {
                Some((star_p, star_v)) => {
                    p = star_p + 1;
                    v = star_v + 1;
                    star = Some((star_p, star_v + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// `value` cut at each `separator`, trailing empty pieces dropped, as
/// Java's `String.split` (which Ditto calls) leaves them.
fn split_as_java(value: &str, separator: &str) -> Vec<String> {
    let mut pieces: Vec<String> = value.split(separator).map(str::to_owned).collect();
    while pieces.len() > 1 && pieces.last().is_some_and(String::is_empty) {
        pieces.pop();
    }
    pieces
}

/// `text` cut at each `separator` that is not inside quotes.
fn split_outside_quotes(text: &str, separator: char) -> Result<Vec<&str>, ExpressionError> {
    let mut pieces = Vec::new();
    let mut quote: Option<char> = None;
    let mut start = 0;
    for (at, c) in text.char_indices() {
        match quote {
            Some(open) if c == open => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == separator => {
                pieces.push(&text[start..at]);
                start = at + c.len_utf8();
            }
            None => {}
        }
    }
    if quote.is_some() {
        return Err(ExpressionError::Invalid(format!("'{text}' has an unclosed quote")));
    }
    pieces.push(&text[start..]);
    Ok(pieces)
}

/// A template's text as pieces: literal text and expressions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part<P> {
    Text(String),
    Expression(Expression<P>),
}

/// `text`'s pieces, each `{{ … }}` parsed as an expression.
pub fn parse_template<P>(
    text: &str,
    field: &str,
    placeholder: &impl Fn(&str) -> Option<P>,
) -> Result<Vec<Part<P>>, TemplateError> {
    super::template::pieces(text, field)
        .map_err(TemplateError::Unclosed)?
        .into_iter()
        .map(|piece| match piece {
            super::template::Piece::Text(literal) => Ok(Part::Text(literal.to_owned())),
            super::template::Piece::Placeholder(inside) => Expression::parse(inside, placeholder)
                .map(Part::Expression)
                .map_err(TemplateError::from),
        })
        .collect()
}

/// Why a template was refused: its own error, or its expression's.
#[derive(Debug)]
pub enum TemplateError {
    Unclosed(crate::error::DittoError),
    Placeholder(String),
    Invalid(String),
}

impl From<ExpressionError> for TemplateError {
    fn from(error: ExpressionError) -> TemplateError {
        match error {
            ExpressionError::Placeholder(name) => TemplateError::Placeholder(name),
            ExpressionError::Invalid(why) => TemplateError::Invalid(why),
        }
    }
}

/// The template's text: each expression's first value given to `push`
/// (which may encode it), between the literal text. Unresolved when an
/// expression is; deleted when every piece is a deleted expression; a
/// deleted expression among others stands for nothing, as in Ditto.
/// Ditto expands an expression of several values into several texts
/// only where it templates authorization subjects, which Ferry does not:
/// here the first value is the text.
pub fn render<P>(
    parts: &[Part<P>],
    resolve: &impl Fn(&P) -> Element,
    mut push: impl FnMut(&mut String, &str),
) -> Element {
    let mut text = String::new();
    let mut all_deleted = !parts.is_empty();
    for part in parts {
        match part {
            Part::Text(literal) => {
                all_deleted = false;
                text.push_str(literal);
            }
            Part::Expression(expression) => match expression.evaluate(resolve) {
                Element::Unresolved => return Element::Unresolved,
                Element::Deleted => {}
                Element::Resolved(values) => {
                    all_deleted = false;
                    push(&mut text, &values[0]);
                }
            },
        }
    }
    if all_deleted {
        Element::Deleted
    } else {
        Element::one(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Placeholders `h:<name>` read from `headers`.
    fn evaluate(text: &str, headers: &[(&str, &str)]) -> Element {
        let expression =
            Expression::parse(text, &|name: &str| name.strip_prefix("h:").map(str::to_owned))
                .unwrap_or_else(|error| panic!("{text}: {error:?}"));
        expression.evaluate(&|name: &String| {
            Element::from_option(
                headers.iter().find(|(header, _)| header == name).map(|(_, value)| *value),
            )
        })
    }

    fn one(value: &str) -> Element {
        Element::one(value)
    }

    #[test]
    fn text_functions_transform_each_value() {
        let id = [("id", "org.acme:Lamp-1")];
        assert_eq!(evaluate("h:id | fn:substring-before(':')", &id), one("org.acme"));
        assert_eq!(evaluate("h:id|fn:substring-after(\":\")|fn:upper()", &id), one("LAMP-1"));
        assert_eq!(evaluate("h:id | fn:substring-before('/')", &id), Element::Unresolved);
        assert_eq!(
            evaluate("h:id | fn:lower() | fn:replace('-', '_')", &id),
            one("org.acme:lamp_1")
        );
        assert_eq!(evaluate("h:pad | fn:trim()", &[("pad", "  x ")]), one("x"));
        assert_eq!(evaluate("h:t | fn:url-encode()", &[("t", "a b/ü*")]), one("a+b%2F%C3%BC*"));
        assert_eq!(evaluate("h:t | fn:url-decode()", &[("t", "a+b%2F%C3%BC")]), one("a b/ü"));
        assert_eq!(evaluate("h:t | fn:url-decode()", &[("t", "%zz")]), Element::Unresolved);
        assert_eq!(evaluate("h:t | fn:base64-encode()", &[("t", "lamp")]), one("bGFtcA=="));
        assert_eq!(evaluate("h:t | fn:base64-decode()", &[("t", "bGFtcA==")]), one("lamp"));
        assert_eq!(evaluate("h:id | fn:delete()", &id), Element::Deleted);
    }

    #[test]
    fn split_gives_several_values_and_join_makes_one() {
        let tags = [("tags", "a,b,,c,,")];
        assert_eq!(
            evaluate("h:tags | fn:split(',')", &tags),
            Element::Resolved(vec!["a".into(), "b".into(), "".into(), "c".into()])
        );
        assert_eq!(
            evaluate("h:tags | fn:split(',') | fn:upper() | fn:join('+')", &tags),
            one("A+B++C")
        );
        assert_eq!(
            evaluate("h:tags | fn:split(',') | fn:filter('like', '?')", &tags),
            Element::Resolved(vec!["a".into(), "b".into(), "c".into()])
        );
    }

    #[test]
    fn default_fills_only_what_is_unresolved() {
        assert_eq!(evaluate("h:missing | fn:default('x')", &[]), one("x"));
        assert_eq!(evaluate("h:missing | fn:default(h:other)", &[("other", "y")]), one("y"));
        assert_eq!(evaluate("h:missing | fn:default(h:other)", &[]), Element::Unresolved);
        assert_eq!(evaluate("h:a | fn:default('x')", &[("a", "a")]), one("a"));
        assert_eq!(
            evaluate("h:a | fn:delete() | fn:default('x')", &[("a", "a")]),
            Element::Deleted
        );
        assert_eq!(
            evaluate("fn:default('[\"twin-persisted\"]')", &[]),
            one("[\"twin-persisted\"]")
        );
    }

    #[test]
    fn filters_keep_or_drop_as_dittos_do() {
        let qos0 = [("qos", "0"), ("acks", "[]")];
        let qos1 = [("qos", "1"), ("acks", "[]")];
        // The acknowledgementRequests form: a default first, then the filter on another value.
        let requests = "fn:default('[\"c:x\"]') | fn:filter(h:qos, 'ne', '0')";
        assert_eq!(evaluate(requests, &qos0), Element::Unresolved);
        assert_eq!(evaluate(requests, &qos1), one("[\"c:x\"]"));
        // Starting from nothing, a filter keeps nothing.
        assert_eq!(evaluate("fn:filter(h:qos, 'ne', '0')", &qos1), Element::Unresolved);
        assert_eq!(evaluate("h:acks | fn:filter(h:qos, 'eq', '1')", &qos1), one("[]"));
        assert_eq!(evaluate("h:acks | fn:filter(h:qos, 'exists')", &qos1), one("[]"));
        assert_eq!(evaluate("h:acks | fn:filter(h:nope, 'exists')", &qos1), Element::Unresolved);
        assert_eq!(evaluate("h:acks | fn:filter(h:nope, 'exists', 'false')", &qos1), one("[]"));
        assert_eq!(evaluate("h:qos | fn:filter('ne', '0')", &qos1), one("1"));
        assert_eq!(evaluate("h:qos | fn:filter('ne', '0')", &qos0), Element::Unresolved);
        assert_eq!(evaluate("h:qos | fn:filter('like', '0|1')", &qos1), one("1"));
        assert_eq!(evaluate("h:qos | fn:filter(h:qos, 'like', '2*')", &qos1), Element::Unresolved);
    }

    #[test]
    fn like_matches_whole_values() {
        assert!(like("sensor-12", "sensor-*"));
        assert!(like("sensor-12", "*-1?"));
        assert!(like("", "*"));
        assert!(!like("sensor-12", "sensor"));
        assert!(!like("sensor-12", "*-1"));
        assert!(like("a*b", "a*b"));
    }

    #[test]
    fn templates_join_their_pieces() {
        let parts =
            parse_template("/t/{{ h:a }}/{{ h:b | fn:delete() }}x", "address", &|name: &str| {
                name.strip_prefix("h:").map(str::to_owned)
            })
            .unwrap();
        let resolve = |name: &String| Element::one(name.to_uppercase());
        assert_eq!(render(&parts, &resolve, |text, value| text.push_str(value)), one("/t/A/x"));
        let only_deleted = parse_template("{{ h:b | fn:delete() }}", "header", &|name: &str| {
            name.strip_prefix("h:").map(str::to_owned)
        })
        .unwrap();
        assert_eq!(
            render(&only_deleted, &resolve, |text, value| text.push_str(value)),
            Element::Deleted
        );
        let unresolved = |_: &String| Element::Unresolved;
        assert_eq!(
            render(&parts, &unresolved, |text, value| text.push_str(value)),
            Element::Unresolved
        );
    }

    #[test]
    fn malformed_expressions_are_refused_with_their_reason() {
        let header = |name: &str| name.strip_prefix("h:").map(str::to_owned);
        let refused = |text: &str| Expression::parse(text, &header).unwrap_err();
        assert_eq!(refused("x:y"), ExpressionError::Placeholder("x:y".into()));
        assert_eq!(refused("h:a | fn:default(x:y)"), ExpressionError::Placeholder("x:y".into()));
        for bad in [
            "h:a | fn:nope()",
            "h:a | fn:upper('x')",
            "h:a | fn:substring-before(h:b)",
            "h:a | fn:default('x)",
            "h:a | fn:filter('h', 'gt', '1')",
            "h:a | fn:filter(h:b, h:c, '1')",
            "h:a | fn:split('')",
            "h:a | fn:default(bare)",
            "h:a | lower()",
            "h:a | fn:lower",
            "h:a|fn:trim()|fn:trim()|fn:trim()|fn:trim()|fn:trim()|fn:trim()|fn:trim()|fn:trim()|fn:trim()|fn:trim()|fn:trim()",
        ] {
            assert!(matches!(refused(bad), ExpressionError::Invalid(_)), "{bad}");
        }
        let ten = format!("h:a{}", "|fn:trim()".repeat(MAX_FUNCTIONS));
        assert!(Expression::parse(&ten, &header).is_ok());
    }
}
