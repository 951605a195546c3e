//! The lexer: route text after the topic filter, as tokens that remember
//! where they start, so every error can name its column.

use crate::error::{ErrorKind, RouteError};

/// A comparison operator: `=`, `!=` (or `<>`), `<`, `<=`, `>`, `>=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TokenKind {
    /// A keyword, function name, `$body` key, `$user` name or endpoint:
    /// which one is the parser's call, since only it knows the context.
    Word,
    /// `$` and a word; the token's text includes the `$`.
    Name,
    Number(f64),
    /// A quoted string, unescaped.
    Str(String),
    Op(CompareOp),
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Dot,
    End,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token<'s> {
    pub kind: TokenKind,
    /// Byte offset in the route text.
    pub offset: usize,
    /// The token as written, for error messages.
    pub text: &'s str,
}

impl Token<'_> {
    /// The token as an error message names it.
    pub fn describe(&self) -> String {
        match self.kind {
            TokenKind::End => "the end of the route".to_owned(),
            // Already in quotes.
            TokenKind::Str(_) => self.text.to_owned(),
            _ => format!("'{}'", self.text),
        }
    }

    pub fn is_keyword(&self, keyword: &str) -> bool {
        self.kind == TokenKind::Word && self.text.eq_ignore_ascii_case(keyword)
    }
}

pub(crate) fn is_word_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

/// `-` is allowed inside words because the language has no arithmetic, and
/// user property names and endpoint names often contain it (`x-site`).
pub(crate) fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Whether `s` can be written as a bare word (else it needs quotes).
pub(crate) fn is_word(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(is_word_start) && chars.all(is_word_char)
}

pub(crate) struct Lexer<'s> {
    route: &'s str,
    text: &'s str,
    pos: usize,
}

impl<'s> Lexer<'s> {
    /// Lexes `text` from byte offset `pos`, which must be a char boundary.
    pub fn new(route: &'s str, text: &'s str, pos: usize) -> Lexer<'s> {
        Lexer { route, text, pos }
    }

    pub fn next_token(&mut self) -> Result<Token<'s>, RouteError> {
        let rest = &self.text[self.pos..];
        let start = self.pos + (rest.len() - rest.trim_start().len());
        let mut chars = self.text[start..].chars();
        let (first, second) = (chars.next(), chars.next());
        let Some(first) = first else {
            self.pos = start;
            return Ok(Token { kind: TokenKind::End, offset: start, text: "" });
        };
        let (kind, len) = match (first, second) {
            ('(', _) => (TokenKind::LParen, 1),
            (')', _) => (TokenKind::RParen, 1),
            ('[', _) => (TokenKind::LBracket, 1),
            (']', _) => (TokenKind::RBracket, 1),
            (',', _) => (TokenKind::Comma, 1),
            ('.', _) => (TokenKind::Dot, 1),
            ('=', _) => (TokenKind::Op(CompareOp::Eq), 1),
            ('!', Some('=')) | ('<', Some('>')) => (TokenKind::Op(CompareOp::Ne), 2),
            ('<', Some('=')) => (TokenKind::Op(CompareOp::Le), 2),
            ('<', _) => (TokenKind::Op(CompareOp::Lt), 1),
            ('>', Some('=')) => (TokenKind::Op(CompareOp::Ge), 2),
            ('>', _) => (TokenKind::Op(CompareOp::Gt), 1),
            ('\'' | '"', _) => self.string(start, first)?,
            ('$', _) => {
                let len = 1 + self.word_len(start + 1);
                if len == 1 {
                    return Err(self.error(start, ErrorKind::MissingName));
                }
                (TokenKind::Name, len)
            }
            ('-', Some(c)) | (c, _) if c.is_ascii_digit() => self.number(start)?,
            (c, _) if is_word_start(c) => (TokenKind::Word, self.word_len(start)),
            (c, _) => return Err(self.error(start, ErrorKind::UnexpectedChar(c))),
        };
        self.pos = start + len;
        Ok(Token { kind, offset: start, text: &self.text[start..self.pos] })
    }

    fn word_len(&self, from: usize) -> usize {
        let rest = &self.text[from..];
        rest.find(|c| !is_word_char(c)).unwrap_or(rest.len())
    }

    /// A quote inside a string is written twice (`'it''s'`), as in SQL:
    /// one rule for both quote characters, and no backslash that TOML
    /// strings would also want escaped.
    fn string(&self, start: usize, quote: char) -> Result<(TokenKind, usize), RouteError> {
        let mut value = String::new();
        let mut chars = self.text[start + 1..].char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c != quote {
                value.push(c);
            } else if chars.next_if(|&(_, next)| next == quote).is_some() {
                value.push(quote);
            } else {
                return Ok((TokenKind::Str(value), 1 + i + 1));
            }
        }
        Err(self.error(start, ErrorKind::UnterminatedString { quote }))
    }

    /// Takes everything that could belong to a number (so `1.2.3` and
    /// `12abc` are one bad number, not a number and something else), then
    /// checks it is `-? digits (. digits)? ([eE] [+-]? digits)?`.
    fn number(&self, start: usize) -> Result<(TokenKind, usize), RouteError> {
        let rest = &self.text[start..];
        let mut len = 0;
        let mut prev = '\0';
        for (i, c) in rest.char_indices() {
            let sign = (c == '-' || c == '+') && (i == 0 || matches!(prev, 'e' | 'E'));
            if !(c.is_ascii_alphanumeric() || c == '.' || c == '_' || sign) {
                break;
            }
            len = i + c.len_utf8();
            prev = c;
        }
        let text = &rest[..len];
        let value = is_number(text).then(|| text.parse::<f64>().ok()).flatten();
        match value {
            // Infinity would not print back as a number.
            Some(n) if n.is_finite() => Ok((TokenKind::Number(n), len)),
            _ => Err(self.error(start, ErrorKind::BadNumber(text.to_owned()))),
        }
    }

    fn error(&self, offset: usize, kind: ErrorKind) -> RouteError {
        RouteError::at(self.route, self.text, offset, kind)
    }
}

fn is_number(s: &str) -> bool {
    fn digits(s: &str) -> (&str, bool) {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        (&s[end..], end > 0)
    }
    let (rest, some) = digits(s.strip_prefix('-').unwrap_or(s));
    if !some {
        return false;
    }
    let rest = match rest.strip_prefix('.') {
        Some(fraction) => match digits(fraction) {
            (rest, true) => rest,
            _ => return false,
        },
        None => rest,
    };
    match rest.strip_prefix(['e', 'E']) {
        Some(exponent) => {
            let (rest, some) = digits(exponent.strip_prefix(['+', '-']).unwrap_or(exponent));
            some && rest.is_empty()
        }
        None => rest.is_empty(),
    }
}
