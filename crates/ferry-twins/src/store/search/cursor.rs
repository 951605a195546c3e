//! The cursor of a search page: where the page ended, and the query it
//! belongs to, as one opaque URL-safe string.
//!
//! As Ditto's `ThingsSearchCursor`, it holds the filter, the namespaces
//! and the effective sort, besides the last thing's sort values, so that a
//! follow-up request may send only `option=cursor(…)` and continue the
//! same query; a request that names a different filter, sort or set of
//! namespaces is refused, and so is a cursor that does not decode, with
//! Ditto's invalid-option error (400). Ditto deflates the JSON before
//! base64; Ferry's is plain base64url of compact JSON (no padding), which
//! decodes with any tool when someone needs to see what a cursor holds.
//! It is not a secret and not signed: everything in it is something the
//! caller may send anyway, and the filter is applied again.

use super::{sql, SearchRequest, SortKey, SortValue};
use crate::error::DittoError;
use crate::rql::{Filter, Scope, SearchQuery, SortEntry};
use serde::{Deserialize, Serialize};

const OPTION_INVALID: &str = "thing-search:search.option.invalid";
const CURSOR_INVALID: &str = "The option 'cursor' is not valid for the search request.";

/// Longest cursor text decoded: a filter at RQL's input limit (64 KiB)
/// with 32 sort values, in base64.
const CURSOR_BYTES_MAX: usize = 256 * 1024;

/// A decoded cursor: the query it continues and where.
#[derive(Debug, Clone, PartialEq)]
pub struct Cursor {
    pub filter: Option<Filter>,
    /// Sorted and without duplicates.
    pub namespaces: Option<Vec<String>>,
    /// The effective sort.
    pub sort: Vec<SortEntry>,
    /// The last thing of the page.
    pub key: SortKey,
}

/// The cursor's JSON: Ditto's field names, and `I` for the thing id that
/// Ditto keeps among its values.
#[derive(Serialize, Deserialize)]
struct Wire {
    #[serde(rename = "F", skip_serializing_if = "Option::is_none", default)]
    filter: Option<String>,
    #[serde(rename = "N", skip_serializing_if = "Option::is_none", default)]
    namespaces: Option<Vec<String>>,
    #[serde(rename = "S")]
    sort: String,
    #[serde(rename = "V")]
    values: Vec<SortValue>,
    #[serde(rename = "I")]
    thing_id: String,
}

/// Ditto's `InvalidOptionException` for a cursor, with why when there is
/// something to say.
pub fn invalid_cursor(description: Option<&str>) -> DittoError {
    DittoError::new(
        400,
        OPTION_INVALID,
        CURSOR_INVALID,
        description.unwrap_or("At least one provided option is invalid.").to_owned(),
    )
}

fn normalized(namespaces: Option<&[String]>) -> Option<Vec<String>> {
    namespaces.map(|namespaces| {
        let mut namespaces = namespaces.to_vec();
        namespaces.sort();
        namespaces.dedup();
        namespaces
    })
}

fn sort_text(sort: &[SortEntry]) -> String {
    sort.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

impl Cursor {
    /// The cursor after `key` in the query of `request`.
    pub fn after(request: &SearchRequest, key: SortKey) -> Cursor {
        Cursor {
            filter: request.filter.clone(),
            namespaces: normalized(request.namespaces.as_deref()),
            sort: request.sort.clone(),
            key,
        }
    }

    pub fn encode(&self) -> String {
        let wire = Wire {
            filter: self.filter.as_ref().map(ToString::to_string),
            namespaces: self.namespaces.clone(),
            sort: sort_text(&self.sort),
            values: self.key.values.clone(),
            thing_id: self.key.thing_id.clone(),
        };
        let json = serde_json::to_vec(&wire).expect("a cursor is strings, numbers and arrays");
        base64url::encode(&json)
    }

    /// Reads a cursor; anything that is not one this module wrote (bad
    /// base64, JSON, filter or sort, values that do not fit the sort) is
    /// Ditto's invalid cursor without further explanation, as Ditto
    /// offers none for a cursor it cannot decode.
    pub fn decode(text: &str) -> Result<Cursor, DittoError> {
        let invalid = || invalid_cursor(None);
        if text.len() > CURSOR_BYTES_MAX {
            return Err(invalid());
        }
        let json = base64url::decode(text).ok_or_else(invalid)?;
        let wire: Wire = serde_json::from_slice(&json).map_err(|_| invalid())?;
        let filter = wire
            .filter
            .map(|text| Filter::parse(&text, Scope::THINGS))
            .transpose()
            .map_err(|_| invalid())?;
        let sort = SearchQuery::parse(None, Some(&format!("sort({})", wire.sort)))
            .map_err(|_| invalid())?
            .options
            .sort()
            .to_vec();
        let fits = sort.len() == wire.values.len()
            && sort.iter().zip(&wire.values).all(|(entry, value)| sql::fits(entry, value));
        if !fits {
            return Err(invalid());
        }
        Ok(Cursor {
            filter,
            namespaces: normalized(wire.namespaces.as_deref()),
            sort,
            key: SortKey { values: wire.values, thing_id: wire.thing_id },
        })
    }

    /// Ditto's `checkCursorValidity`: what a follow-up request states
    /// beside the cursor must be what the cursor continues. `sort` is the
    /// request's effective sort, when it has a `sort` option.
    pub fn check(
        &self,
        filter: Option<&Filter>,
        namespaces: Option<&[String]>,
        sort: Option<&[SortEntry]>,
    ) -> Result<(), DittoError> {
        if filter.is_some_and(|filter| Some(filter) != self.filter.as_ref()) {
            return Err(invalid_cursor(Some(
                "The parameter 'filter' must not differ from the original query of the cursor.",
            )));
        }
        if sort.is_some_and(|sort| sort != self.sort.as_slice()) {
            return Err(invalid_cursor(Some(
                "The option 'sort' must not differ from the original query of the cursor.",
            )));
        }
        // Ditto takes the cursor's namespaces and ignores the request's;
        // Ferry refuses different ones rather than silently ignore them.
        if namespaces.is_some() && normalized(namespaces) != self.namespaces {
            return Err(invalid_cursor(Some(
                "The parameter 'namespaces' must not differ from the original query of the cursor.",
            )));
        }
        Ok(())
    }

    /// The search that continues after this cursor.
    pub fn request(&self, limit: usize) -> SearchRequest {
        SearchRequest {
            filter: self.filter.clone(),
            namespaces: self.namespaces.clone(),
            sort: self.sort.clone(),
            after: Some(self.key.clone()),
            limit,
        }
    }
}

/// RFC 4648 §5 base64url without padding: the cursor travels in a URL's
/// query, where `+`, `/` and `=` would need escaping.
mod base64url {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

    pub fn encode(bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
        for chunk in bytes.chunks(3) {
            let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..=chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            }
        }
        out
    }

    pub fn decode(text: &str) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(text.len() * 3 / 4);
        let digits: Vec<u32> = text
            .bytes()
            .map(|c| ALPHABET.iter().position(|&a| a == c).map(|p| p as u32))
            .collect::<Option<_>>()?;
        for chunk in digits.chunks(4) {
            if chunk.len() == 1 {
                return None;
            }
            let n = chunk.iter().enumerate().fold(0, |n, (i, d)| n | d << (18 - 6 * i));
            for i in 0..chunk.len() - 1 {
                out.push((n >> (16 - 8 * i)) as u8);
            }
        }
        Some(out)
    }

    #[cfg(test)]
    #[test]
    fn round_trips_rfc_4648_vectors() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
        ] {
            assert_eq!(encode(plain.as_bytes()), coded);
            assert_eq!(decode(coded).unwrap(), plain.as_bytes());
        }
        assert_eq!(encode(&[0xfb, 0xff]), "-_8");
        assert_eq!(decode("Z"), None);
        assert_eq!(decode("Zm9v+"), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(filter: &str, options: &str) -> SearchRequest {
        let query = SearchQuery::parse(Some(filter), Some(options)).unwrap();
        SearchRequest {
            filter: query.filter,
            namespaces: Some(vec!["b".into(), "a".into()]),
            sort: query.options.effective_sort(),
            after: None,
            limit: 25,
        }
    }

    #[test]
    fn carries_the_query_and_refuses_another() {
        let request = request(r#"like(attributes/n,"a*")"#, "sort(-attributes/n)");
        let key = SortKey {
            values: vec![SortValue::Number(2.5), SortValue::String("a:b".into())],
            thing_id: "a:b".into(),
        };
        let cursor = Cursor::after(&request, key.clone());
        let text = cursor.encode();
        assert!(text.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        let decoded = Cursor::decode(&text).unwrap();
        assert_eq!(decoded, cursor);
        assert_eq!(decoded.request(10).after, Some(key));
        assert_eq!(decoded.namespaces, Some(vec!["a".into(), "b".into()]));

        decoded
            .check(request.filter.as_ref(), Some(&["a".into(), "b".into()]), Some(&request.sort))
            .unwrap();
        decoded.check(None, None, None).unwrap();
        let other = Filter::parse("exists(attributes/n)", Scope::THINGS).unwrap();
        let error = decoded.check(Some(&other), None, None).unwrap_err();
        assert_eq!((error.status, error.error), (400, OPTION_INVALID));
        assert_eq!(error.message, CURSOR_INVALID);
        assert!(decoded.check(None, None, Some(&request.sort[1..])).is_err());
        assert!(decoded.check(None, Some(&["a".into()]), None).is_err());
    }

    #[test]
    fn refuses_what_it_did_not_write() {
        let good = Cursor::after(
            &request("exists(thingId)", "sort(+_revision)"),
            SortKey {
                values: vec![SortValue::Number(1.0), SortValue::String("a:b".into())],
                thing_id: "a:b".into(),
            },
        );
        let wrong_type = Cursor {
            key: SortKey {
                values: vec![SortValue::String("x".into()), SortValue::Null],
                thing_id: "a:b".into(),
            },
            ..good.clone()
        };
        let too_few = Cursor { key: SortKey { values: vec![], thing_id: "a:b".into() }, ..good };
        let json = |s: &str| base64url::encode(s.as_bytes());
        for text in [
            "not base64!".to_owned(),
            json("{}"),
            json(r#"{"S":"+nope","V":[null],"I":"a:b"}"#),
            json(r#"{"F":"eq(","S":"+thingId","V":["a:b"],"I":"a:b"}"#),
            wrong_type.encode(),
            too_few.encode(),
        ] {
            let error = Cursor::decode(&text).unwrap_err();
            assert_eq!(
                (error.status, error.error, error.message.as_str()),
                (400, OPTION_INVALID, CURSOR_INVALID),
                "{text}"
            );
        }
    }
}
