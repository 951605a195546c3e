//! `like` patterns: `*` for any run of characters, `?` for one.
//!
//! Ditto turns the pattern into a Java regex (`LikeHelper`): everything
//! else is quoted, runs of `*` collapse, and the whole value must match.
//! There is no escape for a literal `*` or `?`. Java's `.` does not match
//! line terminators, so neither wildcard does here. `ilike` is Java's
//! `CASE_INSENSITIVE`, which folds US-ASCII only; Ditto's search hands the
//! same flag to MongoDB, whose regexes fold Unicode: [`CaseFold`] is the
//! difference.

use super::field::is_line_terminator;

/// A compiled `like`/`ilike` pattern.
#[derive(Debug, Clone)]
pub struct LikePattern {
    text: String,
    ignore_case: bool,
    tokens: Vec<Token>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Char(char),
    One,
    Many,
}

/// How `ilike` compares letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseFold {
    /// Java's `Pattern.CASE_INSENSITIVE`: `a`–`z` only.
    Ascii,
    /// MongoDB's `i` option: every letter.
    Unicode,
}

impl PartialEq for LikePattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text && self.ignore_case == other.ignore_case
    }
}

impl LikePattern {
    pub fn new(text: impl Into<String>, ignore_case: bool) -> Self {
        let text = text.into();
        let mut tokens: Vec<Token> = Vec::with_capacity(text.len());
        for c in text.chars() {
            let token = match c {
                '*' if tokens.last() == Some(&Token::Many) => continue,
                '*' => Token::Many,
                '?' => Token::One,
                c => Token::Char(c),
            };
            tokens.push(token);
        }
        LikePattern { text, ignore_case, tokens }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn ignores_case(&self) -> bool {
        self.ignore_case
    }

    /// Whether all of `value` matches. Allocates only when `value` holds a
    /// line terminator, which the wildcards must not cross.
    pub fn matches(&self, value: &str, fold: CaseFold) -> bool {
        if value.contains(is_line_terminator) {
            self.matches_across_lines(value, fold)
        } else {
            self.matches_one_line(value, fold)
        }
    }

    fn token_matches(&self, token: Token, c: char, fold: CaseFold) -> bool {
        match token {
            Token::Many => false,
            Token::One => !is_line_terminator(c),
            Token::Char(t) if t == c => true,
            Token::Char(t) if self.ignore_case => match fold {
                CaseFold::Ascii => t.eq_ignore_ascii_case(&c),
                CaseFold::Unicode => t.to_lowercase().eq(c.to_lowercase()),
            },
            Token::Char(_) => false,
        }
    }

    /// Wildcard matching with one backtrack point (the last `*`): exact
    /// when `*` may absorb any character, which holds without line
    /// terminators in the value.
    fn matches_one_line(&self, value: &str, fold: CaseFold) -> bool {
        let tokens = &self.tokens;
        let (mut p, mut i) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while i < value.len() {
            if tokens.get(p) == Some(&Token::Many) {
                star = Some((p + 1, i));
                p += 1;
                continue;
            }
            let c = next_char(value, i);
            if let Some(&token) = tokens.get(p) {
                if self.token_matches(token, c, fold) {
                    p += 1;
                    i += c.len_utf8();
                    continue;
                }
            }
            let Some((after_star, star_end)) = star else {
                return false;
            };
            let absorbed = next_char(value, star_end);
            let resume = star_end + absorbed.len_utf8();
            star = Some((after_star, resume));
            p = after_star;
            i = resume;
        }
        tokens[p..].iter().all(|t| *t == Token::Many)
    }

    /// The set of pattern positions reachable after each character: exact
    /// for wildcards that stop at line terminators.
    fn matches_across_lines(&self, value: &str, fold: CaseFold) -> bool {
        let tokens = &self.tokens;
        let mut states = vec![false; tokens.len() + 1];
        let mut next = vec![false; tokens.len() + 1];
        states[0] = true;
        close_over_stars(tokens, &mut states);
        for c in value.chars() {
            next.iter_mut().for_each(|s| *s = false);
            for (p, token) in tokens.iter().enumerate() {
                if !states[p] {
                    continue;
                }
                match *token {
                    Token::Many if !is_line_terminator(c) => next[p] = true,
                    Token::Many => {}
                    token if self.token_matches(token, c, fold) => next[p + 1] = true,
                    _ => {}
                }
            }
            close_over_stars(tokens, &mut next);
            std::mem::swap(&mut states, &mut next);
        }
        states[tokens.len()]
    }
}

/// A `*` may match nothing: a state before it is also a state after it.
fn close_over_stars(tokens: &[Token], states: &mut [bool]) {
    for p in 0..tokens.len() {
        if states[p] && tokens[p] == Token::Many {
            states[p + 1] = true;
        }
    }
}

fn next_char(value: &str, at: usize) -> char {
    value[at..].chars().next().expect("callers stay inside the value")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn like(pattern: &str, value: &str) -> bool {
        LikePattern::new(pattern, false).matches(value, CaseFold::Ascii)
    }

    #[test]
    fn wildcards_match_as_dittos_regex_does() {
        let cases = [
            ("*known-chars-at-end", "some known-chars-at-end", true),
            ("known-chars-at-start*", "known-chars-at-start and more", true),
            ("*between*", "in between here", true),
            ("just-som?-char?-unkn?wn", "just-some-chars-unknown", true),
            ("Th?ng", "Thing", true),
            ("Th?ng", "Thng", false),
            ("abc", "abcd", false),
            ("abc", "xabc", false),
            ("*", "", true),
            ("**a**", "bab", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("a.c", "abc", false),
            ("a(b", "a(b", true),
            ("?", "é", true),
            ("?", "😀", true),
            ("a*", "a\nb", false),
            ("a?b", "a\nb", false),
            ("a\n*", "a\nbc", true),
            ("*\n*b", "a\nc\nb", false),
            ("*c\n*", "abc\nb", true),
            ("*c\n*", "ab\nc\nb", false),
        ];
        for (pattern, value, expected) in cases {
            assert_eq!(like(pattern, value), expected, "like({pattern:?}) on {value:?}");
        }
    }

    #[test]
    fn ilike_folds_ascii_for_things_and_unicode_for_search() {
        let pattern = LikePattern::new("*KNOWN-chars-ÄT*", true);
        assert!(pattern.matches("some known-CHARS-ÄT", CaseFold::Ascii));
        assert!(!pattern.matches("some known-chars-ät", CaseFold::Ascii));
        assert!(pattern.matches("some known-chars-ät", CaseFold::Unicode));
        assert!(!LikePattern::new("ABC", false).matches("abc", CaseFold::Unicode));
    }
}
