//! Mosquitto's ACL file format, so that a Mosquitto `acl_file` works in
//! Ferry as it is:
//!
//! ```text
//! # anonymous clients: the lines before any `user`
//! topic read $SYS/#
//! user alice
//! topic readwrite sensors/alice/#
//! topic deny sensors/alice/secret
//! pattern write devices/%u/out
//! ```
//!
//! `topic [read|write|readwrite|deny] FILTER` lines belong to the `user`
//! above them (anonymous clients before the first one), `pattern` lines to
//! every client, with `%u` and `%c` substituted. No access type means
//! `readwrite`; `deny` refuses both.
//!
//! The lines become Ferry's rules in the order Mosquitto checks them (its
//! `acl-file` plugin): a client's own lines before the patterns, and in
//! each of the two, its denials before its grants. The first rule that
//! applies decides and the rest is refused, which is Mosquitto's walk. And
//! as Mosquitto does, every SUBSCRIBE is granted and only what it delivers
//! is checked (`Acl::grants_every_subscription`), where a TOML file's
//! rules refuse a subscription nothing could be read through: a client
//! that took a refused SUBACK for a fatal error worked with Mosquitto.

use super::{AclError, Action, Pattern, Permission, Rule, Subject, MAX_RULES};
use std::path::Path;

/// Whether `text` is written in Mosquitto's format: its first line that is
/// neither blank nor a comment is a `topic`, `user` or `pattern` line, which
/// no TOML file can start with.
pub(super) fn is_mosquitto_format(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('#'))
        .and_then(|line| line.split(' ').next())
        .is_some_and(|keyword| matches!(keyword, "topic" | "user" | "pattern"))
}

/// One line's rule, before the rules are put in Mosquitto's order.
struct Line {
    permission: Permission,
    action: Action,
    /// `None` for a `pattern`, which is every client's.
    owner: Option<Subject>,
    pattern: Pattern,
}

pub(super) fn parse(text: &str, path: &Path) -> Result<Vec<Rule>, AclError> {
    let mut lines = Vec::new();
    // Whose `topic` lines these are: anonymous clients' until a `user`.
    let mut user: Option<Box<str>> = None;
    for (index, line) in text.lines().enumerate() {
        let invalid =
            |message: String| AclError::Syntax { path: path.to_owned(), line: index + 1, message };
        let line = line.trim_end();
        if line.starts_with('#') {
            continue;
        }
        let line = line.trim_start_matches(' ');
        let (keyword, rest) = line.split_once(' ').unwrap_or((line, ""));
        match keyword {
            "" => continue,
            "user" => {
                let name = rest.trim();
                if name.is_empty() {
                    return Err(invalid("`user` needs a user name".into()));
                }
                user = Some(name.into());
            }
            "topic" | "pattern" => {
                let rest = rest.trim_start_matches(' ');
                let (access, filter) = match rest.split_once(' ') {
                    Some((access, filter)) => (Some(access), filter.trim()),
                    None => (None, rest),
                };
                if filter.is_empty() {
                    return Err(invalid(format!("`{keyword}` needs a topic filter")));
                }
                let (permission, action) = match access {
                    None | Some("readwrite") => (Permission::Allow, Action::All),
                    Some("read") => (Permission::Allow, Action::Subscribe),
                    Some("write") => (Permission::Allow, Action::Publish),
                    Some("deny") => (Permission::Deny, Action::All),
                    Some(other) => {
                        return Err(invalid(format!(
                            "access type {other:?}: Mosquitto's are read, write, readwrite \
                             and deny"
                        )))
                    }
                };
                let pattern = Pattern::parse(filter).map_err(invalid)?;
                let owner = (keyword == "topic").then(|| match &user {
                    Some(user) => Subject::User(user.clone()),
                    None => Subject::Anonymous,
                });
                lines.push(Line { permission, action, owner, pattern });
            }
            other => {
                return Err(invalid(format!(
                    "{other:?} is not a Mosquitto ACL line: expected `topic`, `user` or `pattern`"
                )))
            }
        }
        if lines.len() > MAX_RULES {
            return Err(invalid(format!("more than {MAX_RULES} rules, the most Ferry evaluates")));
        }
    }
    Ok(in_mosquitto_order(lines))
}

/// Owners' lines before patterns; in each, denials before grants. Owners
/// never share a client, so interleaving theirs changes nothing.
fn in_mosquitto_order(lines: Vec<Line>) -> Vec<Rule> {
    let rank = |line: &Line| (line.owner.is_none(), line.permission == Permission::Allow);
    let mut lines = lines;
    lines.sort_by_key(rank);
    lines
        .into_iter()
        .map(|line| Rule {
            permission: line.permission,
            action: line.action,
            subject: line.owner.unwrap_or(Subject::Everyone),
            topics: Box::new([line.pattern]),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::{Acl, SubscribeVerdict};
    use crate::Principal;
    use std::path::Path;

    const FILE: &str = "\
# anonymous clients
topic read $SYS/broker/uptime

user alice
topic readwrite sensors/alice/#
topic deny sensors/alice/secret
topic write cmd/+
user bob
topic sensors/bob/#

pattern read devices/%u/in
pattern deny devices/%c/locked
pattern write devices/%c/out
";

    fn client(client_id: &str, username: Option<&str>) -> Principal {
        Principal {
            client_id: client_id.into(),
            username: username.map(Into::into),
            ..Principal::default()
        }
    }

    fn error(text: &str) -> String {
        Acl::parse(text, Path::new("acl")).unwrap_err().to_string()
    }

    #[test]
    fn sections_patterns_and_denials_decide_as_in_mosquitto() {
        let acl = Acl::parse(FILE, Path::new("acl")).unwrap();
        let alice = client("c-alice", Some("alice"));
        let bob = client("c-bob", Some("bob"));
        let anonymous = client("c-anon", None);
        // A user's own lines, a denial before the grant it is inside of.
        assert!(acl.may_publish(&alice, "sensors/alice/temp"));
        assert!(acl.may_receive(&alice, "sensors/alice/temp"));
        assert!(!acl.may_publish(&alice, "sensors/alice/secret"));
        assert!(!acl.may_receive(&alice, "sensors/alice/secret"));
        assert!(acl.may_publish(&alice, "cmd/x"));
        assert!(!acl.may_receive(&alice, "cmd/x"), "write only");
        // No access type is readwrite; another user's lines are not hers.
        assert!(acl.may_publish(&bob, "sensors/bob/t") && acl.may_receive(&bob, "sensors/bob/t"));
        assert!(!acl.may_publish(&alice, "sensors/bob/t"));
        // Anonymous clients have the lines before any `user`, and no `%u`.
        assert!(acl.may_receive(&anonymous, "$SYS/broker/uptime"));
        assert!(!acl.may_receive(&alice, "$SYS/broker/uptime"));
        assert!(!acl.may_receive(&anonymous, "devices//in"));
        // Patterns are everyone's, after their own lines.
        assert!(acl.may_receive(&alice, "devices/alice/in"));
        assert!(!acl.may_receive(&bob, "devices/alice/in"));
        assert!(acl.may_publish(&anonymous, "devices/c-anon/out"));
        assert!(!acl.may_publish(&anonymous, "devices/c-anon/locked"));
        // Whatever no line grants is refused.
        assert!(!acl.may_publish(&anonymous, "anything"));
        assert_eq!(acl.may_subscribe(&bob, "sensors/#"), SubscribeVerdict::Filtered);
        // Nothing under other/# may be read, yet the subscription is
        // granted, as Mosquitto grants it; no message goes through it.
        assert_eq!(acl.may_subscribe(&bob, "other/#"), SubscribeVerdict::Filtered);
        assert!(!acl.may_receive(&bob, "other/x"));
        assert_eq!(acl.may_subscribe(&alice, "sensors/alice/secret"), SubscribeVerdict::Filtered);
    }

    #[test]
    fn a_users_grant_comes_before_a_patterns_denial() {
        let acl = Acl::parse(
            "pattern deny devices/%u/#\nuser alice\ntopic devices/alice/#\n",
            Path::new("acl"),
        )
        .unwrap();
        assert!(acl.may_publish(&client("c", Some("alice")), "devices/alice/x"));
        assert!(!acl.may_publish(&client("c", Some("bob")), "devices/bob/x"));
    }

    #[test]
    fn bad_lines_are_refused_with_file_and_line() {
        for (text, says) in [
            ("topic read a\nuser\n", "acl:2: `user` needs a user name"),
            ("topic\n", "acl:1: `topic` needs a topic filter"),
            ("user a\ntopic sometimes a/b\n", "acl:2: access type \"sometimes\""),
            ("pattern read a/#/b\n", "acl:1: \"a/#/b\" is not a topic filter"),
            ("topic read a\nallow a\n", "acl:2: \"allow\" is not a Mosquitto ACL line"),
        ] {
            let error = error(text);
            assert!(error.contains(says), "{text:?}: {error}");
        }
    }

    #[test]
    fn toml_files_and_empty_files_are_not_mosquittos() {
        assert!(!super::is_mosquitto_format(""));
        assert!(!super::is_mosquitto_format("# only a comment\n"));
        assert!(!super::is_mosquitto_format("[[rule]]\npermission = \"allow\"\n"));
        assert!(super::is_mosquitto_format("# users\n\nuser alice\n"));
        assert!(super::is_mosquitto_format("topic read a\n"));
    }
}
