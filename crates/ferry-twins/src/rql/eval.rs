//! Evaluating a filter against a thing's JSON.
//!
//! Ditto evaluates RQL in two places that disagree, and Ferry keeps both
//! behaviours behind [`Semantics`]:
//!
//! * [`Semantics::Things`] is Ditto's in-memory evaluator
//!   (`ThingPredicateVisitor` and `ThingPredicatePredicateVisitor` in
//!   `rql/query/things`), used for `condition=` and for event filters.
//! * [`Semantics::Search`] is what Ditto's search asks of MongoDB
//!   (`CreateBsonPredicateVisitor`, `GetFilterBsonVisitor`,
//!   `GetEmptyBsonVisitor`), for stores that evaluate candidates in memory
//!   and as the reference their SQL must agree with.
//!
//! Evaluation allocates nothing per thing except for `like` on values
//! that hold a line break.

use super::ast::{CompareOp, Filter, Value};
use super::field::{FeaturePart, Field, FieldKind};
use super::java_text::{big_decimal_text, double_text, long_text};
use super::like::{CaseFold, LikePattern};
use super::limits::MAX_VALUE_DEPTH;
use serde_json::Value as Json;
use std::cmp::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

/// Which of Ditto's evaluators to agree with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Semantics {
    /// Ditto's search (MongoDB): types never mix, `ne` needs the field,
    /// `features/*` means any feature, `ilike` folds all letters.
    Search,
    /// Ditto's `condition=` and event filters: numbers and numeric strings
    /// compare as numbers, other mixed types by their Java texts, `ne`
    /// matches a missing field, `*` is a feature id like any other,
    /// `ilike` folds ASCII only.
    Things,
}

/// Resolves placeholders (`time:now` as a value, `topic:action` as a
/// field of an event filter) to their text.
pub trait Placeholders {
    /// The value of `prefix:name`, or `None` when nothing supports it
    /// (Ditto then compares with `null`).
    fn resolve(&self, prefix: &str, name: &str) -> Option<&str>;
}

/// No placeholders: every placeholder value is `null`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPlaceholders;

impl Placeholders for NoPlaceholders {
    fn resolve(&self, _prefix: &str, _name: &str) -> Option<&str> {
        None
    }
}

/// `time:now` (ISO-8601, as Java's `Instant.toString`) and
/// `time:now_epoch_millis`, fixed at one instant so that one request sees
/// one time. Ditto's offsets and truncations (`time:now-1h`,
/// `time:now[d]`) are not supported and resolve to nothing.
#[derive(Debug, Clone)]
pub struct TimePlaceholders {
    now: String,
    now_epoch_millis: String,
}

impl TimePlaceholders {
    pub fn at(time: SystemTime) -> Self {
        let since_epoch = time.duration_since(UNIX_EPOCH).unwrap_or_default();
        TimePlaceholders {
            now: iso_instant(since_epoch.as_secs(), since_epoch.subsec_nanos()),
            now_epoch_millis: since_epoch.as_millis().to_string(),
        }
    }
}

impl Placeholders for TimePlaceholders {
    fn resolve(&self, prefix: &str, name: &str) -> Option<&str> {
        match (prefix, name) {
            ("time", "now") => Some(&self.now),
            ("time", "now_epoch_millis") => Some(&self.now_epoch_millis),
            _ => None,
        }
    }
}

/// Java's `Instant.toString`: fractions in groups of three digits, none
/// when zero.
fn iso_instant(secs: u64, nanos: u32) -> String {
    let rem = secs % 86_400;
    let (year, month, day) = crate::policy::civil_from_days((secs / 86_400) as i64);
    let fraction = if nanos == 0 {
        String::new()
    } else if nanos.is_multiple_of(1_000_000) {
        format!(".{:03}", nanos / 1_000_000)
    } else if nanos.is_multiple_of(1000) {
        format!(".{:06}", nanos / 1000)
    } else {
        format!(".{nanos:09}")
    };
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}{fraction}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

impl Filter {
    /// Whether `thing` (a thing's JSON, with `thingId`, `attributes`,
    /// `features`, `_revision`, … as Ditto writes them) matches.
    pub fn matches(
        &self,
        thing: &Json,
        semantics: Semantics,
        placeholders: &dyn Placeholders,
    ) -> bool {
        Evaluation { thing, semantics, placeholders }.filter(self)
    }
}

struct Evaluation<'a> {
    thing: &'a Json,
    semantics: Semantics,
    placeholders: &'a dyn Placeholders,
}

/// A number, exact: JSON integers (`u64` included) and integral doubles
/// as integers, as Ditto's `JsonValue.isLong` makes them.
#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

/// One value to compare: a JSON leaf of the thing, or a filter value.
#[derive(Debug, Clone, Copy)]
enum Scalar<'v> {
    Null,
    Bool(bool),
    Num(Num),
    Str(&'v str),
}

/// What a walk along a field's path found.
#[derive(Debug, Clone, Copy, Default)]
struct Walk {
    /// At least one value sits at the path.
    found: bool,
    /// A level of the path ran through an array (Ditto then answers an
    /// array of what it collected).
    through_array: bool,
    /// The visitor asked to stop: it found its match.
    stopped: bool,
}

impl<'a> Evaluation<'a> {
    fn filter(&self, filter: &Filter) -> bool {
        match filter {
            Filter::And(operands) => operands.iter().all(|f| self.filter(f)),
            Filter::Or(operands) => operands.iter().any(|f| self.filter(f)),
            Filter::Not(operand) => !self.filter(operand),
            Filter::Compare { op, field, value } => self.compare(*op, field, value),
            Filter::In { field, values } => self.in_values(field, values),
            Filter::Like { field, pattern } => self.like(field, pattern),
            Filter::Exists(field) => self.exists(field),
            Filter::Empty(field) => self.empty(field),
        }
    }

    fn value<'v>(&'v self, value: &'v Value) -> Scalar<'v> {
        match value {
            Value::Null => Scalar::Null,
            Value::Bool(b) => Scalar::Bool(*b),
            Value::Int(i) => Scalar::Num(Num::Int(i128::from(*i))),
            Value::Float(f) => Scalar::Num(Num::Float(*f)),
            Value::String(s) => Scalar::Str(s),
            Value::Placeholder(p) => {
                self.placeholders.resolve(&p.prefix, &p.name).map_or(Scalar::Null, Scalar::Str)
            }
        }
    }

    /// Visits every scalar the field holds (array elements one by one, at
    /// any depth; objects hold none) until `visit` returns true.
    fn scalars(&self, field: &Field, visit: &mut dyn FnMut(Scalar<'_>) -> bool) -> Walk {
        match field.kind() {
            FieldKind::Placeholder { prefix, name } => {
                match self.placeholders.resolve(prefix, name) {
                    Some(text) => Walk {
                        found: true,
                        through_array: false,
                        stopped: visit(Scalar::Str(text)),
                    },
                    None => Walk::default(),
                }
            }
            _ => {
                let walk = self.walk(field, true, &mut |json| flatten(json, 0, visit));
                if !walk.found && is_namespace(field) {
                    return match self.namespace() {
                        Some(namespace) => Walk {
                            found: true,
                            through_array: false,
                            stopped: visit(Scalar::Str(namespace)),
                        },
                        None => walk,
                    };
                }
                walk
            }
        }
    }

    /// Walks the field's path from the thing's root, calling `visit` on
    /// what sits at its end. `flatten` is Ditto's
    /// `getValueFlatteningArrays`: a level that holds an array continues
    /// into each object in it. In search, a `*` feature id continues into
    /// every feature.
    fn walk<'j>(
        &self,
        field: &Field,
        flatten: bool,
        visit: &mut dyn FnMut(&'j Json) -> bool,
    ) -> Walk
    where
        'a: 'j,
    {
        let any_feature = self.semantics == Semantics::Search && field.is_any_feature();
        let mut walk = Walk::default();
        walk_levels(
            self.thing,
            field.pointer().levels(),
            0,
            any_feature,
            flatten,
            &mut walk,
            visit,
        );
        walk
    }

    /// `_namespace` is not in a thing's JSON; Ditto derives it from the id.
    fn namespace(&self) -> Option<&'a str> {
        let id = self.thing.get("thingId")?.as_str()?;
        id.split_once(':').map(|(namespace, _)| namespace)
    }

    fn compare(&self, op: CompareOp, field: &Field, value: &Value) -> bool {
        let value = self.value(value);
        let semantics = self.semantics;
        let eq = |scalar: Scalar<'_>| match (semantics, value, scalar) {
            (_, Scalar::Null, Scalar::Null) => true,
            (Semantics::Things, _, _) => things_order(value, scalar) == Some(Ordering::Equal),
            (Semantics::Search, _, _) => search_order(value, scalar) == Some(Ordering::Equal),
        };
        match op {
            CompareOp::Eq => self.scalars(field, &mut |s| eq(s)).stopped,
            CompareOp::Ne => {
                let walk = self.scalars(field, &mut |s| eq(s));
                match semantics {
                    // `!anyMatch(eq)`: a missing field is "not equal".
                    Semantics::Things => !walk.stopped,
                    // Ditto adds `$exists` to MongoDB's `$ne`.
                    Semantics::Search => walk.found && !walk.stopped,
                }
            }
            CompareOp::Gt | CompareOp::Ge | CompareOp::Lt | CompareOp::Le => {
                let wanted = |order: Ordering| match op {
                    CompareOp::Gt => order == Ordering::Greater,
                    CompareOp::Ge => order != Ordering::Less,
                    CompareOp::Lt => order == Ordering::Less,
                    _ => order != Ordering::Greater,
                };
                let inclusive = matches!(op, CompareOp::Ge | CompareOp::Le);
                self.scalars(field, &mut |scalar| match (semantics, value, scalar) {
                    // MongoDB's `$gte: null` is `$eq: null`; Ditto's
                    // evaluator orders nothing against null.
                    (Semantics::Search, Scalar::Null, Scalar::Null) => inclusive,
                    (Semantics::Things, _, _) => things_order(value, scalar).is_some_and(wanted),
                    (Semantics::Search, _, _) => search_order(value, scalar).is_some_and(wanted),
                })
                .stopped
            }
        }
    }

    fn in_values(&self, field: &Field, values: &[Value]) -> bool {
        let semantics = self.semantics;
        let walk = self.scalars(field, &mut |scalar| {
            values.iter().any(|value| match (self.value(value), scalar) {
                (Scalar::Null, Scalar::Null) => semantics == Semantics::Search,
                // Ditto's evaluator orders nothing against a null in the
                // thing, and throws a NullPointerException for a null in
                // the list; neither matches here.
                (Scalar::Null, _) | (_, Scalar::Null) => false,
                (value, scalar) => {
                    let order = match semantics {
                        Semantics::Things => things_order(value, scalar),
                        Semantics::Search => search_order(value, scalar),
                    };
                    order == Some(Ordering::Equal)
                }
            })
        });
        // MongoDB's `$in: [null]` also matches a missing field.
        let null_matches_missing = semantics == Semantics::Search && values.contains(&Value::Null);
        walk.stopped || (!walk.found && null_matches_missing)
    }

    fn like(&self, field: &Field, pattern: &LikePattern) -> bool {
        let semantics = self.semantics;
        self.scalars(field, &mut |scalar| match (semantics, scalar) {
            (_, Scalar::Str(s)) => pattern.matches(s, fold(semantics)),
            // MongoDB's `$regex` matches strings only.
            (Semantics::Search, _) => false,
            // Ditto's evaluator matches `String.valueOf` of numbers and
            // booleans; of null it matches the text of a Java object's
            // identity, which no one means to, so null never matches.
            (Semantics::Things, Scalar::Null) => false,
            (Semantics::Things, Scalar::Bool(b)) => {
                pattern.matches(if b { "true" } else { "false" }, CaseFold::Ascii)
            }
            (Semantics::Things, Scalar::Num(Num::Int(i))) => {
                pattern.matches(long_text(i).as_str(), CaseFold::Ascii)
            }
            (Semantics::Things, Scalar::Num(Num::Float(f))) => {
                pattern.matches(double_text(f).as_str(), CaseFold::Ascii)
            }
        })
        .stopped
    }

    /// Ditto's `ExistsThingPredicateVisitor` (MongoDB's `$exists` agrees).
    fn exists(&self, field: &Field) -> bool {
        match field.kind() {
            FieldKind::Placeholder { prefix, name } => {
                self.placeholders.resolve(prefix, name).is_some()
            }
            FieldKind::Simple if is_namespace(field) => {
                self.walk(field, false, &mut |_| true).found || self.namespace().is_some()
            }
            kind => self.walk(field, flattens(kind), &mut |_| true).found,
        }
    }

    /// Ditto's `EmptyThingPredicateVisitor`: absent, `null`, `""`, `[]`
    /// or `{}`; a feature is empty without definition and (desired)
    /// properties. In search, `features/*/…` is empty when some feature's
    /// is, and `features/*` when there are no features.
    fn empty(&self, field: &Field) -> bool {
        match field.kind() {
            FieldKind::Placeholder { prefix, name } => {
                self.placeholders.resolve(prefix, name).is_none_or(str::is_empty)
            }
            FieldKind::Feature { part: FeaturePart::Whole, .. }
                if field.is_any_feature() && self.semantics == Semantics::Search =>
            {
                self.thing
                    .get("features")
                    .and_then(Json::as_object)
                    .is_none_or(|features| features.is_empty())
            }
            FieldKind::Feature { part: FeaturePart::Whole, .. } => {
                let mut empty = false;
                let walk = self.walk(field, false, &mut |feature| {
                    empty = ["definition", "properties", "desiredProperties"]
                        .iter()
                        .all(|part| feature.get(part).is_none());
                    empty
                });
                !walk.found || empty
            }
            _ if field.is_any_feature() && self.semantics == Semantics::Search => {
                self.thing.get("features").and_then(Json::as_object).is_some_and(|features| {
                    features
                        .values()
                        .any(|feature| part_of(feature, field).is_none_or(is_empty_value))
                })
            }
            kind => {
                let mut empty = false;
                let walk = self.walk(field, flattens(kind), &mut |value| {
                    empty = is_empty_value(value);
                    empty
                });
                // A path through an array yields the array of what it
                // collected, which is not empty when anything was found.
                !walk.found || (!walk.through_array && empty)
            }
        }
    }
}

/// The part of one feature's JSON a wildcard field addresses, if present.
fn part_of<'j>(feature: &'j Json, field: &Field) -> Option<&'j Json> {
    field.pointer().levels()[2..]
        .iter()
        .try_fold(feature, |inner, level| inner.as_object()?.get(level))
}

/// Ditto's exists and empty visitors flatten arrays below attributes and
/// (desired) properties only; other fields are read as plain pointers.
fn flattens(kind: &FieldKind) -> bool {
    matches!(
        kind,
        FieldKind::Attribute
            | FieldKind::Feature { part: FeaturePart::Property | FeaturePart::DesiredProperty, .. }
    )
}

fn is_namespace(field: &Field) -> bool {
    field.kind() == &FieldKind::Simple && field.pointer().first() == Some("_namespace")
}

fn is_empty_value(value: &Json) -> bool {
    match value {
        Json::Null => true,
        Json::String(s) => s.is_empty(),
        Json::Array(a) => a.is_empty(),
        Json::Object(o) => o.is_empty(),
        Json::Bool(_) | Json::Number(_) => false,
    }
}

fn fold(semantics: Semantics) -> CaseFold {
    match semantics {
        Semantics::Search => CaseFold::Unicode,
        Semantics::Things => CaseFold::Ascii,
    }
}

fn walk_levels<'j>(
    value: &'j Json,
    levels: &[String],
    at: usize,
    any_feature: bool,
    flatten: bool,
    walk: &mut Walk,
    visit: &mut dyn FnMut(&'j Json) -> bool,
) {
    if walk.stopped {
        return;
    }
    let Some(level) = levels.get(at) else {
        walk.found = true;
        walk.stopped = visit(value);
        return;
    };
    match value {
        Json::Object(object) if any_feature && at == 1 => {
            for feature in object.values() {
                walk_levels(feature, levels, at + 1, any_feature, flatten, walk, visit);
            }
        }
        Json::Object(object) => {
            if let Some(child) = object.get(level) {
                walk_levels(child, levels, at + 1, any_feature, flatten, walk, visit);
            }
        }
        // Only a level inside the path can be an array to pass through;
        // Ditto keeps the objects in it and drops everything else.
        Json::Array(elements) if flatten && at > 0 => {
            walk.through_array = true;
            for element in elements.iter().filter(|e| e.is_object()) {
                walk_levels(element, levels, at, any_feature, flatten, walk, visit);
            }
        }
        _ => {}
    }
}

/// Ditto's `mapJsonValueToJava`: arrays yield their elements, at any
/// depth; objects yield nothing.
fn flatten(value: &Json, depth: usize, visit: &mut dyn FnMut(Scalar<'_>) -> bool) -> bool {
    match value {
        Json::Null => visit(Scalar::Null),
        Json::Bool(b) => visit(Scalar::Bool(*b)),
        Json::Number(n) => visit(Scalar::Num(number(n))),
        Json::String(s) => visit(Scalar::Str(s)),
        Json::Array(elements) if depth < MAX_VALUE_DEPTH => {
            elements.iter().any(|e| flatten(e, depth + 1, visit))
        }
        Json::Array(_) | Json::Object(_) => false,
    }
}

fn number(n: &serde_json::Number) -> Num {
    if let Some(i) = n.as_i64() {
        return Num::Int(i128::from(i));
    }
    if let Some(u) = n.as_u64() {
        return Num::Int(i128::from(u));
    }
    let f = n.as_f64().unwrap_or_default();
    // Ditto reads an integral double that a Java long holds as that long.
    if f.fract() == 0.0 && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) {
        Num::Int(f as i128)
    } else {
        Num::Float(f)
    }
}

/// How the thing's `scalar` orders against the filter's `value` in
/// MongoDB: only within one type, numbers by value, strings by their
/// UTF-8 bytes.
fn search_order(value: Scalar<'_>, scalar: Scalar<'_>) -> Option<Ordering> {
    match (scalar, value) {
        (Scalar::Num(a), Scalar::Num(b)) => Some(num_order(a, b)),
        (Scalar::Str(a), Scalar::Str(b)) => Some(a.cmp(b)),
        (Scalar::Bool(a), Scalar::Bool(b)) => Some(a.cmp(&b)),
        _ => None,
    }
}

/// Ditto's `ThingPredicatePredicateVisitor.compare`: how the thing's
/// `scalar` orders against the filter's `value`. Numbers compare as
/// `BigDecimal`s, also against a string that reads as one ("5" equals 5);
/// other mixed types compare by their Java texts ("true" equals true);
/// strings compare by UTF-16 code units, as Java's `compareTo`. Null
/// orders against nothing.
fn things_order(value: Scalar<'_>, scalar: Scalar<'_>) -> Option<Ordering> {
    match (scalar, value) {
        (Scalar::Null, _) | (_, Scalar::Null) => None,
        (Scalar::Num(a), Scalar::Num(b)) => Some(num_order(a, b)),
        (Scalar::Num(a), Scalar::Str(b)) if big_decimal(b).is_some() => {
            Some(num_order(a, big_decimal(b).expect("checked")))
        }
        (Scalar::Str(a), Scalar::Num(b)) if big_decimal(a).is_some() => {
            Some(num_order(big_decimal(a).expect("checked"), b))
        }
        (Scalar::Str(a), Scalar::Str(b)) => Some(utf16_order(a, b)),
        (Scalar::Bool(a), Scalar::Bool(b)) => Some(a.cmp(&b)),
        (a, b) => Some(with_java_text(a, |a| with_java_text(b, |b| utf16_order(a, b)))),
    }
}

fn with_java_text<T>(scalar: Scalar<'_>, f: impl FnOnce(&str) -> T) -> T {
    match scalar {
        Scalar::Str(s) => f(s),
        Scalar::Bool(b) => f(if b { "true" } else { "false" }),
        Scalar::Num(Num::Int(i)) => f(long_text(i).as_str()),
        Scalar::Num(Num::Float(x)) => f(big_decimal_text(x).as_str()),
        Scalar::Null => f("null"),
    }
}

fn utf16_order(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Java's `new BigDecimal(String)`: a sign, digits with at most one point
/// and at least one digit, and an optional exponent; nothing else, not
/// even white space.
fn big_decimal(text: &str) -> Option<Num> {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
        None => (unsigned, None),
    };
    let (int, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.len() + fraction.len() == 0 || !digits_ok(int) || !digits_ok(fraction) {
        return None;
    }
    if let Some(exponent) = exponent {
        let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
        if digits.is_empty() || !digits_ok(digits) {
            return None;
        }
    }
    if exponent.is_none() && !mantissa.contains('.') {
        if let Ok(i) = text.parse::<i128>() {
            return Some(Num::Int(i));
        }
    }
    // Rust reads every text this grammar admits; only its precision
    // differs from BigDecimal's, beyond 17 significant digits.
    text.parse::<f64>().ok().map(Num::Float)
}

/// Exact order of two numbers, an integer and a double included.
fn num_order(a: Num, b: Num) -> Ordering {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x.cmp(&y),
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        (Num::Int(x), Num::Float(y)) => int_float_order(x, y),
        (Num::Float(x), Num::Int(y)) => int_float_order(y, x).reverse(),
    }
}

fn int_float_order(i: i128, f: f64) -> Ordering {
    // Beyond ±2^127 the double is out of any i128's reach.
    const LIMIT: f64 = 1.701_411_834_604_692_3e38;
    if f >= LIMIT {
        return Ordering::Less;
    }
    if f < -LIMIT {
        return Ordering::Greater;
    }
    let whole = f.trunc();
    match i.cmp(&(whole as i128)) {
        Ordering::Equal if f > whole => Ordering::Less,
        Ordering::Equal if f < whole => Ordering::Greater,
        order => order,
    }
}
