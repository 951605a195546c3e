//! `Condition`: the WHERE part of a route as a tree, its parser, and its
//! canonical text.
//!
//! Everything the evaluator needs is decided here, once, at load: names
//! become `Reference` variants, `$body` paths become lists of steps,
//! function names become `Function` variants whose arity is checked. The
//! publish path then only walks the tree.

use std::fmt;

use crate::error::{ErrorKind, Plural, RouteError};
pub(crate) use crate::lexer::CompareOp;
use crate::lexer::{is_word, Lexer, Token, TokenKind};
use crate::limits::{MAX_DEPTH, MAX_PATH_STEPS, MAX_ROUTE_BYTES};

/// A parsed WHERE condition. `Display` prints it fully parenthesised, in a
/// canonical form that parses back to an equal condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition(pub(crate) Expr);

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Null,
    Bool(bool),
    Number(f64),
    Str(Box<str>),
    Ref(Reference),
    Not(Box<Expr>),
    /// n-ary rather than nested pairs, so that `a AND b AND …` from a long
    /// route stays one level deep for the evaluator's recursion.
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Compare(CompareOp, Box<(Expr, Expr)>),
    Call(Function, Vec<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reference {
    /// `$topic`: the whole topic name.
    Topic,
    /// `$topic[i]`: level `i`, counted from 0.
    TopicLevel(usize),
    User(Box<str>),
    ContentType,
    Qos,
    ClientId,
    Username,
    Body(Vec<Step>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    Key(Box<str>),
    Index(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Function {
    IsDefined,
    StartsWith,
    EndsWith,
    Contains,
    Lower,
    Upper,
    Length,
}

impl Function {
    const ALL: [Function; 7] = [
        Function::IsDefined,
        Function::StartsWith,
        Function::EndsWith,
        Function::Contains,
        Function::Lower,
        Function::Upper,
        Function::Length,
    ];

    fn name(self) -> &'static str {
        match self {
            Function::IsDefined => "IS_DEFINED",
            Function::StartsWith => "STARTS_WITH",
            Function::EndsWith => "ENDS_WITH",
            Function::Contains => "CONTAINS",
            Function::Lower => "LOWER",
            Function::Upper => "UPPER",
            Function::Length => "LENGTH",
        }
    }

    fn arity(self) -> usize {
        match self {
            Function::StartsWith | Function::EndsWith | Function::Contains => 2,
            _ => 1,
        }
    }
}

impl Condition {
    /// Parses a condition on its own (the text after WHERE); `route` names
    /// it in errors.
    pub fn parse(route: &str, text: &str) -> Result<Condition, RouteError> {
        if text.len() > MAX_ROUTE_BYTES {
            let kind = ErrorKind::TooLong { len: text.len(), max: MAX_ROUTE_BYTES };
            return Err(RouteError::at(route, text, 0, kind));
        }
        let mut parser = Parser::new(route, text, 0)?;
        let expr = parser.condition()?;
        match parser.peek() {
            Token { kind: TokenKind::End, .. } => Ok(Condition(expr)),
            token => {
                let kind = ErrorKind::Expected {
                    expected: "AND, OR or the end of the condition",
                    found: token.describe(),
                };
                Err(parser.error(token.offset, kind))
            }
        }
    }
}

/// A recursive-descent parser with one token of lookahead. `Route::parse`
/// drives it past the topic filter; `Condition::parse` over a bare
/// condition.
pub(crate) struct Parser<'s> {
    route: &'s str,
    text: &'s str,
    lexer: Lexer<'s>,
    next: Token<'s>,
    /// The last token taken, for "expected a value after '>'".
    prev: Option<&'s str>,
    depth: usize,
}

impl<'s> Parser<'s> {
    pub fn new(route: &'s str, text: &'s str, offset: usize) -> Result<Parser<'s>, RouteError> {
        let mut lexer = Lexer::new(route, text, offset);
        let next = lexer.next_token()?;
        Ok(Parser { route, text, lexer, next, prev: None, depth: 0 })
    }

    pub fn peek(&self) -> &Token<'s> {
        &self.next
    }

    pub fn advance(&mut self) -> Result<Token<'s>, RouteError> {
        let next = self.lexer.next_token()?;
        let taken = std::mem::replace(&mut self.next, next);
        self.prev = Some(taken.text);
        Ok(taken)
    }

    pub fn error(&self, offset: usize, kind: ErrorKind) -> RouteError {
        RouteError::at(self.route, self.text, offset, kind)
    }

    /// condition = and { "OR" and }
    pub fn condition(&mut self) -> Result<Expr, RouteError> {
        self.list("OR", Self::and, Expr::Or)
    }

    /// and = not { "AND" not }
    fn and(&mut self) -> Result<Expr, RouteError> {
        self.list("AND", Self::not, Expr::And)
    }

    fn list(
        &mut self,
        keyword: &str,
        item: fn(&mut Self) -> Result<Expr, RouteError>,
        build: fn(Vec<Expr>) -> Expr,
    ) -> Result<Expr, RouteError> {
        let first = item(self)?;
        if !self.next.is_keyword(keyword) {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.next.is_keyword(keyword) {
            self.advance()?;
            items.push(item(self)?);
        }
        Ok(build(items))
    }

    /// not = "NOT" not | comparison
    fn not(&mut self) -> Result<Expr, RouteError> {
        if !self.next.is_keyword("NOT") {
            return self.comparison();
        }
        let offset = self.advance()?.offset;
        self.nested(offset, |p| Ok(Expr::Not(Box::new(p.not()?))))
    }

    /// comparison = operand [ op operand ]
    fn comparison(&mut self) -> Result<Expr, RouteError> {
        let left = self.operand()?;
        let TokenKind::Op(op) = self.next.kind else {
            return Ok(left);
        };
        self.advance()?;
        let right = self.operand()?;
        Ok(Expr::Compare(op, Box::new((left, right))))
    }

    /// operand = number | string | true | false | null | reference | call
    ///         | "(" condition ")"
    fn operand(&mut self) -> Result<Expr, RouteError> {
        let after = self.prev.map_or("the start of the condition".to_owned(), |t| format!("'{t}'"));
        let token = self.next.clone();
        let expected_value = |p: &Self| {
            let kind = ErrorKind::ExpectedValue { after: after.clone(), found: token.describe() };
            Err(p.error(token.offset, kind))
        };
        match token.kind {
            TokenKind::Number(n) => {
                self.advance()?;
                Ok(Expr::Number(n))
            }
            TokenKind::Str(ref s) => {
                self.advance()?;
                Ok(Expr::Str(s.as_str().into()))
            }
            TokenKind::Name => {
                self.advance()?;
                Ok(Expr::Ref(self.reference(&token)?))
            }
            TokenKind::LParen => {
                self.advance()?;
                let expr = self.nested(token.offset, Self::condition)?;
                self.expect(TokenKind::RParen, "')'")?;
                Ok(expr)
            }
            TokenKind::Word => {
                for (word, literal) in
                    [("true", Expr::Bool(true)), ("false", Expr::Bool(false)), ("null", Expr::Null)]
                {
                    if token.is_keyword(word) {
                        self.advance()?;
                        return Ok(literal);
                    }
                }
                if self.word_is_call()? {
                    self.advance()?;
                    return self.call(&token);
                }
                expected_value(self)
            }
            _ => expected_value(self),
        }
    }

    /// Whether the token after the next one is `(`: a word is a function
    /// call only then, so that a misspelled one is reported as an unknown
    /// function and a stray word as a missing value.
    fn word_is_call(&self) -> Result<bool, RouteError> {
        let mut lexer = Lexer::new(self.route, self.text, self.next.offset + self.next.text.len());
        Ok(lexer.next_token()?.kind == TokenKind::LParen)
    }

    /// call = function "(" [ condition { "," condition } ] ")"
    fn call(&mut self, name: &Token<'s>) -> Result<Expr, RouteError> {
        let Some(function) = Function::ALL.into_iter().find(|f| name.is_keyword(f.name())) else {
            return Err(self.error(name.offset, ErrorKind::UnknownFunction(name.text.to_owned())));
        };
        self.advance()?; // (
        let args = self.nested(name.offset, |p| {
            let mut args = Vec::new();
            if p.next.kind != TokenKind::RParen {
                args.push(p.condition()?);
                while p.next.kind == TokenKind::Comma {
                    p.advance()?;
                    args.push(p.condition()?);
                }
            }
            Ok(args)
        })?;
        self.expect(TokenKind::RParen, "',' or ')'")?;
        if args.len() != function.arity() {
            let kind = ErrorKind::Arity {
                function: function.name(),
                expected: Plural(function.arity()),
                found: Plural(args.len()),
            };
            return Err(self.error(name.offset, kind));
        }
        Ok(Expr::Call(function, args))
    }

    /// reference = "$body" { step } | "$topic" [ "[" index "]" ]
    ///           | "$user" step | "$contentType" | "$qos" | "$clientId" | "$username"
    fn reference(&mut self, name: &Token<'s>) -> Result<Reference, RouteError> {
        let word = &name.text[1..];
        let is = |s: &str| word.eq_ignore_ascii_case(s);
        Ok(if is("body") {
            let mut steps = Vec::new();
            while matches!(self.next.kind, TokenKind::Dot | TokenKind::LBracket) {
                if steps.len() == MAX_PATH_STEPS {
                    let kind = ErrorKind::PathTooLong { max: MAX_PATH_STEPS };
                    return Err(self.error(self.next.offset, kind));
                }
                steps.push(self.step()?);
            }
            Reference::Body(steps)
        } else if is("topic") {
            if self.next.kind != TokenKind::LBracket {
                return Ok(Reference::Topic);
            }
            self.advance()?;
            let level = self.index("an index (0, 1, …)")?;
            self.expect(TokenKind::RBracket, "']'")?;
            Reference::TopicLevel(level)
        } else if is("user") {
            // A user property has a name, never an index.
            let step = match self.next.kind {
                TokenKind::Dot | TokenKind::LBracket => Some(self.step()?),
                _ => None,
            };
            match step {
                Some(Step::Key(key)) => Reference::User(key),
                _ => return Err(self.error(name.offset, ErrorKind::MissingProperty("user"))),
            }
        } else if is("contentType") {
            Reference::ContentType
        } else if is("qos") {
            Reference::Qos
        } else if is("clientId") {
            Reference::ClientId
        } else if is("username") {
            Reference::Username
        } else {
            return Err(self.error(name.offset, ErrorKind::UnknownName(word.to_owned())));
        })
    }

    /// step = "." word | "[" index "]" | "[" string "]"
    fn step(&mut self) -> Result<Step, RouteError> {
        if self.advance()?.kind == TokenKind::Dot {
            let token = self.advance()?;
            if token.kind == TokenKind::Word {
                return Ok(Step::Key(token.text.into()));
            }
            let expected = "a name after '.' (quote other keys: ['key'])";
            let kind = ErrorKind::Expected { expected, found: token.describe() };
            return Err(self.error(token.offset, kind));
        }
        let step = match &self.next.kind {
            TokenKind::Str(key) => {
                let key = key.as_str().into();
                self.advance()?;
                Step::Key(key)
            }
            _ => Step::Index(self.index("an index (0, 1, …) or a quoted key")?),
        };
        self.expect(TokenKind::RBracket, "']'")?;
        Ok(step)
    }

    fn index(&mut self, expected: &'static str) -> Result<usize, RouteError> {
        let token = self.advance()?;
        match token.kind {
            TokenKind::Number(_) if token.text.bytes().all(|b| b.is_ascii_digit()) => {
                token.text.parse().map_err(|_| {
                    self.error(token.offset, ErrorKind::IndexTooLarge(token.text.to_owned()))
                })
            }
            _ => {
                let kind = ErrorKind::Expected { expected, found: token.describe() };
                Err(self.error(token.offset, kind))
            }
        }
    }

    fn expect(&mut self, kind: TokenKind, expected: &'static str) -> Result<(), RouteError> {
        if self.next.kind == kind {
            self.advance()?;
            return Ok(());
        }
        let kind = ErrorKind::Expected { expected, found: self.next.describe() };
        Err(self.error(self.next.offset, kind))
    }

    /// Runs `parse` one level deeper, refusing to pass `MAX_DEPTH`.
    fn nested<T>(
        &mut self,
        offset: usize,
        parse: impl FnOnce(&mut Self) -> Result<T, RouteError>,
    ) -> Result<T, RouteError> {
        if self.depth == MAX_DEPTH {
            return Err(self.error(offset, ErrorKind::TooDeep { max: MAX_DEPTH }));
        }
        self.depth += 1;
        let result = parse(self);
        self.depth -= 1;
        result
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, items: &[Expr], separator: &str| {
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(separator)?;
                }
                item.fmt(f)?;
            }
            Ok(())
        };
        match self {
            Expr::Null => f.write_str("null"),
            Expr::Bool(b) => write!(f, "{b}"),
            // Exponent form at the extremes, so that 1e300 does not print as
            // 301 digits; both forms print the shortest text that reads
            // back as the same f64.
            Expr::Number(n) if *n != 0.0 && !(1e-5..1e16).contains(&n.abs()) => write!(f, "{n:e}"),
            Expr::Number(n) => write!(f, "{n}"),
            Expr::Str(s) => quoted(f, s),
            Expr::Ref(r) => r.fmt(f),
            Expr::Not(e) => write!(f, "(NOT {e})"),
            Expr::And(items) | Expr::Or(items) => {
                f.write_str("(")?;
                list(f, items, if matches!(self, Expr::And(_)) { " AND " } else { " OR " })?;
                f.write_str(")")
            }
            Expr::Compare(op, pair) => write!(f, "({} {op} {})", pair.0, pair.1),
            Expr::Call(function, args) => {
                write!(f, "{}(", function.name())?;
                list(f, args, ", ")?;
                f.write_str(")")
            }
        }
    }
}

impl fmt::Display for CompareOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CompareOp::Eq => "=",
            CompareOp::Ne => "!=",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
        })
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reference::Topic => f.write_str("$topic"),
            Reference::TopicLevel(i) => write!(f, "$topic[{i}]"),
            Reference::User(name) => {
                f.write_str("$user")?;
                key(f, name)
            }
            Reference::ContentType => f.write_str("$contentType"),
            Reference::Qos => f.write_str("$qos"),
            Reference::ClientId => f.write_str("$clientId"),
            Reference::Username => f.write_str("$username"),
            Reference::Body(steps) => {
                f.write_str("$body")?;
                steps.iter().try_for_each(|step| match step {
                    Step::Key(name) => key(f, name),
                    Step::Index(i) => write!(f, "[{i}]"),
                })
            }
        }
    }
}

fn key(f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
    if is_word(name) {
        write!(f, ".{name}")
    } else {
        f.write_str("[")?;
        quoted(f, name)?;
        f.write_str("]")
    }
}

fn quoted(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    write!(f, "'{}'", s.replace('\'', "''"))
}
