//! RQL to SQL over `things` and `thing_index`, for both stores.
//!
//! A field is either a column of `things` (`thingId`, `policyId`,
//! `_namespace`, `_revision`, `_created`, `_modified`) or rows of
//! `thing_index` under one path (`wildcard_path` for `features/*/…`). An
//! operator on index rows is `t.seq IN (SELECT i.thing FROM thing_index i
//! WHERE i.path = ? AND <typed test>)`: any element matches, and each
//! database can drive the query from the index (SQLite loops over the
//! subquery's rows, PostgreSQL makes it a semi-join). Types never mix: a
//! test names the row's `kind` and its typed column. Every value is a bound
//! parameter; the SQL text holds only what this file writes.
//!
//! PostgreSQL compares strings in its database's collation unless told;
//! every string comparison and sort here says `COLLATE "C"` (bytes, as
//! SQLite's `BINARY` and MongoDB do), and the schema declares those
//! columns `C` so that the indexes serve it.

use super::{SearchRequest, SortKey, SortValue};
use crate::rql::{
    CompareOp, Field, FieldKind, Filter, LikePattern, Placeholders, SortEntry, Value,
};
use std::fmt::Write as _;

/// Which SQL to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    // Written and unit-tested in every build; only the store that runs it
    // (`store/postgres.rs`) is left out without the `postgres` feature.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Postgres,
}

/// One bound value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Param {
    Int(i64),
    Num(f64),
    Str(String),
}

/// A statement and its parameters, in order (`?1`… or `$1`…).
#[derive(Debug, Clone)]
pub(crate) struct Query {
    pub sql: String,
    pub params: Vec<Param>,
}

/// Most parameters one statement binds: below SQLite's 32,766 and
/// PostgreSQL's 65,535. Only filters near the RQL input limit (64 KiB of
/// `in` values) reach it; they are refused rather than failing inside the
/// database with a less clear message.
const MAX_PARAMS: usize = 30_000;

/// Most things one search returns: a page (at most 200) and the one more
/// that tells whether another page follows, with room to spare. Bounds
/// the memory one search holds.
pub const SEARCH_LIMIT_MAX: usize = 1_000;

/// The rows SQLite's string index (`thing_index_str`) holds besides
/// non-null strings: all but `_metadata`'s. Every modify changes a leaf's
/// `_modified` timestamp, and in that index each change was a delete in the
/// middle and an insert at the end of its path's range, which splits a page
/// every few dozen modifies: most of a modify's index writes went to a
/// value nobody filters fast on. `_metadata` stays searchable through the
/// path index. SQLite uses a partial index only where the query says its
/// condition in the same words, so a test on a path outside `_metadata`
/// repeats it (`path_is`).
pub(crate) const SQLITE_STRING_INDEX_HOLDS: &str = "path NOT GLOB '_metadata/*'";

/// The columns the search reads before the sort key: as `thing_from_row`
/// in both stores expects them.
pub(crate) const RECORD_COLUMNS: usize = 6;

/// A column of `things` a field names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Id,
    Namespace,
    PolicyId,
    Revision,
    Created,
    Modified,
}

impl Column {
    fn expr(self) -> &'static str {
        match self {
            Column::Id => "t.id",
            Column::Namespace => "t.namespace",
            Column::PolicyId => "t.policy_id",
            // Compared with numbers from RQL, which are doubles.
            Column::Revision => "CAST(t.revision AS DOUBLE PRECISION)",
            Column::Created => "t.created",
            Column::Modified => "t.modified",
        }
    }
}

/// Where a field's values are.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// Rows of `thing_index` whose `column` (`path` or `wildcard_path`)
    /// is `path`, and for `exists`, rows below it.
    Index {
        column: &'static str,
        path: String,
    },
    Column(Column),
    /// A placeholder field: search's scope has none, so nothing matches.
    Never,
}

fn source(field: &Field) -> Source {
    let path = field.pointer().levels().join("/");
    match field.kind() {
        FieldKind::Simple => match field.pointer().first() {
            Some("thingId") => Source::Column(Column::Id),
            Some("_namespace") => Source::Column(Column::Namespace),
            Some("policyId") => Source::Column(Column::PolicyId),
            Some("_revision") => Source::Column(Column::Revision),
            Some("_created") => Source::Column(Column::Created),
            Some("_modified") => Source::Column(Column::Modified),
            _ => Source::Index { column: "path", path },
        },
        FieldKind::Placeholder { .. } => Source::Never,
        _ if field.is_any_feature() => Source::Index { column: "wildcard_path", path },
        _ => Source::Index { column: "path", path },
    }
}

/// A filter value, placeholders resolved.
#[derive(Debug, Clone)]
enum Scalar {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
}

/// What a typed test applies to: the index row `i`, or a column.
#[derive(Debug, Clone, Copy)]
enum Target {
    Row,
    Column(Column),
}

/// How one sort entry is read: which output columns hold its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SortColumns {
    /// Index rows: rank, number, string of the first row in the entry's
    /// direction (the least ascending, the greatest descending).
    Index { column: &'static str, path: String },
    /// A text column that is never NULL.
    Str(&'static str),
    /// The revision.
    Num(&'static str),
    /// The policy id: rank (0 for none, 2 for a string) and text.
    OptStr(&'static str),
}

/// The type of one key column in the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ComponentType {
    Int,
    Num,
    Str,
}

/// One key column's value as read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Component {
    Int(i64),
    Num(f64),
    Str(String),
}

/// The key columns of a search's result, after the record's.
#[derive(Debug, Clone)]
pub(crate) struct KeyShape {
    entries: Vec<SortColumns>,
}

/// The rank of a value's type in the sort order (see `search.rs`).
const RANK: &str = "CASE i.kind WHEN 2 THEN 1 WHEN 3 THEN 2 WHEN 1 THEN 3 ELSE 0 END";

impl SortColumns {
    fn of(field: &Field) -> SortColumns {
        match source(field) {
            Source::Index { column, path } => SortColumns::Index { column, path },
            Source::Column(Column::PolicyId) => SortColumns::OptStr("t.policy_id"),
            Source::Column(Column::Revision) => SortColumns::Num(Column::Revision.expr()),
            Source::Column(column) => SortColumns::Str(column.expr()),
            // Sort fields are never placeholders (the parser refuses them).
            Source::Never => SortColumns::OptStr("NULL"),
        }
    }

    fn types(&self) -> &'static [ComponentType] {
        match self {
            SortColumns::Index { .. } => {
                &[ComponentType::Int, ComponentType::Num, ComponentType::Str]
            }
            SortColumns::Str(_) => &[ComponentType::Str],
            SortColumns::Num(_) => &[ComponentType::Num],
            SortColumns::OptStr(_) => &[ComponentType::Int, ComponentType::Str],
        }
    }

    /// The key columns' values for a sort value, or `None` when the
    /// value cannot be this entry's (a number for `thingId`).
    fn components(&self, value: &SortValue) -> Option<Vec<Component>> {
        Some(match (self, value) {
            (SortColumns::Index { .. }, value) => {
                let (rank, num, text) = match value {
                    SortValue::Null => (0, 0.0, String::new()),
                    SortValue::Number(x) => (1, *x, String::new()),
                    SortValue::String(s) => (2, 0.0, s.clone()),
                    SortValue::Bool(b) => (3, f64::from(u8::from(*b)), String::new()),
                };
                vec![Component::Int(rank), Component::Num(num), Component::Str(text)]
            }
            (SortColumns::Str(_), SortValue::String(s)) => vec![Component::Str(s.clone())],
            (SortColumns::Num(_), SortValue::Number(x)) => vec![Component::Num(*x)],
            (SortColumns::OptStr(_), SortValue::Null) => {
                vec![Component::Int(0), Component::Str(String::new())]
            }
            (SortColumns::OptStr(_), SortValue::String(s)) => {
                vec![Component::Int(2), Component::Str(s.clone())]
            }
            _ => return None,
        })
    }

    fn value(&self, components: &mut impl Iterator<Item = Component>) -> SortValue {
        let mut next = || components.next();
        match self {
            SortColumns::Index { .. } => {
                let (
                    Some(Component::Int(rank)),
                    Some(Component::Num(num)),
                    Some(Component::Str(s)),
                ) = (next(), next(), next())
                else {
                    return SortValue::Null;
                };
                match rank {
                    1 => SortValue::Number(num),
                    2 => SortValue::String(s),
                    3 => SortValue::Bool(num != 0.0),
                    _ => SortValue::Null,
                }
            }
            SortColumns::Str(_) => match next() {
                Some(Component::Str(s)) => SortValue::String(s),
                _ => SortValue::Null,
            },
            SortColumns::Num(_) => match next() {
                Some(Component::Num(x)) => SortValue::Number(x),
                _ => SortValue::Null,
            },
            SortColumns::OptStr(_) => match (next(), next()) {
                (Some(Component::Int(2)), Some(Component::Str(s))) => SortValue::String(s),
                _ => SortValue::Null,
            },
        }
    }
}

impl KeyShape {
    /// The types of the key columns, in the result's order.
    pub(crate) fn types(&self) -> Vec<ComponentType> {
        self.entries.iter().flat_map(|e| e.types().iter().copied()).collect()
    }

    /// The sort key from a result row's key columns.
    pub(crate) fn key(&self, components: Vec<Component>, thing_id: String) -> SortKey {
        let mut components = components.into_iter();
        let values = self.entries.iter().map(|e| e.value(&mut components)).collect();
        SortKey { values, thing_id }
    }
}

/// Whether `value` can stand for `entry` in a key (the service checks a
/// cursor's values with this before it searches).
pub(crate) fn fits(entry: &SortEntry, value: &SortValue) -> bool {
    SortColumns::of(&entry.field).components(value).is_some()
}

struct Sql<'p> {
    dialect: Dialect,
    text: String,
    params: Vec<Param>,
    placeholders: &'p dyn Placeholders,
}

impl<'p> Sql<'p> {
    fn new(dialect: Dialect, placeholders: &'p dyn Placeholders) -> Self {
        Sql { dialect, text: String::with_capacity(512), params: Vec::new(), placeholders }
    }

    fn push(&mut self, text: &str) {
        self.text.push_str(text);
    }

    /// Binds a value where the text stands. PostgreSQL is told each
    /// parameter's type, since it cannot always infer one.
    fn bind(&mut self, param: Param) {
        let ty = match param {
            Param::Int(_) => "int8",
            Param::Num(_) => "float8",
            Param::Str(_) => "text",
        };
        self.params.push(param);
        let n = self.params.len();
        let _ = match self.dialect {
            Dialect::Sqlite => write!(self.text, "?{n}"),
            Dialect::Postgres => write!(self.text, "${n}::{ty}"),
        };
    }

    /// `i.{column}` is `path`. On SQLite, a path outside `_metadata` also
    /// says what the string index holds, so that the index can serve it.
    fn path_is(&mut self, column: &str, path: &str) {
        let _ = write!(self.text, "i.{column} = ");
        self.bind(Param::Str(path.to_owned()));
        if self.dialect == Dialect::Sqlite && column == "path" && !in_metadata(path) {
            let _ = write!(self.text, " AND i.{SQLITE_STRING_INDEX_HOLDS}");
        }
    }

    /// Byte order for strings: SQLite's default, PostgreSQL's `C`.
    fn collate(&self) -> &'static str {
        match self.dialect {
            Dialect::Sqlite => "",
            Dialect::Postgres => " COLLATE \"C\"",
        }
    }

    fn finish(self) -> Result<Query, String> {
        if self.params.len() > MAX_PARAMS {
            return Err(format!(
                "the search filter needs {} values, more than the {MAX_PARAMS} one query may bind",
                self.params.len()
            ));
        }
        Ok(Query { sql: self.text, params: self.params })
    }

    fn scalar(&self, value: &Value) -> Scalar {
        match value {
            Value::Null => Scalar::Null,
            Value::Bool(b) => Scalar::Bool(*b),
            Value::Int(i) => Scalar::Num(*i as f64),
            Value::Float(x) => Scalar::Num(*x),
            Value::String(s) => Scalar::Str(s.clone()),
            Value::Placeholder(p) => self
                .placeholders
                .resolve(&p.prefix, &p.name)
                .map_or(Scalar::Null, |s| Scalar::Str(s.to_owned())),
        }
    }

    /// `WHERE` of the things a search considers: its namespaces and its
    /// filter.
    fn conditions(&mut self, filter: Option<&Filter>, namespaces: Option<&[String]>) {
        self.push("(");
        match namespaces {
            // No namespace allowed: nothing matches, as MongoDB's `$in: []`.
            Some([]) => self.push("1 = 0"),
            Some(namespaces) => {
                self.push("t.namespace IN (");
                for (n, namespace) in namespaces.iter().enumerate() {
                    if n > 0 {
                        self.push(", ");
                    }
                    self.bind(Param::Str(namespace.clone()));
                }
                self.push(")");
            }
            None => self.push("1 = 1"),
        }
        self.push(") AND (");
        match filter {
            Some(filter) => self.filter(filter),
            None => self.push("1 = 1"),
        }
        self.push(")");
    }

    fn filter(&mut self, filter: &Filter) {
        match filter {
            Filter::And(operands) => self.balanced(&conjuncts(operands), " AND "),
            Filter::Or(operands) => {
                let operands: Vec<Operand> = operands.iter().map(Operand::One).collect();
                self.balanced(&operands, " OR ")
            }
            Filter::Not(operand) => {
                // Every test here is TRUE or FALSE, never NULL, so NOT is
                // the complement, as MongoDB's `$nor`.
                self.push("NOT (");
                self.filter(operand);
                self.push(")");
            }
            Filter::Compare { op: CompareOp::Ne, field, value } => {
                // Ditto: `$ne` and `$exists`. The field is there and none
                // of its values equals.
                let value = self.scalar(value);
                self.push("(");
                self.exists(field);
                self.push(" AND NOT (");
                self.any(field, |sql, target| sql.compare(target, CompareOp::Eq, &value));
                self.push("))");
            }
            Filter::Compare { op, field, value } => {
                let value = self.scalar(value);
                self.any(field, |sql, target| sql.compare(target, *op, &value));
            }
            Filter::In { field, values } => {
                let values: Vec<Scalar> = values.iter().map(|v| self.scalar(v)).collect();
                let null = values.iter().any(|v| matches!(v, Scalar::Null));
                self.push("(");
                self.any(field, |sql, target| sql.in_values(target, &values));
                if null {
                    // MongoDB's `$in: [null]` also matches a missing field.
                    self.push(" OR NOT ");
                    self.exists(field);
                }
                self.push(")");
            }
            Filter::Like { field, pattern } => {
                self.any(field, |sql, target| sql.like(target, pattern));
            }
            Filter::Exists(field) => self.exists(field),
            Filter::Empty(field) => self.empty(field),
        }
    }

    /// `and`/`or` as a balanced tree: SQLite refuses expressions deeper
    /// than 1,000, and a filter may have 4,096 operands in one `and`.
    fn balanced(&mut self, operands: &[Operand<'_>], op: &str) {
        match operands {
            [] => self.push(if op == " AND " { "1 = 1" } else { "1 = 0" }),
            [Operand::One(one)] => self.filter(one),
            [Operand::OnePath { path, tests, .. }] => self.on_one_path(path, tests),
            _ => {
                let (left, right) = operands.split_at(operands.len() / 2);
                self.push("(");
                self.balanced(left, op);
                self.push(op);
                self.balanced(right, op);
                self.push(")");
            }
        }
    }

    /// Each of `tests` is met by some value at `path`. Where the thing
    /// holds one value there, that value meets them all: one range of an
    /// index finds those things, rather than an intersection of one set
    /// per test, each of which can be most of the store (measured with
    /// `and(ge(…),lt(…))` at 1,000,000 things: seconds, not milliseconds).
    /// Only at a path with several values (`thing_lists`) can different
    /// values meet different tests; those things are tested value by
    /// value, through the list table, which holds only such paths.
    fn on_one_path(&mut self, path: &str, tests: &[(CompareOp, &Value)]) {
        let tests: Vec<(CompareOp, Scalar)> =
            tests.iter().map(|(op, value)| (*op, self.scalar(value))).collect();
        self.push("t.seq IN (SELECT i.thing FROM thing_index i WHERE ");
        self.path_is("path", path);
        for (op, value) in &tests {
            self.push(" AND (");
            self.compare(Target::Row, *op, value);
            self.push(")");
        }
        self.push(" UNION ALL SELECT l.thing FROM thing_lists l WHERE l.path = ");
        self.bind(Param::Str(path.to_owned()));
        for (op, value) in &tests {
            self.push(" AND EXISTS (SELECT 1 FROM thing_index i WHERE i.thing = l.thing AND ");
            self.path_is("path", path);
            self.push(" AND (");
            self.compare(Target::Row, *op, value);
            self.push("))");
        }
        self.push(")");
    }

    /// Some value of `field` passes `test`.
    fn any(&mut self, field: &Field, test: impl FnOnce(&mut Self, Target)) {
        match source(field) {
            Source::Index { column, path } => {
                self.push("t.seq IN (SELECT i.thing FROM thing_index i WHERE ");
                self.path_is(column, &path);
                self.push(" AND ");
                test(self, Target::Row);
                self.push(")");
            }
            Source::Column(column) => {
                self.push("(");
                test(self, Target::Column(column));
                self.push(")");
            }
            Source::Never => self.push("1 = 0"),
        }
    }

    /// A value at the field, or below it when it is an object: a row at
    /// the path, or at a path that starts with it and `/`. The second is
    /// a range (`p/` ≤ path < `p0`, `0` following `/`), which needs no
    /// LIKE escaping and which an index serves.
    fn exists(&mut self, field: &Field) {
        match source(field) {
            Source::Index { column, path } => {
                let c = self.collate();
                let _ = write!(
                    self.text,
                    "t.seq IN (SELECT i.thing FROM thing_index i WHERE i.{column} = "
                );
                self.bind(Param::Str(path.clone()));
                let _ = write!(self.text, " OR (i.{column}{c} >= ");
                self.bind(Param::Str(format!("{path}/")));
                let _ = write!(self.text, " AND i.{column}{c} < ");
                self.bind(Param::Str(format!("{path}0")));
                self.push("))");
            }
            Source::Column(Column::PolicyId) => self.push("t.policy_id IS NOT NULL"),
            Source::Column(_) => self.push("1 = 1"),
            Source::Never => self.push("1 = 0"),
        }
    }

    /// Absent, `null` or `""` (an empty array or object leaves no rows, so
    /// it is absent here).
    fn empty(&mut self, field: &Field) {
        match source(field) {
            Source::Index { column, path } => {
                self.push("(NOT ");
                self.exists(field);
                let _ = write!(
                    self.text,
                    " OR t.seq IN (SELECT i.thing FROM thing_index i WHERE i.{column} = "
                );
                self.bind(Param::Str(path));
                self.push(" AND (i.kind = 0 OR (i.kind = 3 AND i.str = ''))))");
            }
            Source::Column(Column::PolicyId) => {
                self.push("(t.policy_id IS NULL OR t.policy_id = '')")
            }
            Source::Column(Column::Revision) => self.push("1 = 0"),
            Source::Column(column) => {
                let _ = write!(self.text, "{} = ''", column.expr());
            }
            Source::Never => self.push("1 = 1"),
        }
    }

    fn compare(&mut self, target: Target, op: CompareOp, value: &Scalar) {
        let sign = match op {
            CompareOp::Eq | CompareOp::Ne => "=",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
        };
        let c = self.collate();
        match (target, value) {
            // MongoDB: `$gte: null` and `$lte: null` are `$eq: null`.
            (Target::Row, Scalar::Null) => self.push(match op {
                CompareOp::Gt | CompareOp::Lt => "1 = 0",
                _ => "i.kind = 0",
            }),
            (Target::Row, Scalar::Bool(b)) => {
                let _ = write!(self.text, "i.kind = 1 AND i.num {sign} ");
                self.bind(Param::Num(f64::from(u8::from(*b))));
            }
            (Target::Row, Scalar::Num(x)) => {
                let _ = write!(self.text, "i.kind = 2 AND i.num {sign} ");
                self.bind(Param::Num(*x));
            }
            (Target::Row, Scalar::Str(s)) => {
                let _ = write!(self.text, "i.kind = 3 AND i.str{c} {sign} ");
                self.bind(Param::Str(s.clone()));
            }
            (Target::Column(Column::Revision), Scalar::Num(x)) => {
                let _ = write!(self.text, "{} {sign} ", Column::Revision.expr());
                self.bind(Param::Num(*x));
            }
            (Target::Column(Column::Revision), _) => self.push("1 = 0"),
            (Target::Column(column), Scalar::Str(s)) => {
                let expr = column.expr();
                let _ = write!(self.text, "{expr} IS NOT NULL AND {expr}{c} {sign} ");
                self.bind(Param::Str(s.clone()));
            }
            (Target::Column(_), _) => self.push("1 = 0"),
        }
    }

    /// `in`: the values grouped by type, one `IN` list each, so that
    /// 10,000 values are four terms rather than 10,000.
    fn in_values(&mut self, target: Target, values: &[Scalar]) {
        let mut bools = Vec::new();
        let mut nums = Vec::new();
        let mut strs = Vec::new();
        let mut null = false;
        for value in values {
            match value {
                Scalar::Null => null = true,
                Scalar::Bool(b) => bools.push(f64::from(u8::from(*b))),
                Scalar::Num(x) => nums.push(*x),
                Scalar::Str(s) => strs.push(s.clone()),
            }
        }
        let mut terms = 0;
        self.push("(");
        let mut term = |sql: &mut Self, head: String, params: Vec<Param>| {
            if params.is_empty() {
                return;
            }
            if terms > 0 {
                sql.push(" OR ");
            }
            terms += 1;
            sql.push("(");
            sql.push(&head);
            sql.push(" IN (");
            for (n, param) in params.into_iter().enumerate() {
                if n > 0 {
                    sql.push(", ");
                }
                sql.bind(param);
            }
            sql.push("))");
        };
        let c = self.collate();
        match target {
            Target::Row => {
                let nums: Vec<Param> = nums.into_iter().map(Param::Num).collect();
                let bools: Vec<Param> = bools.into_iter().map(Param::Num).collect();
                let strs: Vec<Param> = strs.into_iter().map(Param::Str).collect();
                term(self, "i.kind = 2 AND i.num".into(), nums);
                term(self, "i.kind = 1 AND i.num".into(), bools);
                term(self, format!("i.kind = 3 AND i.str{c}"), strs);
                if null {
                    if terms > 0 {
                        self.push(" OR ");
                    }
                    terms += 1;
                    self.push("i.kind = 0");
                }
            }
            Target::Column(Column::Revision) => {
                let nums: Vec<Param> = nums.into_iter().map(Param::Num).collect();
                term(self, Column::Revision.expr().into(), nums);
            }
            Target::Column(column) => {
                let strs: Vec<Param> = strs.into_iter().map(Param::Str).collect();
                let expr = column.expr();
                term(self, format!("{expr} IS NOT NULL AND {expr}{c}"), strs);
            }
        }
        if terms == 0 {
            self.push("1 = 0");
        }
        self.push(")");
    }

    /// `like` on strings only: SQLite's `GLOB` (case-sensitive) and
    /// PostgreSQL's `LIKE` under `C`; `ilike` as both databases' `LIKE`
    /// and `ILIKE`, which fold ASCII letters only.
    fn like(&mut self, target: Target, pattern: &LikePattern) {
        let expr = match target {
            Target::Row => {
                self.push("i.kind = 3 AND ");
                "i.str"
            }
            Target::Column(Column::Revision) => return self.push("1 = 0"),
            Target::Column(column) => {
                let expr = column.expr();
                let _ = write!(self.text, "{expr} IS NOT NULL AND ");
                expr
            }
        };
        match (self.dialect, pattern.ignores_case()) {
            (Dialect::Sqlite, false) => {
                let _ = write!(self.text, "{expr} GLOB ");
                self.bind(Param::Str(glob_pattern(pattern.as_str())));
            }
            (Dialect::Sqlite, true) => {
                let _ = write!(self.text, "{expr} LIKE ");
                self.bind(Param::Str(like_pattern(pattern.as_str())));
                self.push(" ESCAPE '\\'");
            }
            (Dialect::Postgres, ignore_case) => {
                let op = if ignore_case { "ILIKE" } else { "LIKE" };
                let _ = write!(self.text, "{expr} COLLATE \"C\" {op} ");
                self.bind(Param::Str(like_pattern(pattern.as_str())));
            }
        }
    }

    /// The select list of the key columns of `sort`, named `k{n}r`,
    /// `k{n}n`, `k{n}s` (rank, number, string). An index entry's three
    /// come from its first row in the entry's direction: on PostgreSQL one
    /// lateral join finds that row (`key_joins`); SQLite, which has no
    /// lateral joins, looks it up once per column.
    fn key_columns(&mut self, sort: &[(SortColumns, bool)]) {
        for (n, (columns, descending)) in sort.iter().enumerate() {
            match columns {
                SortColumns::Index { .. } if self.dialect == Dialect::Postgres => {
                    let _ = write!(
                        self.text,
                        ", COALESCE(k{n}.r, 0) AS k{n}r, COALESCE(k{n}.n, 0) AS k{n}n, COALESCE(k{n}.s, '') AS k{n}s"
                    );
                }
                SortColumns::Index { column, path } => {
                    for (what, name, default) in [
                        (format!("CAST({RANK} AS BIGINT)"), 'r', "0"),
                        ("i.num".to_owned(), 'n', "0"),
                        ("i.str".to_owned(), 's', "''"),
                    ] {
                        let _ = write!(self.text, ", COALESCE((SELECT {what} ");
                        self.first_row(column, path, *descending);
                        let _ = write!(self.text, "), {default}) AS k{n}{name}");
                    }
                }
                SortColumns::Str(expr) => {
                    let _ = write!(self.text, ", {expr} AS k{n}s");
                }
                SortColumns::Num(expr) => {
                    let _ = write!(self.text, ", {expr} AS k{n}n");
                }
                SortColumns::OptStr(expr) => {
                    let _ = write!(
                        self.text,
                        ", CAST(CASE WHEN {expr} IS NULL THEN 0 ELSE 2 END AS BIGINT) AS k{n}r, COALESCE({expr}, '') AS k{n}s"
                    );
                }
            }
        }
    }

    /// PostgreSQL's lateral joins for `key_columns`: each index entry's
    /// first row in its direction, as `k{n}`.
    fn key_joins(&mut self, sort: &[(SortColumns, bool)]) {
        if self.dialect != Dialect::Postgres {
            return;
        }
        for (n, (columns, descending)) in sort.iter().enumerate() {
            let SortColumns::Index { column, path } = columns else { continue };
            let _ = write!(
                self.text,
                " LEFT JOIN LATERAL (SELECT CAST({RANK} AS BIGINT) AS r, i.num AS n, i.str AS s "
            );
            self.first_row(column, path, *descending);
            let _ = write!(self.text, ") k{n} ON TRUE");
        }
    }

    /// `FROM … LIMIT 1` of the thing's first index row at `path` in the
    /// direction: the least value ascending, the greatest descending.
    fn first_row(&mut self, column: &str, path: &str, descending: bool) {
        let c = self.collate();
        let dir = if descending { "DESC" } else { "ASC" };
        let _ = write!(self.text, "FROM thing_index i WHERE i.thing = t.seq AND i.{column} = ");
        self.bind(Param::Str(path.to_owned()));
        let _ = write!(self.text, " ORDER BY {RANK} {dir}, i.num {dir}, i.str{c} {dir} LIMIT 1");
    }
}

/// An operand of `and`/`or` as written.
enum Operand<'f> {
    One(&'f Filter),
    /// Comparisons of one `and` on one path (`Sql::on_one_path`).
    OnePath {
        path: String,
        tests: Vec<(CompareOp, &'f Value)>,
        first: &'f Filter,
    },
}

/// An `and`'s operands, its comparisons on one index path taken together.
fn conjuncts(operands: &[Filter]) -> Vec<Operand<'_>> {
    let mut out: Vec<Operand> = Vec::with_capacity(operands.len());
    for filter in operands {
        let on_path = match filter {
            Filter::Compare { op, field, value } if *op != CompareOp::Ne => match source(field) {
                Source::Index { column: "path", path } => Some((path, *op, value)),
                _ => None,
            },
            _ => None,
        };
        let Some((path, op, value)) = on_path else {
            out.push(Operand::One(filter));
            continue;
        };
        let same_path = out.iter_mut().find_map(|operand| match operand {
            Operand::OnePath { path: seen, tests, .. } if *seen == path => Some(tests),
            _ => None,
        });
        match same_path {
            Some(tests) => tests.push((op, value)),
            None => out.push(Operand::OnePath { path, tests: vec![(op, value)], first: filter }),
        }
    }
    // A comparison alone on its path needs no merging.
    for operand in &mut out {
        if let Operand::OnePath { tests, first, .. } = operand {
            if tests.len() == 1 {
                *operand = Operand::One(first);
            }
        }
    }
    out
}

/// The names and types of the key columns, in order, with each one's
/// direction; the thing id last when the sort does not name it.
fn key_names(sort: &[(SortColumns, bool)], tiebreak: bool) -> Vec<(String, ComponentType, bool)> {
    let mut names = Vec::new();
    for (n, (columns, descending)) in sort.iter().enumerate() {
        let suffixes: &[char] = match columns {
            SortColumns::Index { .. } => &['r', 'n', 's'],
            SortColumns::Str(_) => &['s'],
            SortColumns::Num(_) => &['n'],
            SortColumns::OptStr(_) => &['r', 's'],
        };
        for (suffix, ty) in suffixes.iter().zip(columns.types()) {
            names.push((format!("q.k{n}{suffix}"), *ty, *descending));
        }
    }
    if tiebreak {
        names.push(("q.id".to_owned(), ComponentType::Str, false));
    }
    names
}

/// A search: the page of things after `request.after` in the order of
/// `request.sort`.
pub(crate) fn search(
    dialect: Dialect,
    request: &SearchRequest,
    placeholders: &dyn Placeholders,
) -> Result<(Query, KeyShape), String> {
    let sort: Vec<(SortColumns, bool)> =
        request.sort.iter().map(|e| (SortColumns::of(&e.field), e.descending)).collect();
    // The thing id makes the order total; Ditto's effective sort ends
    // with it, and a sort that lacks it gets it here.
    let tiebreak = !sort.iter().any(|(columns, _)| *columns == SortColumns::Str("t.id"));
    let mut sql = Sql::new(dialect, placeholders);
    let names = key_names(&sort, tiebreak);
    // The record's own id is not repeated as a key column.
    let keys: String = names
        .iter()
        .filter(|(name, _, _)| name != "q.id")
        .map(|(name, _, _)| format!(", {name}"))
        .collect();
    let _ = write!(
        sql.text,
        "SELECT q.id, q.policy_id, q.revision, q.created, q.modified, q.doc{keys} FROM (SELECT t.id, t.policy_id, t.revision, t.created, t.modified, t.doc"
    );
    sql.key_columns(&sort);
    sql.push(" FROM things t");
    sql.key_joins(&sort);
    sql.push(" WHERE ");
    sql.conditions(request.filter.as_ref(), request.namespaces.as_deref());
    // SQLite would move the cursor's conditions on the key columns into
    // this query, where each computes the keys from the index a second
    // time (page 2 took twice page 1); a limit that limits nothing fences
    // it off. Only then: the fence also keeps the outer order from
    // reaching the query, which an order by id needs to stop early.
    let computed_keys =
        sort.iter().any(|(columns, _)| matches!(columns, SortColumns::Index { .. }));
    if dialect == Dialect::Sqlite && computed_keys && request.after.is_some() {
        sql.push(" LIMIT -1 OFFSET 0");
    }
    sql.push(") q");
    let c = sql.collate();
    if let Some(after) = &request.after {
        if after.values.len() != sort.len() {
            return Err("the sort key does not fit the sort".into());
        }
        let mut params = Vec::new();
        for ((columns, _), value) in sort.iter().zip(&after.values) {
            params.extend(columns.components(value).ok_or("the sort key does not fit the sort")?);
        }
        if tiebreak {
            params.push(Component::Str(after.thing_id.clone()));
        }
        // Strictly after: (a > x) OR (a = x AND ((b > y) OR (b = y AND …))),
        // `<` for descending entries.
        sql.push(" WHERE ");
        let count = names.len();
        for (n, ((name, ty, descending), param)) in names.iter().zip(params).enumerate() {
            let collate = if *ty == ComponentType::Str { c } else { "" };
            let param = match param {
                Component::Int(i) => Param::Int(i),
                Component::Num(x) => Param::Num(x),
                Component::Str(s) => Param::Str(s),
            };
            let _ = write!(sql.text, "({name}{collate} {} ", if *descending { "<" } else { ">" });
            sql.bind(param.clone());
            if n + 1 < count {
                let _ = write!(sql.text, " OR ({name}{collate} = ");
                sql.bind(param);
                sql.push(" AND ");
            }
        }
        for n in 0..count {
            sql.push(if n + 1 < count { "))" } else { ")" });
        }
    }
    sql.push(" ORDER BY ");
    for (n, (name, ty, descending)) in names.iter().enumerate() {
        let collate = if *ty == ComponentType::Str { c } else { "" };
        let dir = if *descending { "DESC" } else { "ASC" };
        let _ = write!(sql.text, "{}{name}{collate} {dir}", if n > 0 { ", " } else { "" });
    }
    sql.push(" LIMIT ");
    let limit = request.limit.min(SEARCH_LIMIT_MAX);
    sql.bind(Param::Int(i64::try_from(limit).unwrap_or(0)));
    let query = sql.finish()?;
    let entries = sort.into_iter().map(|(columns, _)| columns).collect();
    Ok((query, KeyShape { entries }))
}

/// Matching things counted per policy id.
pub(crate) fn count_by_policy(
    dialect: Dialect,
    filter: Option<&Filter>,
    namespaces: Option<&[String]>,
    placeholders: &dyn Placeholders,
) -> Result<Query, String> {
    let mut sql = Sql::new(dialect, placeholders);
    sql.push("SELECT t.policy_id, COUNT(*) FROM things t WHERE ");
    sql.conditions(filter, namespaces);
    sql.push(" GROUP BY t.policy_id");
    sql.finish()
}

/// Whether `path` names `_metadata` or a field in it.
fn in_metadata(path: &str) -> bool {
    path.strip_prefix("_metadata").is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// An RQL pattern as a SQLite `GLOB`: `*` and `?` as they are, and the
/// three characters GLOB gives a meaning (`*`, `?`, `[`) in brackets when
/// RQL means them literally — which it never does, having no escape; so
/// only `[` needs it.
fn glob_pattern(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    for c in pattern.chars() {
        match c {
            '[' => out.push_str("[[]"),
            c => out.push(c),
        }
    }
    out
}

/// An RQL pattern as SQL `LIKE` with `\` as the escape: `*` → `%`,
/// `?` → `_`, and `%`, `_`, `\` escaped.
fn like_pattern(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    for c in pattern.chars() {
        match c {
            '*' => out.push('%'),
            '?' => out.push('_'),
            '%' | '_' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rql::{NoPlaceholders, Scope, SearchQuery};

    fn sql(filter: &str, options: Option<&str>) -> Query {
        let query = SearchQuery::parse(Some(filter), options).unwrap();
        let request = SearchRequest {
            filter: query.filter,
            namespaces: Some(vec!["ns".into()]),
            sort: query.options.effective_sort(),
            after: None,
            limit: 25,
        };
        search(Dialect::Postgres, &request, &NoPlaceholders).unwrap().0
    }

    #[test]
    fn patterns_escape_what_sql_would_read() {
        assert_eq!(like_pattern("a*b?c%d_e\\f"), "a%b_c\\%d\\_e\\\\f");
        assert_eq!(glob_pattern("a*b?c[d]e"), "a*b?c[[]d]e");
    }

    #[test]
    fn values_are_parameters_never_text() {
        let query = sql(r#"eq(attributes/x,"'; DROP TABLE things; --")"#, None);
        assert!(!query.sql.contains("DROP"), "{}", query.sql);
        assert!(query.params.contains(&Param::Str("'; DROP TABLE things; --".into())));
        assert!(query.params.contains(&Param::Str("attributes/x".into())));
    }

    #[test]
    fn wide_filters_stay_shallow() {
        let one = Filter::parse("eq(attributes/a,1)", Scope::THINGS).unwrap();
        let filter = Filter::Or(vec![one; 4096]);
        let query = count_by_policy(Dialect::Sqlite, Some(&filter), None, &NoPlaceholders).unwrap();
        let mut depth: usize = 0;
        let mut deepest = 0;
        for c in query.sql.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            deepest = deepest.max(depth);
        }
        assert!(deepest < 40, "{deepest}");
    }
}
