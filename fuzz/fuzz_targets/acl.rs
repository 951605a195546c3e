//! Parses the input as an ACL file; when it parses, asks `may_publish`,
//! `may_subscribe` and `may_receive` for a few clients about topics and
//! filters taken from the input (its quoted strings, which in a rule file
//! are mostly topics and subjects) and a fixed list. Nothing may panic, and
//! the answers must agree with each other as the module doc of
//! crates/ferry-auth/src/acl.rs promises:
//! - a topic name asked as a filter is `Allowed` exactly when
//!   `may_receive` says yes for it, else `Denied`;
//! - a filter that is `Allowed` lets every topic it matches be received,
//!   and one that is `Denied` none (checked on one topic it matches).
#![no_main]

use ferry_auth::{Acl, Principal, SubscribeVerdict};
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::Arc;

/// Strings taken from the input at most, to bound the work per input.
const MAX_WORDS: usize = 8;

const FIXED: &[&str] = &[
    "a",
    "a/b",
    "a/secret",
    "devices/alice/temp",
    "devices/+/temp",
    "clients/c1/status",
    "#",
    "+",
    "+/#",
    "a/#",
    "$SYS/broker/uptime",
    "$SYS/#",
    "$share/g/a/#",
    "$share/g",
    "/",
    "a//b",
    "",
];

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(acl) = Acl::parse(text, Path::new("acl.toml")) else { return };
    let _ = acl.rules();

    // The contents of "..." strings: topics, user names, groups.
    let words: Vec<&str> = text.split('"').skip(1).step_by(2).take(MAX_WORDS).collect();
    let principals = principals(&words);

    let mut topics: Vec<String> = FIXED.iter().map(|topic| topic.to_string()).collect();
    for word in &words {
        topics.push(word.to_string());
        // `%u` and `%c` filled in as a client would see them.
        for who in &principals {
            let user = who.username.as_deref().unwrap_or("");
            topics.push(word.replace("%u", user).replace("%c", &who.client_id));
        }
        topics.push(format!("$share/g/{word}"));
    }

    for who in &principals {
        for topic in &topics {
            let _ = acl.may_publish(who, topic);
            let receive = acl.may_receive(who, topic);
            let verdict = acl.may_subscribe(who, topic);
            if is_plain_topic_name(topic) {
                let expected =
                    if receive { SubscribeVerdict::Allowed } else { SubscribeVerdict::Denied };
                assert_eq!(verdict, expected, "{who:?} subscribing to the topic name {topic:?}");
            }
            if let Some(example) = topic_matched_by(topic) {
                match verdict {
                    SubscribeVerdict::Allowed => assert!(
                        acl.may_receive(who, &example),
                        "{who:?}: {topic:?} Allowed but {example:?} may not be received"
                    ),
                    SubscribeVerdict::Denied => assert!(
                        !acl.may_receive(who, &example),
                        "{who:?}: {topic:?} Denied but {example:?} may be received"
                    ),
                    SubscribeVerdict::Filtered => {}
                }
            }
        }
    }
});

/// Fixed clients, and a few made of the input's strings.
fn principals(words: &[&str]) -> Vec<Principal> {
    let arc = |text: &str| -> Arc<str> { Arc::from(text) };
    let mut principals = vec![
        Principal { client_id: arc("c1"), ..Principal::default() },
        Principal { client_id: arc("c1"), username: Some(arc("alice")), ..Principal::default() },
        Principal {
            client_id: arc("sensor-1"),
            username: Some(arc("bob")),
            certificate: Some(arc("device-42")),
            groups: vec![arc("operators"), arc("from-jwt")],
        },
        // Values that must not stand for a level.
        Principal { client_id: arc("a/#"), username: Some(arc("+")), ..Principal::default() },
        Principal { client_id: arc("$SYS"), username: Some(arc("")), ..Principal::default() },
    ];
    for chunk in words.chunks(4) {
        let at = |index: usize| chunk.get(index).copied();
        principals.push(Principal {
            client_id: arc(at(0).unwrap_or("")),
            username: at(1).map(arc),
            certificate: at(2).map(arc),
            groups: chunk.iter().map(|word| arc(word)).collect(),
        });
    }
    principals
}

/// A topic name (no wildcards) that is not a shared subscription, so that
/// `may_subscribe` reads it as the one topic `may_receive` does.
fn is_plain_topic_name(topic: &str) -> bool {
    !topic.is_empty() && !topic.contains(['+', '#']) && !topic.starts_with("$share/")
}

/// One topic name a valid, unshared filter matches: `+` replaced by a
/// level, and a last `#` by one level too (which never starts with `$`, so
/// a leading wildcard matches it).
fn topic_matched_by(filter: &str) -> Option<String> {
    if filter.is_empty() || filter.starts_with("$share/") {
        return None;
    }
    let levels: Vec<&str> = filter.split('/').collect();
    let last = levels.len() - 1;
    let mut topic = Vec::with_capacity(levels.len());
    for (index, level) in levels.into_iter().enumerate() {
        match level {
            "+" => topic.push("x"),
            "#" if index == last => topic.push("x"),
            _ if level.contains(['+', '#']) => return None,
            _ => topic.push(level),
        }
    }
    Some(topic.join("/"))
}
