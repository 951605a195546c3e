//! Request parameters as Ditto's gateway reads them: `name=value` pairs in
//! order, repeated names kept (`parameterList`).
//!
//! A query string and a form body differ in one byte. In a form body
//! (`application/x-www-form-urlencoded`) `+` is a space; in a query string
//! pekko-http keeps `+` as `+` (RFC 3986 gives it no meaning there), which
//! is what lets Ditto's documented `option=sort(+thingId)` work unescaped.

/// What `+` stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plus {
    /// In a query string: itself.
    Literal,
    /// In a form body: a space.
    Space,
}

/// The pairs of `text` (a query string or a form body), decoded: `%XX` is
/// a byte, a `%` not followed by two hex digits stays as it is, and bytes
/// that are not UTF-8 become U+FFFD.
pub(crate) fn pairs(text: &[u8], plus: Plus) -> Vec<(String, String)> {
    text.split(|&b| b == b'&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let mut parts = pair.splitn(2, |&b| b == b'=');
            let name = decode(parts.next().unwrap_or_default(), plus);
            let value = decode(parts.next().unwrap_or_default(), plus);
            (name, value)
        })
        .collect()
}

/// A query string or form body, each name with its values in order.
pub(super) struct Parameters(pub(super) Vec<(String, String)>);

impl Parameters {
    pub(super) fn parse(text: &[u8], plus: Plus) -> Parameters {
        Parameters(pairs(text, plus))
    }

    fn all(&self, name: &str) -> Vec<&str> {
        self.0.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str()).collect()
    }

    /// Ditto's `calculateFilter`: `and(…)` of every `filter` given.
    pub(super) fn filter(&self) -> Option<String> {
        let filters = self.all("filter");
        (!filters.is_empty()).then(|| format!("and({})", filters.join(",")))
    }

    /// `option` and `fields`: every value given, joined with `,`.
    pub(super) fn joined(&self, name: &str) -> Option<String> {
        let values = self.all(name);
        (!values.is_empty()).then(|| values.join(","))
    }

    /// Ditto's `calculateNamespaces`: `None` when none is given.
    pub(super) fn namespaces(&self) -> Option<Vec<String>> {
        let given = self.all("namespaces");
        (!given.is_empty()).then(|| {
            given
                .iter()
                .flat_map(|text| text.split(','))
                .filter(|namespace| !namespace.is_empty())
                .map(str::to_owned)
                .collect()
        })
    }
}

fn decode(text: &[u8], plus: Plus) -> String {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let escaped = (text[i] == b'%')
            .then(|| Some(hex(*text.get(i + 1)?)? << 4 | hex(*text.get(i + 2)?)?))
            .flatten();
        match (text[i], escaped) {
            (_, Some(byte)) => {
                out.push(byte);
                i += 2;
            }
            (b'+', None) if plus == Plus::Space => out.push(b' '),
            (byte, None) => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(digit: u8) -> Option<u8> {
    (digit as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plus_is_itself_in_a_query_and_a_space_in_a_form() {
        let query =
            pairs(b"option=sort(+thingId)&filter=eq(a,%22x%2By%22)&bad=%zz%4", Plus::Literal);
        assert_eq!(
            query,
            [
                ("option".to_owned(), "sort(+thingId)".to_owned()),
                ("filter".to_owned(), "eq(a,\"x+y\")".to_owned()),
                ("bad".to_owned(), "%zz%4".to_owned()),
            ]
        );
        let form = pairs(b"filter=eq(a,%22x+y%22)&&flag", Plus::Space);
        assert_eq!(
            form,
            [("filter".to_owned(), "eq(a,\"x y\")".to_owned()), ("flag".to_owned(), String::new())]
        );
    }
}
