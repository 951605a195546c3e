//! Search options (`option=sort(+thingId),size(10)`) and the order in
//! which Ditto checks a search request.

use super::ast::Filter;
use super::error::{ErrorKind, RqlError};
use super::field::{Field, FieldKind, Scope, Usage};
use super::java_text::grouped;
use super::limits::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use super::parser::{Parser, RawOption};
use std::fmt;

/// One entry of `sort(…)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SortEntry {
    pub field: Field,
    pub descending: bool,
}

/// The options of one search, as Ditto's query builder applies them: in
/// the order given, a later `sort`, `size` or `limit` overriding an
/// earlier one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchOptions {
    sort: Vec<SortEntry>,
    skip: u32,
    page_size: u32,
    has_limit: bool,
    has_size: bool,
    cursor: Option<String>,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            sort: Vec::new(),
            skip: 0,
            page_size: DEFAULT_PAGE_SIZE,
            has_limit: false,
            has_size: false,
            cursor: None,
        }
    }
}

/// A search request's filter and options, checked in Ditto's order.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    /// `None` when the request has no filter: every thing matches.
    pub filter: Option<Filter>,
    pub options: SearchOptions,
}

impl SearchQuery {
    /// Parses `filter=` and `option=` as Ditto's search does: the options'
    /// syntax and their cursor rules first (`ThingsSearchCursor`), then
    /// the filter (`QueryFilterCriteriaFactory`), then the options' values
    /// and sort fields (`QueryParser`, `MongoQueryBuilder`); the first
    /// failure is the answer.
    pub fn parse(filter: Option<&str>, options: Option<&str>) -> Result<SearchQuery, RqlError> {
        let raw = match options {
            Some(text) => Parser::options(text)?,
            None => Vec::new(),
        };
        check_cursor_rules(&raw)?;
        let filter = filter.map(|text| Filter::parse(text, Scope::THINGS)).transpose()?;
        let options = SearchOptions::apply(raw)?;
        Ok(SearchQuery { filter, options })
    }
}

const LIMIT_WITH_CURSOR: &str = "The options 'cursor' and 'limit' must not be used together.";
const CURSOR_INVALID: &str = "The option 'cursor' is not valid for the search request.";

fn option_error(
    offset: usize,
    message: impl Into<String>,
    description: Option<&'static str>,
) -> RqlError {
    RqlError::new(ErrorKind::InvalidOption { description }, offset, message)
}

/// Ditto's `ThingsSearchCursor.extractCursor`.
fn check_cursor_rules(raw: &[RawOption]) -> Result<(), RqlError> {
    let sizes: Vec<i32> = raw
        .iter()
        .filter_map(|o| if let RawOption::Size(n) = o { Some(*n) } else { None })
        .collect();
    let cursors = raw.iter().filter(|o| matches!(o, RawOption::Cursor(_))).count();
    let limits = raw.iter().filter(|o| matches!(o, RawOption::Limit(..))).count();
    if sizes.len() > 1 {
        return Err(option_error(0, "There may not be more than 1 'size' option.", None));
    }
    if sizes.first().is_some_and(|n| *n <= 0) {
        return Err(option_error(0, "The option 'size' must be a positive integer.", None));
    }
    if cursors > 1 {
        return Err(option_error(
            0,
            CURSOR_INVALID,
            Some("There may not be more than 1 'cursor' option."),
        ));
    }
    if cursors == 1 && limits > 0 {
        return Err(option_error(0, CURSOR_INVALID, Some(LIMIT_WITH_CURSOR)));
    }
    Ok(())
}

impl SearchOptions {
    /// Ditto's `ParameterOptionVisitor` driving its `MongoQueryBuilder`,
    /// whose `Validator` words the range errors.
    fn apply(raw: Vec<RawOption>) -> Result<SearchOptions, RqlError> {
        let mut options = SearchOptions::default();
        for option in raw {
            match option {
                RawOption::Limit(offset, count) => {
                    // Ditto narrows both to Java ints (`toInt`) before it
                    // checks them.
                    let skip = check_range("skip", i64::from(offset as i32), i64::from(i32::MAX))?;
                    options.page_size =
                        check_range("limit", i64::from(count as i32), i64::from(MAX_PAGE_SIZE))?;
                    options.skip = skip;
                    options.has_limit = true;
                }
                RawOption::Size(size) => {
                    options.page_size =
                        check_range("size", i64::from(size), i64::from(MAX_PAGE_SIZE))?;
                    options.skip = 0;
                    options.has_size = true;
                }
                RawOption::Sort(entries) => {
                    options.sort = entries
                        .into_iter()
                        .map(|(text, offset, descending)| {
                            let field = Field::classify(&text, Usage::Sort, Scope::THINGS, offset)
                                .map_err(|e| option_error(offset, e.message, None))?;
                            Ok(SortEntry { field, descending })
                        })
                        .collect::<Result<_, RqlError>>()?;
                }
                RawOption::Cursor(cursor) => options.cursor = Some(cursor),
            }
        }
        Ok(options)
    }

    /// The sort as requested; empty when the request has none.
    pub fn sort(&self) -> &[SortEntry] {
        &self.sort
    }

    /// The sort the store applies (`MongoQueryBuilder.sort`): the
    /// requested entries up to and including `thingId`, or all of them
    /// followed by `+thingId`, so that the order is total and a cursor
    /// can resume it.
    pub fn effective_sort(&self) -> Vec<SortEntry> {
        let is_thing_id = |e: &SortEntry| {
            e.field.kind() == &FieldKind::Simple && e.field.pointer().first() == Some("thingId")
        };
        match self.sort.iter().position(is_thing_id) {
            Some(i) => self.sort[..=i].to_vec(),
            None => {
                let mut sort = self.sort.clone();
                sort.push(SortEntry {
                    field: Field::classify("thingId", Usage::Sort, Scope::THINGS, 0)
                        .expect("thingId is a field"),
                    descending: false,
                });
                sort
            }
        }
    }

    /// Things to skip (`limit`'s offset; `size` resets it to 0).
    pub fn skip(&self) -> u32 {
        self.skip
    }

    /// Things per page: the last `size` or `limit` count, else Ditto's
    /// default of 25.
    pub fn page_size(&self) -> u32 {
        self.page_size
    }

    /// Whether `limit` was used; Ditto then answers without a cursor.
    pub fn has_limit(&self) -> bool {
        self.has_limit
    }

    /// Whether `size` was used; Ditto then answers without
    /// `nextPageOffset`.
    pub fn has_size(&self) -> bool {
        self.has_size
    }

    /// The cursor of a follow-up page, opaque to RQL.
    pub fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }
}

/// Ditto's `Validator.checkMinParamValue` and `checkMaxParamValue`, whose
/// `MessageFormat` groups digits by thousands.
fn check_range(param: &str, value: i64, max: i64) -> Result<u32, RqlError> {
    if value < 0 {
        return Err(option_error(
            0,
            format!(
                "Parameter <{param}> must be greater than or equal to <0> but it was <{}>!",
                grouped(value)
            ),
            None,
        ));
    }
    if value > max {
        return Err(option_error(
            0,
            format!(
                "Parameter <{param}> must be less than or equal to <{}> but it was <{}>!",
                grouped(max),
                grouped(value)
            ),
            None,
        ));
    }
    Ok(u32::try_from(value).expect("checked against an int's range"))
}

impl fmt::Display for SortEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", if self.descending { '-' } else { '+' }, self.field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(options: &str) -> Result<SearchOptions, RqlError> {
        SearchQuery::parse(None, Some(options)).map(|q| q.options)
    }

    fn code(options: &str) -> &'static str {
        parse(options).unwrap_err().to_ditto_error().error
    }

    #[test]
    fn parses_dittos_options() {
        let options = parse("sort(+thingId,-attributes/x)").unwrap();
        let sort: Vec<String> = options.sort().iter().map(ToString::to_string).collect();
        assert_eq!(sort, ["+thingId", "-attributes/x"]);
        assert_eq!(options.page_size(), DEFAULT_PAGE_SIZE);

        let options = parse("size(10),sort(-_modified)").unwrap();
        assert_eq!((options.page_size(), options.skip(), options.has_size()), (10, 0, true));
        let sort: Vec<String> = options.effective_sort().iter().map(ToString::to_string).collect();
        assert_eq!(sort, ["-_modified", "+thingId"]);

        let options = parse("sort(-thingId,+policyId)").unwrap();
        assert_eq!(options.effective_sort().len(), 1);

        let options = parse("limit(5,20)").unwrap();
        assert_eq!((options.skip(), options.page_size(), options.has_limit()), (5, 20, true));
        let options = parse("limit(5,20),size(3)").unwrap();
        assert_eq!((options.skip(), options.page_size()), (0, 3));

        let options = parse("  cursor(AbC-12_x),size(007)").unwrap();
        assert_eq!(options.cursor(), Some("AbC-12_x"));
        assert_eq!(options.page_size(), 7);
        assert_eq!(parse("limit(0 ,1 )").unwrap().page_size(), 1);
        assert_eq!(parse("sort(+features/x/properties/y)").unwrap().sort().len(), 1);
        assert_eq!(parse("size(200)").unwrap().page_size(), 200);
    }

    /// Ditto's `RqlOptionsParserTest`, at the syntax level.
    #[test]
    fn parses_the_syntax_of_dittos_option_cases() {
        let options =
            Parser::options("limit(0,1),sort(-attributes/username),cursor(ABC),size(463)").unwrap();
        assert_eq!(
            options,
            [
                RawOption::Limit(0, 1),
                RawOption::Sort(vec![("attributes/username".into(), 17, true)]),
                RawOption::Cursor("ABC".into()),
                RawOption::Size(463),
            ]
        );
        let twenty: Vec<String> = (0..20).map(|i| format!("+attributes/a{i}")).collect();
        match Parser::options(&format!("sort({})", twenty.join(","))).unwrap().as_slice() {
            [RawOption::Sort(entries)] => assert_eq!(entries.len(), 20),
            other => panic!("{other:?}"),
        }
        for text in [
            "sort(username)",
            "sort(-username,owner)",
            "limit(0)",
            "limit(0,1,2)",
            "limit(100000000000000000000,10)",
            "cursor(",
            "cursor(0123456789-ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz",
        ] {
            let error = Parser::options(text).expect_err(text);
            assert_eq!(error.kind, ErrorKind::Syntax, "{text}");
        }
    }

    #[test]
    fn refuses_what_ditto_refuses_with_its_codes() {
        let cases = [
            // The options' syntax: Ditto's cursor logic maps its parser's
            // failure to an RQL error.
            ("", "rql.expression.invalid"),
            ("sort(thingId)", "rql.expression.invalid"),
            ("sort()", "rql.expression.invalid"),
            ("size( 5)", "rql.expression.invalid"),
            ("size(5 )", "rql.expression.invalid"),
            ("size(-1)", "rql.expression.invalid"),
            ("size(99999999999)", "rql.expression.invalid"),
            ("limit(1)", "rql.expression.invalid"),
            ("limit(-0,1)", "rql.expression.invalid"),
            ("size(5), size(6)", "rql.expression.invalid"),
            ("page(1)", "rql.expression.invalid"),
            ("size(5),", "rql.expression.invalid"),
            // Cursor rules, then values.
            ("size(5),size(6)", "thing-search:search.option.invalid"),
            ("size(0)", "thing-search:search.option.invalid"),
            ("cursor(a),cursor(b)", "thing-search:search.option.invalid"),
            ("cursor(a),limit(0,5)", "thing-search:search.option.invalid"),
            ("size(201)", "thing-search:search.option.invalid"),
            ("limit(0,201)", "thing-search:search.option.invalid"),
            ("limit(-1,5)", "thing-search:search.option.invalid"),
            ("limit(0,-5)", "thing-search:search.option.invalid"),
            ("sort(+foo)", "thing-search:search.option.invalid"),
            ("sort(+features/x/definition)", "thing-search:search.option.invalid"),
        ];
        for (options, expected) in cases {
            assert_eq!(code(options), expected, "{options}");
        }
    }

    #[test]
    fn words_errors_as_ditto_does() {
        let error = parse("size(1000)").unwrap_err().to_ditto_error();
        assert_eq!(
            error.message,
            "Parameter <size> must be less than or equal to <200> but it was <1,000>!"
        );
        assert_eq!(error.description.as_deref(), Some("At least one provided option is invalid."));
        let error = parse("limit(-1,5)").unwrap_err().to_ditto_error();
        assert_eq!(
            error.message,
            "Parameter <skip> must be greater than or equal to <0> but it was <-1>!"
        );
        let error = parse("cursor(a),limit(0,5)").unwrap_err().to_ditto_error();
        assert_eq!(error.message, "The option 'cursor' is not valid for the search request.");
        assert_eq!(error.description.as_deref(), Some(LIMIT_WITH_CURSOR));
        assert_eq!(parse("sort(+foo)").unwrap_err().message, "Unknown property name: foo");
        let error = parse("size(99999999999)").unwrap_err();
        assert_eq!(
            error.message,
            "Unknown error during parsing options: For input string: \"99999999999\""
        );
        // Ditto narrows limit's longs to ints: 2^32 + 5 is 5.
        assert_eq!(parse("limit(4294967301,5)").unwrap().skip(), 5);
        assert_eq!(grouped(-2_147_483_648), "-2,147,483,648");
    }

    #[test]
    fn checks_in_dittos_order() {
        // Option syntax before the filter, the filter before option values.
        let error = SearchQuery::parse(Some("eq(foo,1)"), Some("size(")).unwrap_err();
        assert!(error.message.starts_with("Unexpected end of input"), "{}", error.message);
        let error = SearchQuery::parse(Some("eq(foo,1)"), Some("size(500)")).unwrap_err();
        assert_eq!(error.message, "Unknown property name: foo");
        let error = SearchQuery::parse(Some("eq(thingId,1)"), Some("size(500)")).unwrap_err();
        assert_eq!(error.to_ditto_error().error, "thing-search:search.option.invalid");
        let query = SearchQuery::parse(None, None).unwrap();
        assert_eq!(query.filter, None);
        assert_eq!(query.options, SearchOptions::default());
    }
}
