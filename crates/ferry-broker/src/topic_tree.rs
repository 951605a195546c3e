//! The subscription store: which subscriptions does a PUBLISH topic reach?
//!
//! Matching follows MQTT 5 §4.7: `+` matches exactly one (possibly empty)
//! level, a trailing `#` matches its parent level and any number of child
//! levels, and topics starting with `$` are not matched by filters whose first
//! level is `+` or `#`. A filter `$share/{group}/{filter}` makes the key a
//! member of the shared group identified by (`group`, `filter`); a matching
//! message reaches the group once and [`SharedGroup::pick`] chooses the member.
//!
//! # Design
//!
//! [`TopicTree::for_each_match`] runs for every PUBLISH under a read lock, so
//! it allocates nothing, builds no strings, splits the topic lazily and never
//! writes except to the atomic round-robin cursor of a shared group.
//!
//! - **Exact filters in one hash map.** Most filters have no wildcard, and a
//!   filter without wildcards can only match the identical topic, so these
//!   live in a `HashMap<Box<str>, Entry>` keyed by the whole filter: one hash
//!   lookup of the topic finds them, however many levels it has.
//! - **Wildcard filters in a trie of levels.** Only filters containing `+` or
//!   `#` go into the trie. A node has its literal children in a map keyed by
//!   level, a separate `plus` child and a `hash` slot. Because `#` may only be
//!   the last level, the `hash` slot is a leaf entry rather than a node, and it
//!   matches whenever the walk reaches its parent. The walk follows at most
//!   two branches per level (the literal child and `plus`), so it touches only
//!   nodes that can match and never more nodes than the trie has.
//! - **Skip the trie when it is empty.** A count of wildcard subscriptions lets
//!   the common deployment with only exact filters do a single lookup.
//! - **Nodes live in an arena** (`Vec<Node>` plus a free list) and refer to
//!   each other by index, each with a link to its parent. Topics and filters
//!   may have tens of thousands of levels and come from clients: with parent
//!   links, removal prunes bottom-up in a loop, and dropping the tree drops a
//!   flat vector, so neither recurses. The match walk recurses only where both
//!   a literal child and `plus` continue, and follows the last branch in a
//!   loop. Freed slots are reused, and the arena is released whole when the
//!   last wildcard filter goes, so churn does not grow memory beyond its peak.
//! - **Level maps use std's SipHash** (`RandomState`) rather than a faster
//!   non-keyed hash, because clients choose the keys and could otherwise force
//!   collisions.
//! - **Subscribers per filter** are a `Vec<(K, V)>` that matching iterates
//!   densely. One to a handful of subscribers per filter is the usual case and
//!   a linear scan of a few keys beats hashing, so insert and remove search
//!   the vector linearly up to `INDEX_THRESHOLD` (16) entries; beyond that a
//!   `HashMap<K, usize>` index of positions keeps subscribe and unsubscribe
//!   O(1) for a topic with 10,000 subscribers. Removal is `swap_remove`, so
//!   non-shared subscribers have no stable order (none is promised).
//! - **Shared group members** keep insertion order (round-robin fairness is
//!   defined over it), so they are a plain vector searched linearly; groups
//!   are far smaller than fan-out topics.
//!
//! Overlapping subscriptions of one key through different filters are
//! reported separately; merging them per client is the caller's job.

use ferry_mqtt::topic;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::str::Split;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Index of a trie node in the arena. `u32` keeps `Option<NodeId>` at 8
/// bytes; four billion nodes would need far more memory than a broker has.
type NodeId = u32;

/// The root stays at index 0 for the tree's whole life and is never freed.
const ROOT: NodeId = 0;

/// Above this many non-shared subscribers on one filter, their positions are
/// indexed in a hash map; at or below it, a linear scan is cheaper than
/// hashing and costs no memory.
const INDEX_THRESHOLD: usize = 16;

/// The subscriptions of all clients, answering which of them a topic reaches.
///
/// `K` identifies a subscriber (typically a client or session id) and `V` is
/// what the broker needs to deliver to it (QoS, options, subscription id).
pub struct TopicTree<K, V> {
    /// Filters without wildcards, keyed by the whole filter.
    exact: HashMap<Box<str>, Entry<K, V>>,
    /// Trie of wildcard filters; `nodes[ROOT]` is the root.
    nodes: Vec<Node<K, V>>,
    /// Vacant slots of `nodes`, reused before the vector grows.
    free: Vec<NodeId>,
    /// Subscriptions stored in the trie; zero means matching skips it.
    wildcard_subs: usize,
    len: usize,
}

/// One subscription or shared group reached by a topic, as reported by
/// [`TopicTree::for_each_match`].
#[derive(Debug)]
pub enum Match<'a, K, V> {
    /// A non-shared subscription.
    Subscriber {
        /// Who subscribed.
        key: &'a K,
        /// What the subscriber stored with the subscription.
        value: &'a V,
    },
    /// A shared group whose filter matches; deliver to one member of it,
    /// chosen with [`SharedGroup::pick`].
    Shared(&'a SharedGroup<K, V>),
}

// Derives would demand `K: Clone, V: Clone`, though only references are held.
impl<K, V> Clone for Match<'_, K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, V> Copy for Match<'_, K, V> {}

/// The members of one shared subscription `$share/{group}/{filter}`, in the
/// order they joined, with a round-robin cursor.
#[derive(Debug)]
pub struct SharedGroup<K, V> {
    name: Box<str>,
    members: Vec<(K, V)>,
    /// Position (modulo the member count) where the next pick starts. Atomic
    /// because picks happen under the tree's read lock, from many threads.
    cursor: AtomicUsize,
}

impl<K, V> SharedGroup<K, V> {
    fn new(name: &str) -> Self {
        SharedGroup { name: name.into(), members: Vec::new(), cursor: AtomicUsize::new(0) }
    }

    /// The group name, the `{group}` of `$share/{group}/{filter}`.
    pub fn group_name(&self) -> &str {
        &self.name
    }

    /// The members with their subscription values, in the order they joined.
    pub fn members(&self) -> impl ExactSizeIterator<Item = (&K, &V)> {
        self.members.iter().map(|(k, v)| (k, v))
    }

    /// Number of members; a group reported by a match is never empty.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the group has no members (never true for a reported group).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Round-robin: advances the group's cursor and returns the first member,
    /// starting at the cursor, for which `eligible` is true (the broker passes
    /// "is connected"); `None` if no member is.
    ///
    /// After skipping ineligible members, the cursor moves past the chosen
    /// member, so the member after a disconnected one does not get a double
    /// share. Concurrent picks each take their own starting position, so they
    /// spread over the members rather than all choosing the same one.
    pub fn pick(&self, mut eligible: impl FnMut(&K, &V) -> bool) -> Option<(&K, &V)> {
        let n = self.members.len();
        if n == 0 {
            return None;
        }
        let ticket = self.cursor.fetch_add(1, Ordering::Relaxed);
        let start = ticket % n;
        for offset in 0..n {
            let i = (start + offset) % n;
            let (key, value) = &self.members[i];
            if eligible(key, value) {
                if offset != 0 {
                    // Best effort: if another pick moved the cursor since, its
                    // position is as good as ours.
                    let _ = self.cursor.compare_exchange(
                        ticket.wrapping_add(1),
                        i + 1,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                }
                return Some((key, value));
            }
        }
        None
    }
}

impl<K: Eq, V> SharedGroup<K, V> {
    /// Replacing keeps the member's place in the rotation.
    fn insert(&mut self, key: K, value: V) -> Option<V> {
        if let Some((_, old)) = self.members.iter_mut().find(|(k, _)| *k == key) {
            return Some(std::mem::replace(old, value));
        }
        self.members.push((key, value));
        None
    }

    fn remove(&mut self, key: &K) -> Option<V> {
        let pos = self.members.iter().position(|(k, _)| k == key)?;
        let old_len = self.members.len();
        let (_, value) = self.members.remove(pos);
        // Keep the cursor on the same next member: members after `pos` moved
        // down by one.
        let cursor = self.cursor.get_mut();
        let mut next = *cursor % old_len;
        if pos < next {
            next -= 1;
        }
        *cursor = if self.members.is_empty() { 0 } else { next % self.members.len() };
        Some(value)
    }
}

/// The non-shared subscribers of one filter.
#[derive(Debug)]
struct Subscribers<K, V> {
    /// Dense, so that matching iterates it without indirection.
    list: Vec<(K, V)>,
    /// Position of each key in `list`, kept only while `list` is longer than
    /// [`INDEX_THRESHOLD`] entries.
    index: Option<HashMap<K, usize>>,
}

impl<K: Eq + Hash + Clone, V> Subscribers<K, V> {
    fn new() -> Self {
        Subscribers { list: Vec::new(), index: None }
    }

    fn position(&self, key: &K) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(key).copied(),
            None => self.list.iter().position(|(k, _)| k == key),
        }
    }

    fn insert(&mut self, key: K, value: V) -> Option<V> {
        if let Some(i) = self.position(&key) {
            return Some(std::mem::replace(&mut self.list[i].1, value));
        }
        let pos = self.list.len();
        match &mut self.index {
            Some(index) => {
                index.insert(key.clone(), pos);
            }
            None if pos >= INDEX_THRESHOLD => {
                let mut index: HashMap<K, usize> =
                    self.list.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect();
                index.insert(key.clone(), pos);
                self.index = Some(index);
            }
            None => {}
        }
        self.list.push((key, value));
        None
    }

    fn remove(&mut self, key: &K) -> Option<V> {
        let pos = match &mut self.index {
            Some(index) => index.remove(key)?,
            None => self.list.iter().position(|(k, _)| k == key)?,
        };
        let (_, value) = self.list.swap_remove(pos);
        if let Some(index) = &mut self.index {
            if let Some((moved, _)) = self.list.get(pos) {
                if let Some(slot) = index.get_mut(moved) {
                    *slot = pos;
                }
            }
            // Hysteresis: a topic hovering at the threshold must not rebuild
            // the index on every subscribe.
            if self.list.len() <= INDEX_THRESHOLD / 2 {
                self.index = None;
            }
        }
        shrink_vec(&mut self.list);
        Some(value)
    }
}

/// Everything subscribed through one filter: plain subscribers and the shared
/// groups whose `{filter}` it is.
#[derive(Debug)]
struct Entry<K, V> {
    subscribers: Subscribers<K, V>,
    /// Linear search by name: a filter rarely has more than a few groups.
    groups: Vec<SharedGroup<K, V>>,
}

impl<K: Eq + Hash + Clone, V> Entry<K, V> {
    fn new() -> Self {
        Entry { subscribers: Subscribers::new(), groups: Vec::new() }
    }

    fn is_empty(&self) -> bool {
        self.subscribers.list.is_empty() && self.groups.is_empty()
    }

    fn insert(&mut self, group: Option<&str>, key: K, value: V) -> Option<V> {
        let Some(name) = group else {
            return self.subscribers.insert(key, value);
        };
        if let Some(group) = self.groups.iter_mut().find(|g| &*g.name == name) {
            return group.insert(key, value);
        }
        let mut group = SharedGroup::new(name);
        group.insert(key, value);
        self.groups.push(group);
        None
    }

    fn remove(&mut self, group: Option<&str>, key: &K) -> Option<V> {
        let Some(name) = group else {
            return self.subscribers.remove(key);
        };
        let pos = self.groups.iter().position(|g| &*g.name == name)?;
        let value = self.groups[pos].remove(key)?;
        if self.groups[pos].is_empty() {
            self.groups.swap_remove(pos);
        }
        Some(value)
    }
}

impl<K, V> Entry<K, V> {
    fn visit<'a, F: FnMut(Match<'a, K, V>)>(&'a self, visit: &mut F) {
        for (key, value) in &self.subscribers.list {
            visit(Match::Subscriber { key, value });
        }
        for group in &self.groups {
            visit(Match::Shared(group));
        }
    }
}

/// One level of the wildcard trie.
#[derive(Debug)]
struct Node<K, V> {
    /// Lets removal prune bottom-up without recursion; meaningless for the
    /// root and for vacant slots.
    parent: NodeId,
    /// Children for literal levels, keyed by the level text.
    children: HashMap<Box<str>, NodeId>,
    /// Child for a `+` level.
    plus: Option<NodeId>,
    /// Subscriptions whose filter is this node's path followed by `/#`.
    /// Boxed because most nodes have none.
    hash: Option<Box<Entry<K, V>>>,
    /// Subscriptions whose filter ends at this node.
    entry: Entry<K, V>,
}

impl<K: Eq + Hash + Clone, V> Node<K, V> {
    fn new(parent: NodeId) -> Self {
        Node { parent, children: HashMap::new(), plus: None, hash: None, entry: Entry::new() }
    }

    fn is_unused(&self) -> bool {
        self.children.is_empty()
            && self.plus.is_none()
            && self.hash.is_none()
            && self.entry.is_empty()
    }
}

impl<K: Eq + Hash + Clone, V> Default for TopicTree<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Eq + Hash + Clone, V> TopicTree<K, V> {
    /// An empty tree.
    pub fn new() -> Self {
        TopicTree {
            exact: HashMap::new(),
            nodes: vec![Node::new(ROOT)],
            free: Vec::new(),
            wildcard_subs: 0,
            len: 0,
        }
    }

    /// Adds or replaces the subscription of `key` to `filter` (which may be
    /// `$share/{group}/{filter}`). Returns the previous value of that
    /// (filter, key) pair. The filter must already be validated.
    ///
    /// A replaced shared member keeps its place in the group's rotation.
    pub fn insert(&mut self, filter: &str, key: K, value: V) -> Option<V> {
        let (group, filter) = split_shared(filter);
        let wildcard = has_wildcard(filter);
        let previous = if wildcard {
            self.trie_entry_mut(filter).insert(group, key, value)
        } else if let Some(entry) = self.exact.get_mut(filter) {
            entry.insert(group, key, value)
        } else {
            let mut entry = Entry::new();
            entry.insert(group, key, value);
            self.exact.insert(filter.into(), entry);
            None
        };
        if previous.is_none() {
            self.len += 1;
            if wildcard {
                self.wildcard_subs += 1;
            }
        }
        previous
    }

    /// Removes the (filter, key) subscription and returns its value. Nodes and
    /// entries left empty are pruned, so memory does not grow with churn.
    pub fn remove(&mut self, filter: &str, key: &K) -> Option<V> {
        let (group, filter) = split_shared(filter);
        let value = if has_wildcard(filter) {
            let value = self.trie_remove(filter, group, key)?;
            self.wildcard_subs -= 1;
            value
        } else {
            let entry = self.exact.get_mut(filter)?;
            let value = entry.remove(group, key)?;
            if entry.is_empty() {
                self.exact.remove(filter);
                shrink_map(&mut self.exact);
            }
            value
        };
        self.len -= 1;
        Some(value)
    }

    /// Calls `visit` once per non-shared subscription whose filter matches
    /// `topic` and once per matching shared group. Allocates nothing.
    pub fn for_each_match<'a>(&'a self, topic: &str, mut visit: impl FnMut(Match<'a, K, V>)) {
        if let Some(entry) = self.exact.get(topic) {
            entry.visit(&mut visit);
        }
        if self.wildcard_subs == 0 {
            return;
        }
        let mut levels = topic.split('/');
        let Some(first) = levels.next() else {
            return;
        };
        let root = &self.nodes[ROOT as usize];
        // §4.7.2: `+` and `#` as first level do not match `$` topics.
        if !first.starts_with('$') {
            if let Some(hash) = &root.hash {
                hash.visit(&mut visit);
            }
            if let Some(plus) = root.plus {
                self.walk(plus, levels.clone(), &mut visit);
            }
        }
        if let Some(&child) = root.children.get(first) {
            self.walk(child, levels, &mut visit);
        }
    }

    /// Calls `visit` once per subscription, shared members included, in
    /// no particular order: for inspection (the admin API), not for the
    /// publish path. Vacant nodes hold empty entries, so visiting every
    /// slot is right.
    pub fn for_each(&self, mut visit: impl FnMut(&K, &V)) {
        let mut entry = |entry: &Entry<K, V>| {
            for (key, value) in &entry.subscribers.list {
                visit(key, value);
            }
            for group in &entry.groups {
                for (key, value) in &group.members {
                    visit(key, value);
                }
            }
        };
        for exact in self.exact.values() {
            entry(exact);
        }
        for node in &self.nodes {
            entry(&node.entry);
            if let Some(hash) = &node.hash {
                entry(hash);
            }
        }
    }

    /// Number of (filter, key) subscriptions, shared members included.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no subscriptions.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Matches the rest of the topic from `id`, which the levels consumed so
    /// far have reached. Loops along one branch and recurses only when both
    /// the literal child and `plus` continue, so a long chain of levels costs
    /// no stack.
    fn walk<'a, F: FnMut(Match<'a, K, V>)>(
        &'a self,
        mut id: NodeId,
        mut levels: Split<'_, char>,
        visit: &mut F,
    ) {
        loop {
            let node = &self.nodes[id as usize];
            if let Some(hash) = &node.hash {
                hash.visit(visit);
            }
            let Some(level) = levels.next() else {
                node.entry.visit(visit);
                return;
            };
            id = match (node.children.get(level).copied(), node.plus) {
                (Some(literal), Some(plus)) => {
                    self.walk(plus, levels.clone(), visit);
                    literal
                }
                (Some(next), None) | (None, Some(next)) => next,
                (None, None) => return,
            };
        }
    }

    /// The entry for a wildcard filter, creating its path.
    fn trie_entry_mut(&mut self, filter: &str) -> &mut Entry<K, V> {
        let (path, hash) = trie_path(filter);
        let mut id = ROOT;
        for level in path.into_iter().flat_map(|p| p.split('/')) {
            id = self.child_or_insert(id, level);
        }
        let node = &mut self.nodes[id as usize];
        if hash {
            node.hash.get_or_insert_with(|| Box::new(Entry::new()))
        } else {
            &mut node.entry
        }
    }

    fn trie_remove(&mut self, filter: &str, group: Option<&str>, key: &K) -> Option<V> {
        let (path, hash) = trie_path(filter);
        let mut id = ROOT;
        for level in path.into_iter().flat_map(|p| p.split('/')) {
            let node = &self.nodes[id as usize];
            id = if level == "+" { node.plus? } else { *node.children.get(level)? };
        }
        let node = &mut self.nodes[id as usize];
        let value = if hash {
            let entry = node.hash.as_mut()?;
            let value = entry.remove(group, key)?;
            if entry.is_empty() {
                node.hash = None;
            }
            value
        } else {
            node.entry.remove(group, key)?
        };
        self.prune(id, path);
        Some(value)
    }

    fn child_or_insert(&mut self, parent: NodeId, level: &str) -> NodeId {
        let node = &self.nodes[parent as usize];
        let existing = if level == "+" { node.plus } else { node.children.get(level).copied() };
        if let Some(id) = existing {
            return id;
        }
        let id = self.alloc(parent);
        let node = &mut self.nodes[parent as usize];
        if level == "+" {
            node.plus = Some(id);
        } else {
            node.children.insert(level.into(), id);
        }
        id
    }

    fn alloc(&mut self, parent: NodeId) -> NodeId {
        if let Some(id) = self.free.pop() {
            self.nodes[id as usize].parent = parent;
            return id;
        }
        let id = NodeId::try_from(self.nodes.len()).expect("topic tree exceeds u32::MAX nodes");
        self.nodes.push(Node::new(parent));
        id
    }

    /// Frees unused nodes from `id` (reached through `path`) up towards the
    /// root. `path` supplies the level under which each node hangs in its
    /// parent, read from the end.
    fn prune(&mut self, mut id: NodeId, path: Option<&str>) {
        for level in path.into_iter().flat_map(|p| p.rsplit('/')) {
            let node = &self.nodes[id as usize];
            if !node.is_unused() {
                return;
            }
            let parent = node.parent;
            let parent_node = &mut self.nodes[parent as usize];
            if level == "+" {
                parent_node.plus = None;
            } else {
                parent_node.children.remove(level);
                shrink_map(&mut parent_node.children);
            }
            // The slot is unused, so this frees nothing but the old maps'
            // spare capacity.
            self.nodes[id as usize] = Node::new(ROOT);
            self.free.push(id);
            id = parent;
        }
        if !self.free.is_empty() && self.free.len() + 1 == self.nodes.len() {
            // Only the root is left: hand the whole arena back.
            self.nodes.truncate(1);
            self.nodes.shrink_to_fit();
            self.nodes[ROOT as usize].children = HashMap::new();
            self.free = Vec::new();
        }
    }

    /// Live trie nodes, root excluded.
    #[cfg(test)]
    fn node_count(&self) -> usize {
        self.nodes.len() - 1 - self.free.len()
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for TopicTree<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TopicTree")
            .field("len", &self.len)
            .field("exact", &self.exact)
            .field("trie", &self.nodes)
            .finish()
    }
}

/// Splits `$share/{group}/{filter}` into the group and the filter; any other
/// filter has no group.
fn split_shared(filter: &str) -> (Option<&str>, &str) {
    topic::split_shared(filter).map_or((None, filter), |(group, rest)| (Some(group), rest))
}

fn has_wildcard(filter: &str) -> bool {
    filter.split('/').any(|level| level == "+" || level == "#")
}

/// The trie path of a wildcard filter without its trailing `#` (`None` for
/// the root), and whether it had one.
fn trie_path(filter: &str) -> (Option<&str>, bool) {
    if filter == "#" {
        (None, true)
    } else if let Some(path) = filter.strip_suffix("/#") {
        (Some(path), true)
    } else {
        (Some(filter), false)
    }
}

/// Gives back capacity once a map is mostly empty; halving the trigger point
/// keeps the cost amortised O(1) per removal.
fn shrink_map<K: Eq + Hash, V>(map: &mut HashMap<K, V>) {
    if map.capacity() > 64 && map.len() * 4 < map.capacity() {
        map.shrink_to(map.len() * 2);
    }
}

fn shrink_vec<T>(vec: &mut Vec<T>) {
    if vec.capacity() > 64 && vec.len() * 4 < vec.capacity() {
        vec.shrink_to(vec.len() * 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topic_test_support::{
        filter_strategy, naive_matches, run_on_small_stack, topic_strategy,
    };
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn for_each_visits_every_subscription_once_and_none_removed() {
        let mut tree = TopicTree::new();
        for (filter, key) in
            [("a/b", 1), ("a/b", 2), ("a/+", 1), ("#", 3), ("a/#", 4), ("$share/g/a/#", 5)]
        {
            tree.insert(filter, key, filter.to_owned());
        }
        tree.insert("x/+/y", 6, "x/+/y".to_owned());
        tree.remove("x/+/y", &6);
        let mut seen = Vec::new();
        tree.for_each(|key, filter| seen.push((*key, filter.clone())));
        seen.sort();
        let expected: Vec<(i32, String)> =
            [(1, "a/+"), (1, "a/b"), (2, "a/b"), (3, "#"), (4, "a/#"), (5, "$share/g/a/#")]
                .into_iter()
                .map(|(key, filter)| (key, filter.to_owned()))
                .collect();
        assert_eq!(seen, expected);
    }

    /// (filter, topic, matches): the spec's examples and the edge cases.
    #[rustfmt::skip]
    pub(crate) const CASES: &[(&str, &str, bool)] = &[
        ("sport/tennis/player1/#", "sport/tennis/player1", true),
        ("sport/tennis/player1/#", "sport/tennis/player1/ranking", true),
        ("sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", true),
        ("sport/tennis/player1/#", "sport/tennis/player2", false),
        ("sport/tennis/player1/#", "sport/tennis", false),
        ("sport/#", "sport", true),
        ("sport/#", "sports", false),
        ("sport/tennis/+", "sport/tennis/player1", true),
        ("sport/tennis/+", "sport/tennis/player2", true),
        ("sport/tennis/+", "sport/tennis/player1/ranking", false),
        ("sport/tennis/+", "sport/tennis", false),
        ("sport/+", "sport", false),
        ("sport/+", "sport/", true),
        ("+/+", "/finance", true),
        ("/+", "/finance", true),
        ("+", "/finance", false),
        ("+", "finance", true),
        ("+/tennis/#", "sport/tennis/player1", true),
        ("+/tennis/#", "sport/tennis", true),
        ("+/tennis/#", "sport/golf", false),
        ("#", "sport", true),
        ("#", "/", true),
        ("#", "$SYS/monitor/Clients", false),
        ("#", "$SYS", false),
        ("+/monitor/Clients", "$SYS/monitor/Clients", false),
        ("+/monitor/Clients", "SYS/monitor/Clients", true),
        ("+", "$SYS", false),
        ("$SYS/#", "$SYS/monitor/Clients", true),
        ("$SYS/#", "$SYS/x", true),
        ("$SYS/#", "$SYS", true),
        ("$SYS/monitor/+", "$SYS/monitor/Clients", true),
        ("$SYS/+/Clients", "$SYS/monitor/Clients", true),
        ("$SYS/x", "$SYS/x", true),
        ("a/+", "a/$x", true),
        ("a/#", "a/$x/y", true),
        ("a//b", "a//b", true),
        ("a//b", "a/b", false),
        ("a/+/b", "a//b", true),
        ("a/+/b", "a/b", false),
        ("/a", "/a", true),
        ("/a", "a", false),
        ("/#", "/", true),
        ("/#", "/a/b", true),
        ("/#", "a", false),
        ("a/#", "a/", true),
        ("a/b", "a/b/", false),
        ("a/b/", "a/b/", true),
        ("+/+", "a", false),
        ("+/+", "/", true),
        ("a/b", "a/b", true),
        ("a/b", "a/c", false),
    ];

    type Tree = TopicTree<&'static str, u32>;

    /// Sorted (key, value) of non-shared matches and sorted group names.
    fn matches(tree: &Tree, topic: &str) -> (Vec<(&'static str, u32)>, Vec<String>) {
        let mut subs = Vec::new();
        let mut groups = Vec::new();
        tree.for_each_match(topic, |m| match m {
            Match::Subscriber { key, value } => subs.push((*key, *value)),
            Match::Shared(g) => groups.push(g.group_name().to_owned()),
        });
        subs.sort();
        groups.sort();
        (subs, groups)
    }

    fn first_group<'a>(tree: &'a Tree, topic: &str) -> &'a SharedGroup<&'static str, u32> {
        let mut found = None;
        tree.for_each_match(topic, |m| {
            if let Match::Shared(g) = m {
                found = Some(g);
            }
        });
        found.expect("a shared group matches")
    }

    #[test]
    fn reference_matcher_agrees_with_spec_cases() {
        for &(filter, topic, expected) in CASES {
            assert_eq!(naive_matches(filter, topic), expected, "{filter} vs {topic}");
        }
    }

    #[test]
    fn spec_cases_one_filter_at_a_time() {
        for &(filter, topic, expected) in CASES {
            let mut tree = Tree::new();
            tree.insert(filter, "c", 1);
            let (subs, _) = matches(&tree, topic);
            assert_eq!(!subs.is_empty(), expected, "{filter} vs {topic}");
        }
    }

    #[test]
    fn spec_cases_all_filters_together() {
        let mut tree = Tree::new();
        for (i, &(filter, _, _)) in CASES.iter().enumerate() {
            tree.insert(filter, "c", i as u32);
        }
        for &(filter, topic, expected) in CASES {
            let (subs, _) = matches(&tree, topic);
            let found = subs.iter().any(|&(_, v)| CASES[v as usize].0 == filter);
            assert_eq!(found, expected, "{filter} vs {topic}");
        }
    }

    #[test]
    fn shared_filters_follow_the_same_rules() {
        for &(filter, topic, expected) in CASES {
            let mut tree = Tree::new();
            tree.insert(&format!("$share/g/{filter}"), "c", 1);
            let (subs, groups) = matches(&tree, topic);
            assert!(subs.is_empty());
            assert_eq!(groups == ["g"], expected, "$share/g/{filter} vs {topic}");
        }
    }

    #[test]
    fn overlapping_subscriptions_are_reported_separately() {
        let mut tree = Tree::new();
        tree.insert("a/b", "c1", 1);
        tree.insert("a/+", "c1", 2);
        tree.insert("#", "c1", 3);
        tree.insert("a/#", "c1", 4);
        tree.insert("+/b", "c2", 5);
        let (subs, _) = matches(&tree, "a/b");
        assert_eq!(subs, [("c1", 1), ("c1", 2), ("c1", 3), ("c1", 4), ("c2", 5)]);
        assert_eq!(tree.len(), 5);
    }

    #[test]
    fn insert_replaces_the_value_of_the_same_filter_and_key() {
        let mut tree = Tree::new();
        assert_eq!(tree.insert("a/b", "c", 1), None);
        assert_eq!(tree.insert("a/b", "c", 2), Some(1));
        assert_eq!(tree.insert("a/+", "c", 3), None);
        assert_eq!(tree.insert("a/+", "c", 4), Some(3));
        assert_eq!(tree.insert("$share/g/a/+", "c", 5), None);
        assert_eq!(tree.insert("$share/g/a/+", "c", 6), Some(5));
        assert_eq!(tree.len(), 3);
        assert_eq!(matches(&tree, "a/b").0, [("c", 2), ("c", 4)]);
        let group = first_group(&tree, "a/b");
        assert_eq!(group.members().collect::<Vec<_>>(), [(&"c", &6)]);
    }

    #[test]
    fn remove_returns_the_value_and_only_touches_its_pair() {
        let mut tree = Tree::new();
        tree.insert("a/b", "c1", 1);
        tree.insert("a/b", "c2", 2);
        tree.insert("a/+", "c1", 3);
        assert_eq!(tree.remove("a/b", &"c3"), None);
        assert_eq!(tree.remove("a/c", &"c1"), None);
        assert_eq!(tree.remove("a/#", &"c1"), None);
        assert_eq!(tree.remove("$share/g/a/b", &"c1"), None);
        assert_eq!(tree.remove("a/b", &"c1"), Some(1));
        assert_eq!(tree.remove("a/b", &"c1"), None);
        assert_eq!(tree.len(), 2);
        assert_eq!(matches(&tree, "a/b").0, [("c1", 3), ("c2", 2)]);
    }

    #[test]
    fn removing_everything_prunes_every_node() {
        let mut tree = Tree::new();
        let filters = [
            "a",
            "a/b",
            "a/+",
            "a/#",
            "#",
            "+",
            "+/+/c",
            "a/+/c/#",
            "/",
            "//+",
            "$SYS/#",
            "$share/g/a/+",
            "$share/h/a/+",
            "$share/g/x",
            "+/b/+/d",
        ];
        for (i, filter) in filters.iter().enumerate() {
            tree.insert(filter, "c1", i as u32);
            tree.insert(filter, "c2", i as u32);
        }
        assert_eq!(tree.len(), 2 * filters.len());
        assert!(tree.node_count() > 0);
        for filter in filters {
            assert!(tree.remove(filter, &"c2").is_some());
        }
        assert!(tree.node_count() > 0);
        for filter in filters.iter().rev() {
            assert!(tree.remove(filter, &"c1").is_some());
        }
        assert_eq!(tree.len(), 0);
        assert!(tree.is_empty());
        assert_eq!(tree.node_count(), 0);
        assert_eq!(tree.nodes.len(), 1);
        assert!(tree.exact.is_empty());
        assert_eq!(tree.wildcard_subs, 0);
        let root = &tree.nodes[ROOT as usize];
        assert!(root.is_unused());
        assert_eq!(matches(&tree, "a/b"), (vec![], vec![]));
    }

    #[test]
    fn pruning_keeps_nodes_still_in_use() {
        let mut tree = Tree::new();
        tree.insert("a/+/c", "k", 1);
        tree.insert("a/+", "k", 2);
        tree.insert("a/#", "k", 3);
        let full = tree.node_count();
        tree.remove("a/+/c", &"k");
        assert_eq!(tree.node_count(), full - 1);
        assert_eq!(matches(&tree, "a/b").0, [("k", 2), ("k", 3)]);
        tree.remove("a/+", &"k");
        assert_eq!(matches(&tree, "a/b").0, [("k", 3)]);
        assert_eq!(tree.node_count(), 1, "only `a` holds the `#` slot");
        tree.remove("a/#", &"k");
        assert_eq!(tree.node_count(), 0);
    }

    #[test]
    fn churn_reuses_freed_nodes() {
        let mut tree = Tree::new();
        tree.insert("keep/+", "k", 0);
        for round in 0..100 {
            tree.insert("x/+/y/+", "k", round);
            tree.insert("x/+/z/#", "k", round);
            assert!(tree.nodes.len() <= 8);
            tree.remove("x/+/y/+", &"k");
            tree.remove("x/+/z/#", &"k");
        }
        assert_eq!(tree.node_count(), 2);
        assert_eq!(tree.len(), 1);
    }

    #[test]
    fn many_subscribers_on_one_topic_use_the_index() {
        let keys: Vec<&'static str> =
            (0..1000).map(|i| &*Box::leak(format!("c{i}").into_boxed_str())).collect();
        let mut tree = Tree::new();
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(tree.insert("hot/topic", key, i as u32), None);
        }
        for (i, key) in keys.iter().enumerate().step_by(3) {
            assert_eq!(tree.insert("hot/topic", key, i as u32 + 5000), Some(i as u32));
        }
        for key in keys.iter().skip(1).step_by(2) {
            assert!(tree.remove("hot/topic", key).is_some());
        }
        let (subs, _) = matches(&tree, "hot/topic");
        let mut expected: Vec<(&str, u32)> = keys
            .iter()
            .enumerate()
            .step_by(2)
            .map(|(i, k)| (*k, if i % 3 == 0 { i as u32 + 5000 } else { i as u32 }))
            .collect();
        expected.sort();
        assert_eq!(subs, expected);
        // Shrinking below the threshold drops the index and still finds keys.
        for key in keys.iter().step_by(2).skip(3) {
            assert!(tree.remove("hot/topic", key).is_some());
        }
        assert_eq!(tree.len(), 3);
        assert_eq!(tree.exact["hot/topic"].subscribers.index, None);
        assert_eq!(tree.remove("hot/topic", &keys[2]), Some(2));
        assert_eq!(tree.remove("hot/topic", &keys[2]), None);
    }

    #[test]
    fn shared_group_round_robins_in_insertion_order() {
        let mut tree = Tree::new();
        tree.insert("$share/g/a/+", "k1", 1);
        tree.insert("$share/g/a/+", "k2", 2);
        tree.insert("$share/g/a/+", "k3", 3);
        let group = first_group(&tree, "a/x");
        assert_eq!(group.group_name(), "g");
        assert_eq!(group.len(), 3);
        let members: Vec<_> = group.members().map(|(k, _)| *k).collect();
        assert_eq!(members, ["k1", "k2", "k3"]);
        let picks: Vec<_> = (0..7).map(|_| *group.pick(|_, _| true).unwrap().0).collect();
        assert_eq!(picks, ["k1", "k2", "k3", "k1", "k2", "k3", "k1"]);
    }

    #[test]
    fn pick_skips_ineligible_members_without_doubling_the_next_one() {
        let mut tree = Tree::new();
        for (i, k) in ["k1", "k2", "k3", "k4"].into_iter().enumerate() {
            tree.insert("$share/g/t", k, i as u32);
        }
        let group = first_group(&tree, "t");
        let picks: Vec<_> = (0..6).map(|_| *group.pick(|k, _| *k != "k2").unwrap().0).collect();
        assert_eq!(picks, ["k1", "k3", "k4", "k1", "k3", "k4"]);
        assert_eq!(group.pick(|_, _| false), None);
        let only_k4: Vec<_> = (0..3).map(|_| *group.pick(|k, _| *k == "k4").unwrap().0).collect();
        assert_eq!(only_k4, ["k4", "k4", "k4"]);
    }

    #[test]
    fn removing_a_shared_member_keeps_the_rotation() {
        let mut tree = Tree::new();
        for k in ["k1", "k2", "k3"] {
            tree.insert("$share/g/a/#", k, 0);
        }
        let group = first_group(&tree, "a");
        assert_eq!(*group.pick(|_, _| true).unwrap().0, "k1");
        assert_eq!(*group.pick(|_, _| true).unwrap().0, "k2");
        // The cursor is at k3; removing k1 (before it) must not skip k3.
        assert_eq!(tree.remove("$share/g/a/#", &"k1"), Some(0));
        assert_eq!(tree.len(), 2);
        let group = first_group(&tree, "a");
        let picks: Vec<_> = (0..4).map(|_| *group.pick(|_, _| true).unwrap().0).collect();
        assert_eq!(picks, ["k3", "k2", "k3", "k2"]);
        // Removing the member the cursor points at moves on to the next one.
        assert_eq!(tree.remove("$share/g/a/#", &"k3"), Some(0));
        let group = first_group(&tree, "a/b");
        assert_eq!(group.members().map(|(k, _)| *k).collect::<Vec<_>>(), ["k2"]);
        assert_eq!(*group.pick(|_, _| true).unwrap().0, "k2");
        assert_eq!(tree.remove("$share/g/a/#", &"k2"), Some(0));
        assert_eq!(matches(&tree, "a"), (vec![], vec![]));
        assert!(tree.is_empty());
        assert_eq!(tree.node_count(), 0);
    }

    #[test]
    fn groups_are_identified_by_name_and_filter() {
        let mut tree = Tree::new();
        tree.insert("$share/g/a/+", "k1", 1);
        tree.insert("$share/g/a/#", "k2", 2);
        tree.insert("$share/h/a/+", "k3", 3);
        tree.insert("$share/g/a/b", "k4", 4);
        tree.insert("a/+", "k1", 5);
        assert_eq!(tree.len(), 5);
        let mut seen = Vec::new();
        tree.for_each_match("a/b", |m| match m {
            Match::Shared(g) => {
                let members: Vec<_> = g.members().map(|(k, v)| (*k, *v)).collect();
                seen.push((g.group_name().to_owned(), members));
            }
            Match::Subscriber { key, value } => seen.push(("-".into(), vec![(*key, *value)])),
        });
        seen.sort();
        assert_eq!(
            seen,
            [
                ("-".to_owned(), vec![("k1", 5)]),
                ("g".to_owned(), vec![("k1", 1)]),
                ("g".to_owned(), vec![("k2", 2)]),
                ("g".to_owned(), vec![("k4", 4)]),
                ("h".to_owned(), vec![("k3", 3)]),
            ]
        );
        // The non-shared subscription of k1 to a/+ is a separate pair.
        assert_eq!(tree.remove("a/+", &"k1"), Some(5));
        assert_eq!(tree.remove("$share/g/a/+", &"k1"), Some(1));
    }

    #[test]
    fn share_prefix_without_a_filter_is_an_ordinary_filter() {
        let mut tree = Tree::new();
        tree.insert("$share/g", "k", 1);
        assert_eq!(matches(&tree, "$share/g").0, [("k", 1)]);
        assert_eq!(tree.remove("$share/g", &"k"), Some(1));
    }

    #[test]
    fn exact_only_trees_skip_the_trie() {
        let mut tree = Tree::new();
        tree.insert("a/b", "k", 1);
        tree.insert("$share/g/a/b", "k", 2);
        assert_eq!(tree.wildcard_subs, 0);
        assert_eq!(tree.node_count(), 0);
        assert_eq!(matches(&tree, "a/b"), (vec![("k", 1)], vec!["g".to_owned()]));
    }

    #[test]
    fn match_is_usable_from_many_threads() {
        fn assert_sync<T: Sync + Send>() {}
        assert_sync::<TopicTree<String, u64>>();
        let mut tree = TopicTree::<u32, ()>::new();
        for k in 0..4 {
            tree.insert("$share/g/+", k, ());
        }
        let counts: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(0)).collect();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        tree.for_each_match("t", |m| {
                            if let Match::Shared(g) = m {
                                let (k, _) = g.pick(|_, _| true).unwrap();
                                counts[*k as usize].fetch_add(1, Ordering::Relaxed);
                            }
                        });
                    }
                });
            }
        });
        for count in &counts {
            assert_eq!(count.load(Ordering::Relaxed), 1000);
        }
    }

    #[test]
    fn deep_filters_and_topics_need_no_deep_stack() {
        const LEVELS: usize = 30_000;
        run_on_small_stack(|| {
            let plus = vec!["+"; LEVELS].join("/");
            let literal = vec!["a"; LEVELS].join("/");
            let mut tree = Tree::new();
            tree.insert(&plus, "k", 1);
            tree.insert(&format!("{literal}/#"), "k", 2);
            tree.insert(&format!("$share/g/{}/#", vec!["+"; LEVELS - 1].join("/")), "k", 3);
            let (subs, groups) = matches(&tree, &literal);
            assert_eq!(subs, [("k", 1), ("k", 2)]);
            assert_eq!(groups, ["g"]);
            assert_eq!(tree.remove(&plus, &"k"), Some(1));
            drop(tree);
            let mut tree = Tree::new();
            tree.insert(&plus, "k", 1);
            assert_eq!(tree.remove(&plus, &"k"), Some(1));
            assert_eq!(tree.node_count(), 0);
        });
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(String, u8),
        Remove(String, u8),
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (filter_strategy(true), 0..4u8).prop_map(|(f, k)| Op::Insert(f, k)),
            1 => (filter_strategy(true), 0..4u8).prop_map(|(f, k)| Op::Remove(f, k)),
        ]
    }

    /// What the model expects for one topic: sorted non-shared (key, value)
    /// and sorted (group, members in order), where a group is shown by name
    /// and members since the tree does not expose its filter.
    type Expected = (Vec<(u8, u32)>, Vec<(String, Vec<(u8, u32)>)>);

    fn check_against_model(
        tree: &TopicTree<u8, u32>,
        plain: &BTreeMap<(String, u8), u32>,
        shared: &BTreeMap<(String, String), Vec<(u8, u32)>>,
        topic: &str,
    ) -> Result<(), TestCaseError> {
        let mut expected: Expected = (Vec::new(), Vec::new());
        for ((filter, key), value) in plain {
            if naive_matches(filter, topic) {
                expected.0.push((*key, *value));
            }
        }
        for ((group, filter), members) in shared {
            if !members.is_empty() && naive_matches(filter, topic) {
                expected.1.push((group.clone(), members.clone()));
            }
        }
        let mut actual: Expected = (Vec::new(), Vec::new());
        tree.for_each_match(topic, |m| match m {
            Match::Subscriber { key, value } => actual.0.push((*key, *value)),
            Match::Shared(g) => actual
                .1
                .push((g.group_name().to_owned(), g.members().map(|(k, v)| (*k, *v)).collect())),
        });
        expected.0.sort();
        expected.1.sort();
        actual.0.sort();
        actual.1.sort();
        prop_assert_eq!(actual, expected, "topic {:?}", topic);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn matches_like_the_reference(
            ops in prop::collection::vec(op_strategy(), 0..40),
            topics in prop::collection::vec(topic_strategy(), 1..8),
        ) {
            let mut tree = TopicTree::<u8, u32>::new();
            let mut plain = BTreeMap::new();
            let mut shared: BTreeMap<(String, String), Vec<(u8, u32)>> = BTreeMap::new();
            for (serial, op) in ops.iter().enumerate() {
                let serial = serial as u32;
                match op {
                    Op::Insert(filter, key) => {
                        let expected = match split_shared(filter) {
                            (None, f) => plain.insert((f.to_owned(), *key), serial),
                            (Some(g), f) => {
                                let members = shared.entry((g.to_owned(), f.to_owned())).or_default();
                                match members.iter_mut().find(|(k, _)| k == key) {
                                    Some((_, v)) => Some(std::mem::replace(v, serial)),
                                    None => { members.push((*key, serial)); None }
                                }
                            }
                        };
                        prop_assert_eq!(tree.insert(filter, *key, serial), expected);
                    }
                    Op::Remove(filter, key) => {
                        let expected = match split_shared(filter) {
                            (None, f) => plain.remove(&(f.to_owned(), *key)),
                            (Some(g), f) => shared
                                .get_mut(&(g.to_owned(), f.to_owned()))
                                .and_then(|m| m.iter().position(|(k, _)| k == key).map(|i| m.remove(i).1)),
                        };
                        prop_assert_eq!(tree.remove(filter, key), expected);
                    }
                }
                let model_len = plain.len() + shared.values().map(Vec::len).sum::<usize>();
                prop_assert_eq!(tree.len(), model_len);
            }
            for topic in &topics {
                check_against_model(&tree, &plain, &shared, topic)?;
            }
            // Remove what is left, in an order unrelated to insertion.
            for ((filter, key), value) in std::mem::take(&mut plain) {
                prop_assert_eq!(tree.remove(&filter, &key), Some(value));
            }
            for ((group, filter), members) in std::mem::take(&mut shared) {
                for (key, value) in members.into_iter().rev() {
                    prop_assert_eq!(tree.remove(&format!("$share/{group}/{filter}"), &key), Some(value));
                }
            }
            prop_assert_eq!(tree.len(), 0);
            prop_assert_eq!(tree.node_count(), 0);
            prop_assert!(tree.exact.is_empty());
            prop_assert_eq!(tree.wildcard_subs, 0);
        }
    }
}
