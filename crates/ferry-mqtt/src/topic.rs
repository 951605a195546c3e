//! Topic name and topic filter rules (§4.7). The broker matches in its
//! topic tree; `filter_matches` is the one-filter match for a client that
//! must tell which of its subscriptions a message came on.

/// The prefix of a shared subscription filter (MQTT 5 §4.8.2).
pub const SHARED_PREFIX: &str = "$share/";

/// Where a broker publishes its own figures; §4.7.2 keeps topics that
/// begin with `$` for the server's own use, and clients may not publish
/// under this one.
pub const SYS_PREFIX: &str = "$SYS";

/// A topic name that a PUBLISH may carry: nonempty, no `+` or `#`.
pub fn is_valid_topic_name(topic: &str) -> bool {
    !topic.is_empty() && !topic.contains(['+', '#'])
}

/// A topic filter: `#` only as the whole last level, `+` only as a whole
/// level; `$share/{group}/{filter}` needs a nonempty group without wildcards
/// or `/`, and a valid filter after it.
pub fn is_valid_topic_filter(filter: &str) -> bool {
    match filter.strip_prefix(SHARED_PREFIX) {
        Some(shared) => match shared.split_once('/') {
            Some((group, inner)) => {
                !group.is_empty() && !group.contains(['+', '#']) && is_valid_plain_filter(inner)
            }
            None => false,
        },
        None => is_valid_plain_filter(filter),
    }
}

/// Whether `filter` is a shared subscription (`$share/{group}/{filter}`),
/// which MQTT 5 gives different rules (e.g. no No Local).
pub fn is_shared_filter(filter: &str) -> bool {
    filter.starts_with(SHARED_PREFIX)
}

/// The group and the filter of a shared subscription's
/// `$share/{group}/{filter}`; `None` for any other filter.
pub fn split_shared(filter: &str) -> Option<(&str, &str)> {
    filter.strip_prefix(SHARED_PREFIX)?.split_once('/')
}

/// Whether the topic name `topic` matches the valid filter `filter`
/// (§4.7): `+` one level, `#` this level and all below (its parent
/// included), and a topic starting with `$` matched by no filter that
/// starts with a wildcard (§4.7.2). A shared filter matches as the filter
/// after its group.
pub fn filter_matches(filter: &str, topic: &str) -> bool {
    let filter = match filter.strip_prefix(SHARED_PREFIX) {
        Some(shared) => shared.split_once('/').map_or("", |(_, inner)| inner),
        None => filter,
    };
    if topic.starts_with('$') && filter.starts_with(['+', '#']) {
        return false;
    }
    let mut levels = topic.split('/');
    for wanted in filter.split('/') {
        match (wanted, levels.next()) {
            ("#", _) => return true,
            ("+", Some(_)) => {}
            (wanted, Some(level)) if wanted == level => {}
            _ => return false,
        }
    }
    levels.next().is_none()
}

fn is_valid_plain_filter(filter: &str) -> bool {
    if filter.is_empty() {
        return false;
    }
    let mut levels = filter.split('/').peekable();
    while let Some(level) = levels.next() {
        let is_last = levels.peek().is_none();
        let valid = match level {
            "+" => true,
            "#" => is_last,
            _ => !level.contains(['+', '#']),
        };
        if !valid {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names() {
        for valid in ["a", "/", "a/b", "/a/", "$SYS/x", " ", "ü/€", "a//b"] {
            assert!(is_valid_topic_name(valid), "{valid:?}");
        }
        for invalid in ["", "+", "#", "a/+", "a/#", "a+b", "sport/tennis#"] {
            assert!(!is_valid_topic_name(invalid), "{invalid:?}");
        }
    }

    #[test]
    fn topic_filters_from_the_spec() {
        // §4.7.1 examples.
        for valid in [
            "sport/tennis/player1/#",
            "sport/#",
            "#",
            "+",
            "+/tennis/#",
            "sport/+/player1",
            "/+",
            "+/+",
            "a//b",
            "/",
            "$SYS/#",
            "$share",
            "$sharefoo/+",
        ] {
            assert!(is_valid_topic_filter(valid), "{valid:?}");
        }
        for invalid in
            ["", "sport/tennis#", "sport/tennis/#/ranking", "sport+", "#/a", "a/b#", "++", "a/+b"]
        {
            assert!(!is_valid_topic_filter(invalid), "{invalid:?}");
        }
        assert_eq!(split_shared("$share/g/a/+"), Some(("g", "a/+")));
        assert_eq!(split_shared("$share/g/"), Some(("g", "")));
        assert_eq!(split_shared("$share/g"), None);
        assert_eq!(split_shared("a/$share/g/b"), None);
    }

    #[test]
    fn shared_subscriptions() {
        for valid in ["$share/g/a", "$share/g/#", "$share/g/+/x", "$share/g//", "$share/ü/a/b"] {
            assert!(is_valid_topic_filter(valid), "{valid:?}");
            assert!(is_shared_filter(valid));
        }
        for invalid in [
            "$share/",
            "$share/g",
            "$share/g/",
            "$share//a",
            "$share/+/a",
            "$share/#/a",
            "$share/g+/a",
            "$share/g/a#",
        ] {
            assert!(!is_valid_topic_filter(invalid), "{invalid:?}");
        }
    }

    #[test]
    fn filters_match_as_section_4_7_says() {
        for (filter, topic, matched) in [
            ("a/b", "a/b", true),
            ("a/+", "a/b", true),
            ("a/+", "a/b/c", false),
            ("a/#", "a", true),
            ("a/#", "a/b/c", true),
            ("#", "a/b", true),
            ("+/+", "/b", true),
            ("+", "a/b", false),
            ("a/b", "a/b/c", false),
            ("a/b/c", "a/b", false),
            ("#", "$SYS/x", false),
            ("+/x", "$SYS/x", false),
            ("$SYS/#", "$SYS/x", true),
            ("$share/g/a/+", "a/b", true),
            ("$share/g/a/+", "x/b", false),
        ] {
            assert_eq!(filter_matches(filter, topic), matched, "{filter} on {topic}");
        }
    }
}
