//! The compiled form of a policy that answers "may these subjects READ or
//! WRITE here?" without walking the policy's JSON.
//!
//! Ditto's `TreeBasedPolicyEnforcer` keeps one tree per subject id: a child
//! per resource type, then one node per path level, each node holding the
//! permissions granted and revoked exactly there (entries that share a
//! subject and a path are merged). Ferry builds the same tree once per
//! policy revision, and adds to every node the permissions granted and
//! revoked anywhere *below* it, so that the questions Ditto answers by
//! visiting whole trees are answered by walking one path:
//!
//! * compiling costs one node per distinct (subject, type, path prefix) and
//!   O(resources × depth) time, plus one post-order pass for the `below`
//!   sets; a policy of tens of entries compiles in microseconds;
//! * a permission check is O(caller subjects × pointer depth) hash lookups
//!   and allocates nothing;
//! * a partial view walks the JSON once; subtrees no policy path reaches
//!   are copied or dropped whole, without a lookup per leaf.
//!
//! Subjects with an `expiry` are compiled apart from the permanent ones
//! and skipped by [`Enforcer::caller`] once expired, so a revision stays
//! valid across expiries (Ditto deletes the subject with a command at
//! expiry; Ferry need not rebuild anything for it).

use super::resource::Permission;
use super::timestamp::Timestamp;
use super::{Policy, PolicyEntry};
use crate::pointer::JsonPointer;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// One path level of one subject's tree.
#[derive(Debug, Default, PartialEq, Eq)]
struct Node {
    /// Permission bits granted and revoked at exactly this path.
    grant: u8,
    revoke: u8,
    /// Bits granted and revoked at any strict descendant.
    grant_below: u8,
    revoke_below: u8,
    children: HashMap<String, Node>,
}

impl Node {
    /// Fills the `below` sets bottom-up and returns this node's own bits
    /// together with them, for its parent.
    fn summarise(&mut self) -> (u8, u8) {
        let (mut grant_below, mut revoke_below) = (0, 0);
        for child in self.children.values_mut() {
            let (grant, revoke) = child.summarise();
            grant_below |= grant;
            revoke_below |= revoke;
        }
        self.grant_below = grant_below;
        self.revoke_below = revoke_below;
        (self.grant | grant_below, self.revoke | revoke_below)
    }
}

/// The trees of one subject id for one expiry (usually the only one).
#[derive(Debug, PartialEq, Eq)]
struct SubjectTrees {
    expiry: Option<Timestamp>,
    /// Resource type (`thing`, `policy`, `message`) to the root node.
    roots: HashMap<String, Node>,
}

/// A policy compiled for permission checks. Build it once per revision
/// and share it: it is immutable and `Sync`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Enforcer {
    subjects: HashMap<String, Vec<SubjectTrees>>,
}

impl Enforcer {
    /// `policy`'s own entries compiled.
    pub fn compile(policy: &Policy) -> Arc<Enforcer> {
        Enforcer::compile_entries(policy.entries())
    }

    /// Entries compiled as one policy: a policy's own and those its
    /// imports bring in. Labels play no part in a decision.
    pub fn compile_entries<'a>(
        entries: impl IntoIterator<Item = &'a PolicyEntry>,
    ) -> Arc<Enforcer> {
        let mut enforcer = Enforcer::default();
        // Entries without subjects or resources decide nothing (Ditto's
        // `PolicyEnforcers.defaultEvaluator` drops them the same way).
        for entry in entries {
            for subject in entry.subjects.iter() {
                let trees = enforcer.subjects.entry(subject.id.to_string()).or_default();
                let at = match trees.iter().position(|t| t.expiry == subject.expiry) {
                    Some(at) => at,
                    None => {
                        trees.push(SubjectTrees { expiry: subject.expiry, roots: HashMap::new() });
                        trees.len() - 1
                    }
                };
                for resource in entry.resources.iter() {
                    let root = trees[at]
                        .roots
                        .entry(resource.key.resource_type().to_string())
                        .or_default();
                    let node =
                        resource.key.path().levels().iter().fold(root, |node, level| {
                            node.children.entry(level.clone()).or_default()
                        });
                    node.grant |= resource.grant.bits();
                    node.revoke |= resource.revoke.bits();
                }
            }
        }
        for trees in enforcer.subjects.values_mut() {
            for root in trees.iter_mut().flat_map(|t| t.roots.values_mut()) {
                root.summarise();
            }
        }
        Arc::new(enforcer)
    }

    /// The caller's view of this policy: the trees of those of `subjects`
    /// the policy names and whose expiry has not passed at `now`. Resolve
    /// it once per request and ask it every question of that request.
    pub fn caller<S: AsRef<str>>(&self, subjects: &[S], now: Timestamp) -> Caller<'_> {
        let trees = subjects
            .iter()
            .filter_map(|subject| self.subjects.get(subject.as_ref()))
            .flatten()
            .filter(|trees| trees.expiry.is_none_or(|expiry| expiry >= now))
            .collect();
        Caller { trees }
    }
}

/// Where the deepest grant and revoke of one permission lie along a path,
/// as Ditto's `WeightedPermissions` weigh them: the deeper wins, and at the
/// same depth the revoke wins. `BELOW` stands for any depth under the
/// checked path, deeper than every level on it.
#[derive(Default)]
struct Weights {
    grant: Option<usize>,
    revoke: Option<usize>,
}

const BELOW: usize = usize::MAX;

impl Weights {
    fn granted(&self) -> bool {
        match (self.grant, self.revoke) {
            (Some(grant), Some(revoke)) => grant > revoke,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

/// The permissions of one caller (a set of subject ids at one instant)
/// under one compiled policy.
pub struct Caller<'a> {
    trees: Vec<&'a SubjectTrees>,
}

impl Caller<'_> {
    /// Ditto's `hasUnrestrictedPermissions`: `permission` holds at `pointer`
    /// and everywhere below it. Grants and revokes on the path weigh by
    /// depth (the deepest wins, a revoke wins a tie), and any revoke below
    /// the path takes the permission away, since part of the subtree is
    /// then out of reach. Across the caller's subjects the weights pool:
    /// one subject's deeper grant outweighs another's higher revoke.
    pub fn has_permission(
        &self,
        resource_type: &str,
        pointer: &JsonPointer,
        permission: Permission,
    ) -> bool {
        self.weigh(resource_type, pointer, permission.bit(), Below::Revokes).granted()
    }

    /// [`Caller::has_permission`] for every permission in `permissions`.
    pub fn has_permissions(
        &self,
        resource_type: &str,
        pointer: &JsonPointer,
        permissions: &[Permission],
    ) -> bool {
        permissions.iter().all(|&p| self.has_permission(resource_type, pointer, p))
    }

    /// Ditto's `hasPartialPermissions`: `permission` holds at `pointer` or
    /// at some path below it. Grants below count and outweigh every revoke
    /// on the path; revokes below do not count. This is how Ditto tells a
    /// 404 (nothing readable here) from a partial view.
    ///
    /// Like Ditto, it does not look whether a grant below is revoked again
    /// further down or at the same place by another subject: such a caller
    /// passes this check and then gets an empty view.
    pub fn has_permission_on_any_level_below(
        &self,
        resource_type: &str,
        pointer: &JsonPointer,
        permission: Permission,
    ) -> bool {
        self.weigh(resource_type, pointer, permission.bit(), Below::Grants).granted()
    }

    /// The part of `value` (the resource at `pointer`) the caller may
    /// READ, or `None` when [`Caller::has_permission_on_any_level_below`]
    /// says nothing here is readable (the API's 404).
    ///
    /// Ditto's `buildJsonView`: the value is cut into leaves (scalars,
    /// arrays and empty objects); a leaf is kept when, walking its path,
    /// the deepest level where any of the caller's subjects grants or
    /// revokes READ grants it, a revoke winning at the same level. Objects
    /// left without leaves disappear; a value that is not an object is
    /// returned whole, as Ditto filters only objects.
    pub fn view(&self, resource_type: &str, pointer: &JsonPointer, value: &Value) -> Option<Value> {
        if !self.has_permission_on_any_level_below(resource_type, pointer, Permission::Read) {
            return None;
        }
        let Value::Object(_) = value else {
            return Some(value.clone());
        };
        let read = Permission::Read.bit();
        let mut nodes: Vec<&Node> =
            self.trees.iter().filter_map(|t| t.roots.get(resource_type)).collect();
        let mut readable = decide(false, &nodes, read);
        for level in pointer.levels() {
            nodes = nodes.iter().filter_map(|node| node.children.get(level)).collect();
            readable = decide(readable, &nodes, read);
        }
        Some(filter(value, &nodes, readable, read).unwrap_or_else(|| Value::Object(Map::new())))
    }

    /// Whether the caller may apply the JSON merge patch `patch` at
    /// `pointer`, as Ditto enforces `MergeThing`: WRITE on the whole of
    /// `pointer` suffices; failing that, some WRITE below it and WRITE on
    /// every leaf the patch sets or deletes. A key `{{ /regex/ }}` set to
    /// null deletes by pattern, so it needs WRITE on its whole parent. An
    /// empty object patch touches no leaf and passes the second branch.
    pub fn may_merge(&self, resource_type: &str, pointer: &JsonPointer, patch: &Value) -> bool {
        if self.has_permission(resource_type, pointer, Permission::Write) {
            return true;
        }
        if !self.has_permission_on_any_level_below(resource_type, pointer, Permission::Write) {
            return false;
        }
        let mut leaves = Vec::new();
        merge_leaves(pointer, patch, &mut leaves);
        leaves.iter().all(|leaf| self.has_permission(resource_type, leaf, Permission::Write))
    }

    /// The deepest grant and revoke of `bit` on the path of `pointer` in
    /// all the caller's trees, and, in the trees that reach `pointer`, the
    /// grants or revokes below it that `below` says count.
    fn weigh(&self, resource_type: &str, pointer: &JsonPointer, bit: u8, below: Below) -> Weights {
        let mut weights = Weights::default();
        for trees in &self.trees {
            let Some(root) = trees.roots.get(resource_type) else {
                continue;
            };
            let mut node = Some(root);
            for depth in 0..=pointer.levels().len() {
                let Some(here) = node else {
                    break;
                };
                if here.grant & bit != 0 {
                    weights.grant = weights.grant.max(Some(depth));
                }
                if here.revoke & bit != 0 {
                    weights.revoke = weights.revoke.max(Some(depth));
                }
                node = pointer.levels().get(depth).and_then(|level| here.children.get(level));
                if depth == pointer.levels().len() {
                    match below {
                        Below::Revokes if here.revoke_below & bit != 0 => {
                            weights.revoke = Some(BELOW)
                        }
                        Below::Grants if here.grant_below & bit != 0 => weights.grant = Some(BELOW),
                        _ => {}
                    }
                }
            }
        }
        weights
    }
}

/// Which of the permissions set below a path a question counts.
#[derive(Clone, Copy)]
enum Below {
    /// Unrestricted permission: a revoke anywhere below takes it away.
    Revokes,
    /// Partial permission: a grant anywhere below gives some.
    Grants,
}

/// One level of Ditto's view trie: a grant at this level by any subject
/// makes the path readable, a revoke by any subject unreadable, the revoke
/// deciding when both are here.
fn decide(readable: bool, nodes: &[&Node], bit: u8) -> bool {
    let granted = nodes.iter().any(|node| node.grant & bit != 0);
    let revoked = nodes.iter().any(|node| node.revoke & bit != 0);
    (readable || granted) && !revoked
}

fn filter(value: &Value, nodes: &[&Node], readable: bool, bit: u8) -> Option<Value> {
    match value {
        Value::Object(object) if !object.is_empty() && !nodes.is_empty() => {
            let mut kept = Map::new();
            for (key, child) in object {
                let below: Vec<&Node> =
                    nodes.iter().filter_map(|node| node.children.get(key)).collect();
                if let Some(child) = filter(child, &below, decide(readable, &below, bit), bit) {
                    kept.insert(key.clone(), child);
                }
            }
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        // No policy path reaches further down: the decision made so far
        // holds for every leaf of this subtree.
        _ => readable.then(|| value.clone()),
    }
}

fn merge_leaves(pointer: &JsonPointer, patch: &Value, leaves: &mut Vec<JsonPointer>) {
    let Value::Object(object) = patch else {
        leaves.push(pointer.clone());
        return;
    };
    for (key, value) in object {
        if value.is_null() && is_regex_key(key) {
            leaves.push(pointer.clone());
        } else {
            merge_leaves(&pointer.child(key.clone()), value, leaves);
        }
    }
}

/// Ditto's `isMergeWithNulledKeysByRegex` key shape: `{{ /…/ }}`.
fn is_regex_key(key: &str) -> bool {
    key.strip_prefix("{{")
        .and_then(|inner| inner.strip_suffix("}}"))
        .map(str::trim)
        .is_some_and(|regex| regex.starts_with('/') && regex.ends_with('/'))
}
