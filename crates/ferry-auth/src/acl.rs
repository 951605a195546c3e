//! The ACL file: which clients may publish to, subscribe to and receive
//! which topics.
//!
//! ```toml
//! # Optional: named groups of user names, in addition to groups a JWT brings.
//! [groups]
//! operators = ["alice", "bob"]
//!
//! [[rule]]
//! permission = "allow"        # "allow" | "deny"
//! action = "publish"          # "publish" | "subscribe" | "all"
//! topics = ["devices/%u/#"]   # filters; %u = user name, %c = client id
//! user = "alice"              # or client_id, certificate, group,
//!                             # anonymous = true; none: every client
//! ```
//!
//! Rules are read in file order and the first that applies decides; when
//! none does, the answer is no. A file lists what is allowed, so a client,
//! topic or action it forgets is refused rather than let through.
//!
//! A rule applies when its subject is the client (a `group` is one the
//! client's `Principal::groups` names, or one whose `[groups]` entry lists
//! its user name), its action covers the operation (`subscribe` means
//! read: subscribing and receiving), and one of its filters matches.
//!
//! `%u` and `%c` stand for a whole level and are replaced by the client's
//! user name and client id. A value that would change what the level means
//! makes the filter match nothing: one containing `/`, `+` or `#` (a client
//! id `a/#` must not turn `devices/%c` into `devices/a/#`), one starting with
//! `$` (a client id `$SYS` must not turn `%c/#` into `$SYS/#`), or an empty
//! one. A client without a user name matches no `%u` filter, as in
//! Mosquitto.
//!
//! # Subscribing
//!
//! Publishing and receiving ask about one topic name, and the first rule
//! whose filter matches it decides. A SUBSCRIBE asks about a filter `F`,
//! which can be partly allowed: with `deny "a/secret"` before
//! `allow "a/#"`, a subscription to `a/#` may receive everything under `a`
//! except one topic. Rules that apply to the client and to reading are
//! walked in order, and each rule filter `R` is compared with `F`:
//!
//! - `R` covers `F` (matches every topic `F` does): this rule decides. An
//!   allow gives `Allowed`, or `Filtered` if an earlier rule that only
//!   partly overlapped `F` was a deny; a deny gives `Denied`, or `Filtered`
//!   if an earlier partly-overlapping rule was an allow.
//! - `R` and `F` share some topics: the rule's permission is remembered as
//!   a partial allow or deny, and the walk goes on.
//! - They share none: the rule is skipped.
//!
//! With no covering rule, the default deny decides: `Filtered` if some rule
//! partly allowed, else `Denied`. `Filtered` means the broker grants the
//! subscription and asks `may_receive` for every message it would deliver
//! through it, retained messages included; a rule whose several filters
//! together cover `F` but none alone does also ends there, which costs
//! checks but never lets through what `may_receive` would refuse.
//!
//! A shared subscription `$share/{group}/{filter}` is judged by its filter:
//! it delivers the same topics.
//!
//! # Mosquitto's format
//!
//! A file in Mosquitto's ACL format (`topic`, `user` and `pattern` lines)
//! is read as such, into the same rules (`mosquitto.rs`).

mod filter;
mod mosquitto;

use crate::Principal;
use filter::Level;
use serde::Deserialize;
use serde_path_to_error::Segment;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The most rules a file may hold. Every PUBLISH and every delivery walks
/// the rules in order, so their number is a cost on the data path: at
/// roughly 10 ns a rule, 10,000 rules is 100 µs a message, and more wants
/// an index rather than a list.
pub const MAX_RULES: usize = 10_000;

/// The longest topic filter: an MQTT string's length is 16 bits, so a longer
/// filter could never match.
const MAX_FILTER_BYTES: usize = 65_535;

/// The prefix of a shared subscription (MQTT 5 §4.8.2).
const SHARED_PREFIX: &str = "$share/";

/// An ACL file that cannot be used, located by file, line and key, and by
/// rule number when the problem is in a rule.
#[derive(Debug, thiserror::Error)]
pub enum AclError {
    #[error("{path}: cannot read: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}: key `{key}`: {message}")]
    Invalid { path: PathBuf, line: usize, key: String, message: String },
    /// Not TOML at all: there is no key to name yet.
    #[error("{path}:{line}: {message}")]
    Syntax { path: PathBuf, line: usize, message: String },
    /// `rule` counts the file's `[[rule]]` tables from 1.
    #[error("{path}:{line}: rule {rule}: key `{key}`: {message}")]
    Rule { path: PathBuf, line: usize, rule: usize, key: String, message: String },
}

/// What a SUBSCRIBE's filter comes to (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscribeVerdict {
    /// Every topic the filter matches may be received.
    Allowed,
    /// Some may: grant the subscription, and ask `Acl::may_receive` for
    /// each message before it is delivered.
    Filtered,
    /// None may.
    Denied,
}

/// A loaded ACL file: its rules in order, checked, with `[groups]` folded
/// into the rules that name them.
#[derive(Debug)]
pub struct Acl {
    rules: Vec<Rule>,
    /// `[groups]`: each group's user names, for who asks which groups a
    /// user is in (the admin API's `[admin] groups`).
    groups: BTreeMap<String, Vec<String>>,
    /// A file in Mosquitto's format: as Mosquitto does, every SUBSCRIBE is
    /// granted, and what it would deliver is checked message by message.
    grants_every_subscription: bool,
}

impl Acl {
    /// Reads and checks the file at `path`.
    pub fn load(path: &Path) -> Result<Acl, AclError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| AclError::Read { path: path.to_owned(), source })?;
        Acl::parse(&text, path)
    }

    /// Checks the whole file and refuses it at the first problem: a
    /// half-understood ACL would allow or deny what its author did not mean.
    /// `path` is only for error messages.
    pub fn parse(text: &str, path: &Path) -> Result<Acl, AclError> {
        if mosquitto::is_mosquitto_format(text) {
            let rules = mosquitto::parse(text, path)?;
            return Ok(Acl { rules, groups: BTreeMap::new(), grants_every_subscription: true });
        }
        let deserializer = toml::Deserializer::new(text);
        let file: RawFile = serde_path_to_error::deserialize(deserializer)
            .map_err(|error| deserialize_error(error, text, path))?;
        if let Some(extra) = file.rule.get(MAX_RULES) {
            return Err(AclError::Invalid {
                path: path.to_owned(),
                line: line_of(text, extra.span().start),
                key: "rule".into(),
                message: format!("more than {MAX_RULES} rules, the most Ferry evaluates"),
            });
        }
        let rules = file
            .rule
            .into_iter()
            .enumerate()
            .map(|(index, rule)| Rule::from_raw(rule, &file.groups, index + 1, text, path))
            .collect::<Result<_, _>>()?;
        Ok(Acl { rules, groups: file.groups, grants_every_subscription: false })
    }

    /// How many rules the file holds, for a log line.
    pub fn rules(&self) -> usize {
        self.rules.len()
    }

    /// The `[groups]` that list `user`.
    pub fn groups_of<'a>(&'a self, user: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.groups
            .iter()
            .filter(move |(_, members)| members.iter().any(|member| member == user))
            .map(|(name, _)| name.as_str())
    }

    /// May this client publish to this topic name?
    pub fn may_publish(&self, who: &Principal, topic: &str) -> bool {
        self.decide_topic(who, Operation::Publish, topic)
    }

    /// May this client subscribe to this filter? See the module doc.
    pub fn may_subscribe(&self, who: &Principal, filter: &str) -> SubscribeVerdict {
        let Some(filter) = unshared(filter).filter(|inner| filter::is_valid_filter(inner)) else {
            return SubscribeVerdict::Denied;
        };
        let denied = if self.grants_every_subscription {
            SubscribeVerdict::Filtered
        } else {
            SubscribeVerdict::Denied
        };
        let values = Substitutions::of(who);
        let (mut partial_allow, mut partial_deny) = (false, false);
        for rule in self.applying(who, Operation::Read) {
            let mut overlaps = false;
            for pattern in &rule.topics {
                let Some(levels) = pattern.levels(&values) else { continue };
                if filter::covers(levels.clone(), filter::levels(filter)) {
                    return match (rule.permission, partial_allow, partial_deny) {
                        (Permission::Allow, _, false) => SubscribeVerdict::Allowed,
                        (Permission::Deny, false, _) => denied,
                        _ => SubscribeVerdict::Filtered,
                    };
                }
                overlaps = overlaps || filter::intersects(levels, filter::levels(filter));
            }
            if overlaps {
                match rule.permission {
                    Permission::Allow => partial_allow = true,
                    Permission::Deny => partial_deny = true,
                }
            }
        }
        if partial_allow {
            SubscribeVerdict::Filtered
        } else {
            denied
        }
    }

    /// May a message on this topic name be delivered to this client (read
    /// permission, from the rules whose action is subscribe or all)?
    pub fn may_receive(&self, who: &Principal, topic: &str) -> bool {
        self.decide_topic(who, Operation::Read, topic)
    }

    /// The first rule for `who` and `operation` whose filter matches `topic`
    /// decides; none: no.
    fn decide_topic(&self, who: &Principal, operation: Operation, topic: &str) -> bool {
        // A name with wildcard characters is no topic; refusing it here
        // keeps a `+` rule level from matching a literal `#`.
        if !filter::is_valid_topic_name(topic) {
            return false;
        }
        let values = Substitutions::of(who);
        self.applying(who, operation)
            .find(|rule| {
                rule.topics.iter().any(|pattern| {
                    pattern
                        .levels(&values)
                        .is_some_and(|levels| filter::matches(levels, filter::levels(topic)))
                })
            })
            .is_some_and(|rule| rule.permission == Permission::Allow)
    }

    /// The rules, in order, whose subject is `who` and whose action covers
    /// `operation`.
    fn applying<'a>(
        &'a self,
        who: &'a Principal,
        operation: Operation,
    ) -> impl Iterator<Item = &'a Rule> + 'a {
        self.rules.iter().filter(move |rule| rule.action.covers(operation) && rule.subject.is(who))
    }
}

/// The filter a subscription delivers from: a shared subscription's inner
/// filter, or `filter` itself. None for a malformed shared subscription.
fn unshared(filter: &str) -> Option<&str> {
    let Some(shared) = filter.strip_prefix(SHARED_PREFIX) else { return Some(filter) };
    let (group, inner) = shared.split_once('/')?;
    (!group.is_empty() && !group.contains(['+', '#'])).then_some(inner)
}

#[derive(Debug)]
struct Rule {
    permission: Permission,
    action: Action,
    subject: Subject,
    topics: Box<[Pattern]>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Permission {
    Allow,
    Deny,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Action {
    Publish,
    /// Subscribing and receiving what the subscription matches.
    Subscribe,
    All,
}

/// What a client asks to do with a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    Publish,
    /// Subscribe, or be delivered a message.
    Read,
}

impl Action {
    fn covers(self, operation: Operation) -> bool {
        matches!(
            (self, operation),
            (Action::All, _)
                | (Action::Publish, Operation::Publish)
                | (Action::Subscribe, Operation::Read)
        )
    }
}

/// Who a rule is for.
#[derive(Debug)]
enum Subject {
    Everyone,
    User(Box<str>),
    ClientId(Box<str>),
    Certificate(Box<str>),
    /// `members` are the user names `[groups]` lists for `name`, copied
    /// into the rule so that checking it needs no lookup of the group.
    Group {
        name: Box<str>,
        members: HashSet<Box<str>>,
    },
    Anonymous,
}

impl Subject {
    fn is(&self, who: &Principal) -> bool {
        match self {
            Subject::Everyone => true,
            Subject::User(user) => who.username.as_deref() == Some(&**user),
            Subject::ClientId(id) => *who.client_id == **id,
            Subject::Certificate(identity) => who.certificate.as_deref() == Some(&**identity),
            Subject::Group { name, members } => {
                who.groups.iter().any(|group| **group == **name)
                    || who.username.as_deref().is_some_and(|user| members.contains(user))
            }
            Subject::Anonymous => who.username.is_none(),
        }
    }
}

/// A rule's topic filter, split into levels once when the file is loaded.
#[derive(Debug)]
struct Pattern {
    levels: Box<[PatternLevel]>,
    uses_username: bool,
    uses_client_id: bool,
}

#[derive(Debug)]
enum PatternLevel {
    Literal(Box<str>),
    Single,
    Multi,
    /// `%u`
    Username,
    /// `%c`
    ClientId,
}

impl Pattern {
    /// Checks `text` as an ACL filter: an MQTT topic filter whose `%u` and
    /// `%c` are whole levels, and not a shared subscription.
    fn parse(text: &str) -> Result<Pattern, String> {
        if text.len() > MAX_FILTER_BYTES {
            return Err("longer than 65,535 bytes, the longest MQTT topic".into());
        }
        if !filter::is_valid_filter(text) {
            return Err(format!(
                "{text:?} is not a topic filter: it must be nonempty, with `+` and `#` as whole \
                 levels and `#` only last"
            ));
        }
        if text.starts_with(SHARED_PREFIX) {
            return Err(format!(
                "{text:?} is a shared subscription; write the filter alone, which \
                 `$share/{{group}}/` subscriptions are judged by"
            ));
        }
        let levels: Box<[PatternLevel]> = text
            .split('/')
            .map(|level| match level {
                "%u" => Ok(PatternLevel::Username),
                "%c" => Ok(PatternLevel::ClientId),
                _ if level.contains("%u") || level.contains("%c") => Err(format!(
                    "{text:?}: `%u` and `%c` stand for a whole level, not part of {level:?}"
                )),
                _ => Ok(match Level::of(level) {
                    Level::Single => PatternLevel::Single,
                    Level::Multi => PatternLevel::Multi,
                    Level::Literal(literal) => PatternLevel::Literal(literal.into()),
                }),
            })
            .collect::<Result<_, _>>()?;
        Ok(Pattern {
            uses_username: levels.iter().any(|level| matches!(level, PatternLevel::Username)),
            uses_client_id: levels.iter().any(|level| matches!(level, PatternLevel::ClientId)),
            levels,
        })
    }

    /// The filter's levels for the client whose values are `values`, `%u`
    /// and `%c` replaced as they are read; none if the filter needs a value
    /// the client lacks or that cannot stand for a level.
    fn levels<'a>(
        &'a self,
        values: &Substitutions<'a>,
    ) -> Option<impl Iterator<Item = Level<'a>> + Clone + 'a> {
        if (self.uses_username && values.username.is_none())
            || (self.uses_client_id && values.client_id.is_none())
        {
            return None;
        }
        let (username, client_id) = (values.username.unwrap_or(""), values.client_id.unwrap_or(""));
        Some(self.levels.iter().map(move |level| match level {
            PatternLevel::Literal(literal) => Level::Literal(literal),
            PatternLevel::Single => Level::Single,
            PatternLevel::Multi => Level::Multi,
            PatternLevel::Username => Level::Literal(username),
            PatternLevel::ClientId => Level::Literal(client_id),
        }))
    }
}

/// A client's values for `%u` and `%c`, each none if it has none or it
/// cannot stand for a level.
struct Substitutions<'a> {
    username: Option<&'a str>,
    client_id: Option<&'a str>,
}

impl<'a> Substitutions<'a> {
    fn of(who: &'a Principal) -> Substitutions<'a> {
        Substitutions {
            username: who.username.as_deref().filter(|value| can_be_a_level(value)),
            client_id: Some(&*who.client_id).filter(|value| can_be_a_level(value)),
        }
    }
}

/// Whether a client-given value can replace `%u` or `%c` without changing
/// what the filter means (see the module doc).
fn can_be_a_level(value: &str) -> bool {
    !value.is_empty() && !value.starts_with('$') && !value.contains(['/', '+', '#'])
}

/// The file as written, before its rules are checked. Spans locate the
/// checks' errors.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    groups: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    rule: Vec<Spanned<RawRule>>,
}

/// Required keys are options here so that a missing one is reported like
/// every other rule problem, with the rule's number.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    permission: Option<Permission>,
    action: Option<Action>,
    topics: Option<Spanned<Vec<Spanned<String>>>>,
    user: Option<Spanned<String>>,
    client_id: Option<Spanned<String>>,
    certificate: Option<Spanned<String>>,
    group: Option<Spanned<String>>,
    anonymous: Option<Spanned<bool>>,
}

impl Rule {
    fn from_raw(
        raw: Spanned<RawRule>,
        groups: &BTreeMap<String, Vec<String>>,
        number: usize,
        text: &str,
        path: &Path,
    ) -> Result<Rule, AclError> {
        let rule_start = raw.span().start;
        let raw = raw.into_inner();
        let error = |offset: usize, key: &str, message: String| AclError::Rule {
            path: path.to_owned(),
            line: line_of(text, offset),
            rule: number,
            key: key.into(),
            message,
        };
        let missing = |key: &str| error(rule_start, key, "missing; every rule needs it".into());
        let permission = raw.permission.ok_or_else(|| missing("permission"))?;
        let action = raw.action.ok_or_else(|| missing("action"))?;
        let topics = raw.topics.ok_or_else(|| missing("topics"))?;
        if topics.get_ref().is_empty() {
            return Err(error(
                topics.span().start,
                "topics",
                "empty: the rule would match nothing".into(),
            ));
        }
        let topics = topics
            .into_inner()
            .into_iter()
            .map(|topic| {
                Pattern::parse(topic.get_ref())
                    .map_err(|message| error(topic.span().start, "topics", message))
            })
            .collect::<Result<_, _>>()?;

        let mut subject = Subject::Everyone;
        let mut subject_key: Option<&str> = None;
        let mut choose = |key: &'static str, offset: usize, chosen: Subject| {
            if let Some(earlier) = subject_key.replace(key) {
                return Err(error(
                    offset,
                    key,
                    format!("a rule is for one subject, and `{earlier}` already names it"),
                ));
            }
            subject = chosen;
            Ok(())
        };
        let nonempty = |key: &str, value: Spanned<String>| {
            if value.get_ref().is_empty() {
                Err(error(value.span().start, key, "empty; no client has it".into()))
            } else {
                Ok((value.span().start, value.into_inner().into_boxed_str()))
            }
        };
        // Checked in the order the keys are listed in the module doc, so
        // that the message names the same pair whatever their order in the
        // file.
        if let Some(user) = raw.user {
            let (offset, user) = nonempty("user", user)?;
            choose("user", offset, Subject::User(user))?;
        }
        if let Some(id) = raw.client_id {
            let (offset, id) = nonempty("client_id", id)?;
            choose("client_id", offset, Subject::ClientId(id))?;
        }
        if let Some(identity) = raw.certificate {
            let (offset, identity) = nonempty("certificate", identity)?;
            choose("certificate", offset, Subject::Certificate(identity))?;
        }
        if let Some(group) = raw.group {
            let (offset, name) = nonempty("group", group)?;
            let members =
                groups.get(&*name).into_iter().flatten().map(|user| user.as_str().into()).collect();
            choose("group", offset, Subject::Group { name, members })?;
        }
        if let Some(anonymous) = raw.anonymous {
            if !*anonymous.get_ref() {
                return Err(error(
                    anonymous.span().start,
                    "anonymous",
                    "only `true` (clients without a user name) has a meaning; leave the key out \
                     for a rule for every client"
                        .into(),
                ));
            }
            choose("anonymous", anonymous.span().start, Subject::Anonymous)?;
        }
        Ok(Rule { permission, action, subject, topics })
    }
}

/// An error from reading the TOML, located by line and key; one inside a
/// `[[rule]]` also names the rule.
fn deserialize_error(
    error: serde_path_to_error::Error<toml::de::Error>,
    text: &str,
    path: &Path,
) -> AclError {
    // `Spanned` reads a value through keys of its own, which mean nothing to
    // the file's author.
    let segments: Vec<&Segment> = error
        .path()
        .iter()
        .filter(|segment| {
            !matches!(segment, Segment::Map { key } if key.starts_with("$__serde_spanned"))
        })
        .collect();
    let rule = match segments.as_slice() {
        [Segment::Map { key }, Segment::Seq { index }, rest @ ..] if key == "rule" => {
            Some((index + 1, key_of(rest)))
        }
        _ => None,
    };
    let inner = error.inner();
    let line = inner.span().map_or(0, |span| line_of(text, span.start));
    let message = inner.message().trim_end().to_string();
    let path = path.to_owned();
    match rule {
        Some((rule, key)) => AclError::Rule { path, line, rule, key, message },
        None if segments.is_empty() => AclError::Syntax { path, line, message },
        None => AclError::Invalid { path, line, key: key_of(&segments), message },
    }
}

/// A key as the file's author would write it: `groups.operators[2]`.
fn key_of(segments: &[&Segment]) -> String {
    let mut key = String::new();
    for segment in segments {
        match segment {
            Segment::Seq { index } => key.push_str(&format!("[{index}]")),
            Segment::Map { key: name } | Segment::Enum { variant: name } => {
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(name);
            }
            Segment::Unknown => key.push_str(if key.is_empty() { "?" } else { ".?" }),
        }
    }
    key
}

/// 1-based line number of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|&&byte| byte == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use SubscribeVerdict::{Allowed, Denied, Filtered};

    fn acl(text: &str) -> Acl {
        Acl::parse(text, Path::new("acl.toml")).unwrap()
    }

    fn error(text: &str) -> String {
        Acl::parse(text, Path::new("acl.toml")).unwrap_err().to_string()
    }

    fn client(client_id: &str, username: Option<&str>) -> Principal {
        Principal {
            client_id: client_id.into(),
            username: username.map(Into::into),
            ..Principal::default()
        }
    }

    #[test]
    fn user_name_and_client_id_fill_whole_levels() {
        let acl = acl(r##"
            [[rule]]
            permission = "allow"
            action = "all"
            topics = ["devices/%u/#", "clients/%c/status", "%c/inbox"]
        "##);
        let alice = client("c1", Some("alice"));
        for (who, topic, expected) in [
            (&alice, "devices/alice/temp", true),
            (&alice, "devices/alice", true),
            (&alice, "devices/bob/temp", false),
            (&alice, "devices/%u/temp", false),
            (&alice, "clients/c1/status", true),
            (&alice, "clients/c2/status", false),
            (&alice, "c1/inbox", true),
            // No user name: `%u` filters match nothing, `%c` ones still do.
            (&client("c1", None), "devices//temp", false),
            (&client("c1", None), "clients/c1/status", true),
            // Values that would change what the level means match nothing.
            (&client("a/b", None), "clients/a/b/status", false),
            (&client("+", None), "clients/x/status", false),
            (&client("$SYS", None), "$SYS/inbox", false),
            (&client("", None), "clients//status", false),
            (&client("c", Some("a/b")), "devices/a/b/x", false),
            (&client("c", Some("#")), "devices/x", false),
            (&client("c", Some("")), "devices//x", false),
        ] {
            assert_eq!(acl.may_publish(who, topic), expected, "{who:?} publishing {topic}");
            assert_eq!(acl.may_receive(who, topic), expected, "{who:?} receiving {topic}");
        }
        for (who, filter, expected) in [
            (&alice, "devices/alice/#", Allowed),
            (&alice, "devices/+/temp", Filtered),
            (&alice, "devices/bob/#", Denied),
            // A client id `a/#` does not turn `%c/inbox` into `a/#/inbox`.
            (&client("a/#", None), "a/#", Denied),
            (&client("+", None), "+/inbox", Denied),
            (&client("c", Some("#")), "devices/#", Denied),
        ] {
            assert_eq!(acl.may_subscribe(who, filter), expected, "{who:?} subscribing {filter}");
        }
    }

    #[test]
    fn actions_separate_publishing_from_reading() {
        let acl = acl(r##"
            [[rule]]
            permission = "allow"
            action = "publish"
            topics = ["up/#"]
            [[rule]]
            permission = "allow"
            action = "subscribe"
            topics = ["down/#"]
            [[rule]]
            permission = "allow"
            action = "all"
            topics = ["both"]
        "##);
        let who = client("c", None);
        for (topic, publish, read) in [
            ("up/x", true, false),
            ("down/x", false, true),
            ("both", true, true),
            ("x", false, false),
        ] {
            assert_eq!(acl.may_publish(&who, topic), publish, "{topic}");
            assert_eq!(acl.may_receive(&who, topic), read, "{topic}");
            let verdict = if read { Allowed } else { Denied };
            assert_eq!(acl.may_subscribe(&who, topic), verdict, "{topic}");
        }
    }

    #[test]
    fn the_groups_that_list_a_user() {
        let acl = acl(r##"
            [groups]
            operators = ["alice", "bob"]
            auditors = ["alice"]
            empty = []
        "##);
        assert_eq!(acl.groups_of("alice").collect::<Vec<_>>(), ["auditors", "operators"]);
        assert_eq!(acl.groups_of("bob").collect::<Vec<_>>(), ["operators"]);
        assert_eq!(acl.groups_of("carol").count(), 0);
    }

    #[test]
    fn subjects_pick_their_clients() {
        let acl = acl(r##"
            [groups]
            operators = ["alice", "bob"]

            [[rule]]
            permission = "allow"
            action = "all"
            topics = ["user"]
            user = "alice"
            [[rule]]
            permission = "allow"
            action = "all"
            topics = ["client"]
            client_id = "sensor-1"
            [[rule]]
            permission = "allow"
            action = "all"
            topics = ["certificate"]
            certificate = "device-42"
            [[rule]]
            permission = "allow"
            action = "all"
            topics = ["operators"]
            group = "operators"
            [[rule]]
            permission = "allow"
            action = "all"
            topics = ["jwt"]
            group = "from-jwt"
            [[rule]]
            permission = "allow"
            action = "all"
            topics = ["anonymous"]
            anonymous = true
            [[rule]]
            permission = "allow"
            action = "all"
            topics = ["everyone"]
        "##);
        assert_eq!(acl.rules(), 7);
        let alice = client("x", Some("alice"));
        let bob = client("sensor-1", Some("bob"));
        let carol = Principal {
            certificate: Some("device-42".into()),
            groups: vec!["from-jwt".into(), "operators".into()],
            ..client("y", Some("carol"))
        };
        let anonymous = client("z", None);
        let anonymous_device =
            Principal { certificate: Some("device-7".into()), ..client("w", None) };
        for (name, who, allowed) in [
            ("alice", &alice, &["user", "operators", "everyone"][..]),
            ("bob", &bob, &["client", "operators", "everyone"]),
            ("carol", &carol, &["certificate", "operators", "jwt", "everyone"]),
            ("anonymous", &anonymous, &["anonymous", "everyone"]),
            ("anonymous device", &anonymous_device, &["anonymous", "everyone"]),
        ] {
            for topic in
                ["user", "client", "certificate", "operators", "jwt", "anonymous", "everyone"]
            {
                let expected = allowed.contains(&topic);
                assert_eq!(acl.may_publish(who, topic), expected, "{name} publishing {topic}");
            }
        }
    }

    #[test]
    fn the_first_rule_that_applies_decides_and_none_means_no() {
        let deny_first = r##"
            [[rule]]
            permission = "deny"
            action = "all"
            topics = ["a/secret"]
            [[rule]]
            permission = "allow"
            action = "all"
            topics = ["a/#"]
        "##;
        let allow_first = r##"
            [[rule]]
            permission = "allow"
            action = "all"
            topics = ["a/#"]
            [[rule]]
            permission = "deny"
            action = "all"
            topics = ["a/secret"]
        "##;
        let who = client("c", None);
        let (deny_first, allow_first) = (acl(deny_first), acl(allow_first));
        assert!(!deny_first.may_publish(&who, "a/secret"));
        assert!(deny_first.may_publish(&who, "a/public"));
        assert!(allow_first.may_publish(&who, "a/secret"));
        assert!(!deny_first.may_publish(&who, "b"), "nothing listed: denied");
        // A rule for someone else is passed over, not a decision.
        let acl = acl(r##"
            [[rule]]
            permission = "deny"
            action = "all"
            topics = ["#"]
            user = "mallory"
            [[rule]]
            permission = "allow"
            action = "all"
            topics = ["#"]
        "##);
        assert!(acl.may_publish(&who, "x"));
        assert!(!acl.may_publish(&client("c", Some("mallory")), "x"));
        let empty = self::acl("");
        assert_eq!(empty.rules(), 0);
        assert!(!empty.may_publish(&who, "x") && !empty.may_receive(&who, "x"));
        assert_eq!(empty.may_subscribe(&who, "#"), Denied);
    }

    #[test]
    fn subscriptions_partly_allowed_are_filtered() {
        let acl = acl(r##"
            [[rule]]
            permission = "deny"
            action = "subscribe"
            topics = ["a/secret"]
            [[rule]]
            permission = "allow"
            action = "subscribe"
            topics = ["a/#", "b/+"]
            [[rule]]
            permission = "allow"
            action = "subscribe"
            topics = ["e/1"]
            [[rule]]
            permission = "deny"
            action = "subscribe"
            topics = ["e/#"]
            [[rule]]
            permission = "allow"
            action = "subscribe"
            topics = ["e/#", "$SYS/broker/#"]
        "##);
        let who = client("c", None);
        for (filter, expected) in [
            ("a/#", Filtered),
            ("a/+", Filtered),
            ("a/x", Allowed),
            ("a/x/#", Allowed),
            ("a/secret", Denied),
            ("b/+", Allowed),
            ("b/x", Allowed),
            ("b/#", Filtered),
            ("e/+", Filtered),
            ("e/1", Allowed),
            ("e/2", Denied),
            ("d", Denied),
            ("#", Filtered),
            ("+/x", Filtered),
            ("$SYS/broker/uptime", Allowed),
            ("$SYS/#", Filtered),
            ("$share/g/a/x", Allowed),
            ("$share/g/a/#", Filtered),
            ("$share/g", Denied),
            ("$share//a/x", Denied),
            ("a/#/x", Denied),
            ("", Denied),
        ] {
            assert_eq!(acl.may_subscribe(&who, filter), expected, "subscribing {filter}");
        }
        for (topic, expected) in [
            ("a/x", true),
            ("a/secret", false),
            ("b/x", true),
            ("b/x/y", false),
            ("e/1", true),
            ("e/2", false),
            ("$SYS/broker/uptime", true),
            ("$SYS/other", false),
            ("a/+", false),
        ] {
            assert_eq!(acl.may_receive(&who, topic), expected, "receiving {topic}");
        }
    }

    #[test]
    fn a_top_level_wildcard_gives_no_dollar_topics() {
        let acl = acl(r##"
            [[rule]]
            permission = "allow"
            action = "all"
            topics = ["#", "+/status"]
        "##);
        let who = client("c", None);
        assert!(acl.may_publish(&who, "a/b") && acl.may_receive(&who, "x/status"));
        assert!(!acl.may_publish(&who, "$SYS/x") && !acl.may_receive(&who, "$SYS/x"));
        assert!(!acl.may_receive(&who, "$SYS/status"));
        assert_eq!(acl.may_subscribe(&who, "#"), Allowed);
        assert_eq!(acl.may_subscribe(&who, "$SYS/#"), Denied);
        assert_eq!(acl.may_subscribe(&who, "$SYS/status"), Denied);
    }

    #[test]
    fn errors_name_file_line_key_and_rule() {
        let rule = "[[rule]]\npermission = \"allow\"\naction = \"all\"\ntopics = [\"a\"]\n";
        for (text, expected) in [
            ("[[rules]]\npermission = \"allow\"\n".to_string(), "acl.toml:1: key `rules`: unknown field"),
            (format!("{rule}[[rule]]\npermission = \"allow\"\ntopic = [\"a\"]\n"), "acl.toml:7: rule 2: key `topic`: unknown field"),
            (format!("{rule}[[rule]]\npermission = \"allw\"\n"), "acl.toml:6: rule 2: key `permission`: unknown variant `allw`"),
            ("[[rule]]\npermission = \"allow\"\naction = \"all\"\ntopics = \"a\"\n".into(), "acl.toml:4: rule 1: key `topics`: invalid type"),
            ("[[rule]]\npermission = \"allow\"\naction = \"all\"\n".into(), "acl.toml:1: rule 1: key `topics`: missing"),
            ("[[rule]]\npermission = \"allow\"\ntopics = [\"a\"]\n".into(), "acl.toml:1: rule 1: key `action`: missing"),
            ("[[rule]]\npermission = \"allow\"\naction = \"all\"\ntopics = []\n".into(), "acl.toml:4: rule 1: key `topics`: empty"),
            (format!("{rule}\n[[rule]]\npermission = \"deny\"\naction = \"all\"\ntopics = [\"a\",\n  \"a/#/b\"]\n"), "acl.toml:10: rule 2: key `topics`: \"a/#/b\" is not a topic filter"),
            (format!("{rule}user = \"alice\"\nclient_id = \"c\"\n"), "acl.toml:6: rule 1: key `client_id`: a rule is for one subject, and `user`"),
            (format!("{rule}anonymous = false\n"), "acl.toml:5: rule 1: key `anonymous`: only `true`"),
            (format!("{rule}user = \"\"\n"), "acl.toml:5: rule 1: key `user`: empty"),
            ("[[rule]]\npermission = \"allow\"\naction = \"all\"\ntopics = [\"a/x%u\"]\n".into(), "acl.toml:4: rule 1: key `topics`: \"a/x%u\": `%u` and `%c` stand for a whole level"),
            ("[[rule]]\npermission = \"allow\"\naction = \"all\"\ntopics = [\"$share/g/a\"]\n".into(), "acl.toml:4: rule 1: key `topics`: \"$share/g/a\" is a shared subscription"),
            ("[groups]\noperators = \"alice\"\n".into(), "acl.toml:2: key `groups.operators`: invalid type"),
        ] {
            let error = error(&text);
            assert!(error.starts_with(expected), "expected {expected:?}, got {error:?}");
        }
    }

    #[test]
    fn too_many_rules_are_refused() {
        let rule = "[[rule]]\npermission = \"allow\"\naction = \"all\"\ntopics = [\"a\"]\n";
        let at_most = rule.repeat(MAX_RULES);
        assert_eq!(acl(&at_most).rules(), MAX_RULES);
        let error = error(&format!("{at_most}{rule}"));
        assert!(
            error.starts_with(&format!("acl.toml:{}: key `rule`", 4 * MAX_RULES + 1)),
            "{error}"
        );
    }

    #[test]
    fn files_load_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acl.toml");
        std::fs::write(
            &path,
            "[[rule]]\npermission = \"allow\"\naction = \"all\"\ntopics = [\"#\"]\n",
        )
        .unwrap();
        assert!(Acl::load(&path).unwrap().may_publish(&client("c", None), "x"));
        let missing = Acl::load(&dir.path().join("none.toml")).unwrap_err();
        assert!(matches!(missing, AclError::Read { .. }));
        assert!(missing.to_string().contains("none.toml: cannot read"), "{missing}");
    }
}
