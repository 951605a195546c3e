//! Search in the stores: an RQL filter with sort and keyset paging,
//! translated to SQL over `things` and `thing_index` (`search/sql.rs`), and
//! the cursor that carries a page's end to the next request
//! (`search/cursor.rs`).
//!
//! A search runs in the database the writes commit to, so it sees every
//! write that has been answered (read-your-writes); Ditto's search lags by
//! its index's update interval.
//!
//! # Semantics
//!
//! RQL's [`Semantics::Search`](crate::rql::Semantics::Search), as Ditto
//! asks MongoDB: types never mix, any array element may match, `ne` needs
//! the field, `in(…,null)` also matches a missing field, `features/*/…`
//! means any feature. Where the index cannot see what the document holds,
//! the answer differs from the in-memory evaluator: an empty array or
//! object leaves no row, so `exists` finds nothing there; `empty` cannot
//! tell `[null]` or `["", "a"]` from `null` or `""`; `ilike` folds ASCII
//! letters only (MongoDB folds all); `like`'s wildcards cross line breaks;
//! numbers are doubles.
//!
//! # Order
//!
//! Each sort entry gives a thing one value: a column's value, or for an
//! indexed field the least of its values ascending and the greatest
//! descending (MongoDB's rule for arrays). Values order by type first, then
//! within their type, as MongoDB's BSON order does:
//!
//! 1. missing and `null` (equal to each other),
//! 2. numbers, by value,
//! 3. strings, by their UTF-8 bytes,
//! 4. booleans, `false` before `true`.
//!
//! A descending entry reverses all of it (missing last). Ties are broken by
//! the thing id, ascending, when the sort does not name it (Ditto's
//! effective sort always ends with `+thingId`). [`SortKey`] holds a thing's
//! values in that order, and `after` selects what follows it strictly, so
//! paging neither repeats nor skips a thing that stays put.

pub mod cursor;
pub(crate) mod sql;

use super::ThingRecord;
use crate::rql::{Filter, SortEntry};
use serde::{Deserialize, Serialize};

pub use cursor::Cursor;
pub use sql::SEARCH_LIMIT_MAX;

/// One search: which things, in which order, from where, how many.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRequest {
    /// `None`: every thing.
    pub filter: Option<Filter>,
    /// `None`: all namespaces; `Some([])`: none.
    pub namespaces: Option<Vec<String>>,
    /// The effective sort (`SearchOptions::effective_sort`): Ditto's,
    /// ending with `+thingId`.
    pub sort: Vec<SortEntry>,
    /// Start strictly after this key, as a cursor gives it.
    pub after: Option<SortKey>,
    /// Things to return at most; capped at [`SEARCH_LIMIT_MAX`]. A page
    /// asks for one more than its size to learn whether another follows.
    pub limit: usize,
}

/// A thing a search found, with its place in the order.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub record: ThingRecord,
    pub key: SortKey,
}

/// A thing's place in a search's order: its value of each sort entry and
/// its id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SortKey {
    pub values: Vec<SortValue>,
    pub thing_id: String,
}

/// One sort value as the order compares it. Serialises as the JSON value
/// itself (a missing value as `null`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SortValue {
    /// Missing, or `null`.
    Null,
    Bool(bool),
    Number(f64),
    String(String),
}
