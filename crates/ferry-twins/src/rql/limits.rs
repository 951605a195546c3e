//! Bounds on what one RQL text may ask of the server.
//!
//! Ditto itself has none beyond the HTTP layer's URI length; Ferry parses
//! and evaluates RQL on the data plane (every search candidate, every event
//! of every filtering subscriber), so each dimension that costs time or
//! memory is capped here, and exceeding a cap is a 400 naming it, never a
//! stack overflow or a stalled worker.

/// Longest filter, condition or option text. Larger than any URI a proxy
/// lets through (8 KiB is common) with room for `condition` headers and
/// WebSocket filters, and small enough that parsing is a few microseconds.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;

/// Deepest nesting of `and`/`or`/`not`. The parser recurses once per
/// level, and so does the evaluator; 64 keeps both far from the stack's
/// end on the smallest thread stacks while no real filter needs more
/// than a handful.
pub const MAX_DEPTH: usize = 64;

/// Most operators in one filter. Evaluation visits every node per thing,
/// times the features a `features/*` path fans out to, so this bounds the
/// per-thing cost.
pub const MAX_NODES: usize = 4096;

/// Most values in one `in(…)`. Each candidate value is compared with each
/// of them; 10 000 ids still fit the input limit and cover "these devices"
/// lists that dashboards send.
pub const MAX_IN_VALUES: usize = 10_000;

/// Most entries in one `sort(…)`. Each is a column in the store's ORDER BY
/// and in every cursor; no index serves more than a few.
pub const MAX_SORT_FIELDS: usize = 32;

/// Deepest JSON nesting the evaluator descends into when it flattens
/// arrays within arrays; serde_json refuses deeper documents by default,
/// so this only guards values built in code.
pub const MAX_VALUE_DEPTH: usize = 128;

/// Ditto's `limits.things-search.default-page-size` (ditto-limits.conf).
pub const DEFAULT_PAGE_SIZE: u32 = 25;

/// Ditto's `limits.things-search.max-page-size` (ditto-limits.conf): the
/// largest `size(n)` and `limit(_,n)`.
pub const MAX_PAGE_SIZE: u32 = 200;
