//! Bounds on everything a route or a message can make this crate do. A
//! route comes from a config file and a message from any client, so each
//! is an input that must not cost unbounded memory, time or stack.

/// Longest route text, in bytes. A real route is a line or two; 4 KiB
/// leaves room for long conditions while bounding parse time and the size
/// of the tree a fuzzer (or a typo'd config generator) can build.
pub const MAX_ROUTE_BYTES: usize = 4096;

/// Deepest nesting of parentheses, NOT and function calls. The parser and
/// the evaluator recurse once per level, so this bounds their stack use:
/// `((((…` from a fuzzer must be an error, not a stack overflow. Hand-written
/// conditions rarely pass 5.
pub const MAX_DEPTH: usize = 32;

/// Largest payload parsed as JSON for `$body`, in bytes; a bigger one makes
/// every `$body` reference undefined. Parsing costs time and memory
/// proportional to the payload on the publish path, once per message;
/// telemetry documents are a few KiB, and a 256 KiB one is already an
/// outlier that should be routed on its topic or properties.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// Most steps in one `$body` path (`.name`, `[index]`, `['key']`). Device
/// documents are shallow; the bound keeps a single reference cheap to
/// resolve and to print.
pub const MAX_PATH_STEPS: usize = 16;
