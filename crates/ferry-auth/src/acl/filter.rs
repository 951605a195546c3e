//! MQTT topic filters compared with topic names and with each other, level
//! by level (§4.7). ACL evaluation needs three questions, not only the
//! topic tree's one: does a filter match a topic name (`matches`), does a
//! rule's filter match every topic a requested filter does (`covers`), and
//! do two filters share any topic (`intersects`).
//!
//! All three take levels as iterators, so that a rule's `%u`/`%c` levels can
//! be replaced by the client's values as they are compared, without
//! building the substituted filter as a string.
//!
//! Two corners of §4.7 shape the code:
//! - `#` matches its parent level too (`a/#` matches `a`), but at the top a
//!   topic has no empty parent: `#` matches exactly what `+/#` matches.
//! - A filter starting with a wildcard does not match a topic name starting
//!   with `$` (§4.7.2), so `#` gives no access to `$SYS`; comparing two
//!   filters, a leading wildcard and a leading `$` level share nothing.

/// One level of a filter or topic name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Level<'a> {
    Literal(&'a str),
    /// `+`: any one level.
    Single,
    /// `#`: this level's parent and any number of levels below; always last.
    Multi,
}

impl<'a> Level<'a> {
    pub(super) fn of(level: &'a str) -> Level<'a> {
        match level {
            "+" => Level::Single,
            "#" => Level::Multi,
            _ => Level::Literal(level),
        }
    }

    fn is_wildcard(self) -> bool {
        !matches!(self, Level::Literal(_))
    }

    fn is_dollar(self) -> bool {
        matches!(self, Level::Literal(level) if level.starts_with('$'))
    }
}

/// The levels of a filter or topic name.
pub(super) fn levels(text: &str) -> impl Iterator<Item = Level<'_>> + Clone {
    text.split('/').map(Level::of)
}

/// A topic filter as §4.7.1 allows it: nonempty, `+` only as a whole
/// level, `#` only as the whole last level.
pub(super) fn is_valid_filter(filter: &str) -> bool {
    if filter.is_empty() {
        return false;
    }
    let mut levels = filter.split('/').peekable();
    while let Some(level) = levels.next() {
        let valid = match level {
            "+" => true,
            "#" => levels.peek().is_none(),
            _ => !level.contains(['+', '#']),
        };
        if !valid {
            return false;
        }
    }
    true
}

/// A topic name a PUBLISH may carry: nonempty, no wildcard characters.
pub(super) fn is_valid_topic_name(topic: &str) -> bool {
    !topic.is_empty() && !topic.contains(['+', '#'])
}

/// Whether `filter` matches the topic name `topic`. A topic name is a
/// filter without wildcards that matches only itself, so this is `covers`
/// with the topic as the filter; the caller has checked that `topic`
/// has no wildcard characters.
pub(super) fn matches<'a>(
    filter: impl Iterator<Item = Level<'a>>,
    topic: impl Iterator<Item = Level<'a>>,
) -> bool {
    covers(filter, topic)
}

/// Whether every topic name `filter` matches is matched by `rule`.
pub(super) fn covers<'a>(
    mut rule: impl Iterator<Item = Level<'a>>,
    mut filter: impl Iterator<Item = Level<'a>>,
) -> bool {
    let mut first = true;
    loop {
        let (r, f) = (rule.next(), filter.next());
        if first {
            if let (Some(r), Some(f)) = (r, f) {
                if r.is_wildcard() && f.is_dollar() {
                    return false;
                }
            }
        }
        match (r, f) {
            (Some(Level::Multi), _) => return true,
            (None, None) => return true,
            (None, Some(_)) | (Some(_), None) => return false,
            // A top-level `#` is `+/#` (see the module doc), which `+/#`
            // covers; below the top it matches its parent, which a `+`
            // level does not.
            (Some(Level::Single), Some(Level::Multi)) => {
                return first && rule.next() == Some(Level::Multi);
            }
            (Some(Level::Single), Some(_)) => {}
            (Some(Level::Literal(r)), Some(Level::Literal(f))) if r == f => {}
            (Some(Level::Literal(_)), Some(_)) => return false,
        }
        first = false;
    }
}

/// Whether some topic name is matched by both filters.
pub(super) fn intersects<'a>(
    mut a: impl Iterator<Item = Level<'a>>,
    mut b: impl Iterator<Item = Level<'a>>,
) -> bool {
    let mut first = true;
    loop {
        let (x, y) = (a.next(), b.next());
        if first {
            if let (Some(x), Some(y)) = (x, y) {
                if (x.is_wildcard() && y.is_dollar()) || (x.is_dollar() && y.is_wildcard()) {
                    return false;
                }
            }
        }
        match (x, y) {
            // Whatever the other filter has left matches some topic, and `#`
            // matches it (or, if nothing is left, the parent).
            (Some(Level::Multi), _) | (_, Some(Level::Multi)) => return true,
            (None, None) => return true,
            (None, Some(_)) | (Some(_), None) => return false,
            (Some(Level::Single), Some(_)) | (Some(_), Some(Level::Single)) => {}
            (Some(Level::Literal(x)), Some(Level::Literal(y))) if x == y => {}
            (Some(Level::Literal(_)), Some(Level::Literal(_))) => return false,
        }
        first = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn m(filter: &str, topic: &str) -> bool {
        matches(levels(filter), levels(topic))
    }
    fn c(rule: &str, filter: &str) -> bool {
        covers(levels(rule), levels(filter))
    }
    fn i(a: &str, b: &str) -> bool {
        intersects(levels(a), levels(b))
    }

    #[test]
    fn matching_follows_the_spec_examples() {
        for (filter, topic, expected) in [
            ("sport/tennis/player1/#", "sport/tennis/player1", true),
            ("sport/tennis/player1/#", "sport/tennis/player1/ranking", true),
            ("sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", true),
            ("sport/#", "sport", true),
            ("#", "sport/tennis", true),
            ("sport/tennis/+", "sport/tennis/player1", true),
            ("sport/tennis/+", "sport/tennis/player1/ranking", false),
            ("sport/+", "sport", false),
            ("sport/+", "sport/", true),
            ("+/+", "/finance", true),
            ("/+", "/finance", true),
            ("+", "/finance", false),
            ("#", "$SYS/uptime", false),
            ("+/monitor/Clients", "$SYS/monitor/Clients", false),
            ("$SYS/#", "$SYS/monitor/Clients", true),
            ("$SYS/monitor/+", "$SYS/monitor/Clients", true),
            ("a/$x", "a/$x", true),
            ("a/+", "a/$x", true),
        ] {
            assert_eq!(m(filter, topic), expected, "{filter} vs {topic}");
        }
    }

    #[test]
    fn covering_and_intersecting_corners() {
        for (rule, filter, covers, intersects) in [
            ("#", "a/#", true, true),
            ("+/#", "#", true, true),
            ("+", "#", false, true),
            ("a/+", "a/#", false, true),
            ("a/#", "a", true, true),
            ("a", "a/#", false, true),
            ("#", "$SYS/#", false, false),
            ("+/#", "$SYS/x", false, false),
            ("$SYS/#", "#", false, false),
            ("$SYS/#", "$SYS/+", true, true),
            ("a/b", "a/c", false, false),
            ("a/+/c", "+/b/#", false, true),
        ] {
            assert_eq!(c(rule, filter), covers, "{rule} covers {filter}");
            assert_eq!(i(rule, filter), intersects, "{rule} intersects {filter}");
        }
    }

    #[test]
    fn filter_and_topic_validity() {
        for valid in ["a", "#", "+", "a/#", "+/+/#", "/", "a//b", "$SYS/#"] {
            assert!(is_valid_filter(valid), "{valid}");
        }
        for invalid in ["", "a#", "a/#/b", "#/a", "a+/b", "a/b+", "##"] {
            assert!(!is_valid_filter(invalid), "{invalid}");
        }
        assert!(is_valid_topic_name("a/b") && is_valid_topic_name("/"));
        assert!(
            !is_valid_topic_name("") && !is_valid_topic_name("a/+") && !is_valid_topic_name("#")
        );
    }

    /// Every topic name of 1 to 4 levels from `a`, `b`, `c` and `$x`: `c`
    /// stands for a level no filter names, `$x` for the broker's topics.
    fn all_topics() -> Vec<String> {
        let alphabet = ["a", "b", "c", "$x"];
        let mut topics: Vec<String> = alphabet.iter().map(|level| level.to_string()).collect();
        let mut last = topics.clone();
        for _ in 1..4 {
            last = last
                .iter()
                .flat_map(|topic| alphabet.iter().map(move |level| format!("{topic}/{level}")))
                .collect();
            topics.extend(last.iter().cloned());
        }
        topics
    }

    fn brute_force_agrees(rule: &str, filter: &str, topics: &[String]) {
        let in_filter = topics.iter().filter(|topic| m(filter, topic));
        let covers = in_filter.clone().all(|topic| m(rule, topic));
        let intersects = in_filter.clone().any(|topic| m(rule, topic));
        assert_eq!(c(rule, filter), covers, "{rule} covers {filter}");
        assert_eq!(i(rule, filter), intersects, "{rule} intersects {filter}");
        assert_eq!(i(filter, rule), intersects, "{filter} intersects {rule}");
    }

    /// Filters of 1 to 3 levels from `a`, `b`, `$x`, `+` and `#`, `#` only
    /// last.
    fn filter() -> impl Strategy<Value = String> {
        let level = prop::sample::select(vec!["a", "b", "$x", "+", "#"]);
        prop::collection::vec(level, 1..=3)
            .prop_filter("`#` only last", |levels| {
                levels.iter().rev().skip(1).all(|&level| level != "#")
            })
            .prop_map(|levels| levels.join("/"))
    }

    proptest! {
        #[test]
        fn covers_and_intersects_agree_with_brute_force(rule in filter(), filter in filter()) {
            brute_force_agrees(&rule, &filter, &all_topics());
        }
    }

    /// The same check for every pair of those filters: there are few enough
    /// to leave no corner to chance.
    #[test]
    fn covers_and_intersects_agree_with_brute_force_for_every_small_pair() {
        let alphabet = ["a", "b", "$x", "+", "#"];
        let mut filters: Vec<String> = alphabet.iter().map(|level| level.to_string()).collect();
        for _ in 1..3 {
            let longer: Vec<String> = filters
                .iter()
                .filter(|filter| !filter.ends_with('#'))
                .flat_map(|filter| alphabet.iter().map(move |level| format!("{filter}/{level}")))
                .collect();
            filters.extend(longer);
        }
        filters.sort();
        filters.dedup();
        let topics = all_topics();
        for rule in &filters {
            for filter in &filters {
                brute_force_agrees(rule, filter, &topics);
            }
        }
    }
}
