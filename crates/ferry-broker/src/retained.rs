//! Retained messages, stored by topic name and found by topic filter.
//!
//! # Design
//!
//! A SUBSCRIBE must deliver the retained messages its filter matches, and a
//! broker may hold millions of them, so the store is a trie of topic levels:
//! a filter with a literal prefix (`a/b/+`) walks straight down to the `a/b`
//! node and only explores that subtree. Each node that holds a message keeps
//! the full topic as a `Box<str>` next to the value, so visiting passes a
//! `&str` without rebuilding the topic from its levels.
//!
//! Nodes live in an arena (`Vec<Node>` plus a free list) and refer to their
//! children by index and to their parent by a back link. Publishers choose
//! the topics, and a topic may have over 30,000 levels, so nothing here
//! recurses: insert and lookup loop down the levels, matching uses an
//! explicit stack, removal prunes bottom-up along the parent links, and
//! dropping the store drops a flat vector. [`RetainedStore::retain`] sweeps
//! the arena in one linear pass. Freed slots are reused, and the arena is
//! released whole when the store empties, so churn does not grow memory
//! beyond its peak.
//!
//! Level maps use std's keyed SipHash (`RandomState`) because clients choose
//! the keys and could otherwise force hash collisions.

use std::collections::HashMap;
use std::fmt;
use std::str::Split;

/// Index of a node in the arena. `u32` halves the size of the child maps'
/// values; four billion nodes would need far more memory than a broker has.
type NodeId = u32;

/// The root stays at index 0 for the store's whole life and is never freed.
const ROOT: NodeId = 0;

/// Retained messages keyed by topic name, matched by topic filter.
pub struct RetainedStore<V> {
    /// `nodes[ROOT]` is the root, which stands for no level at all.
    nodes: Vec<Node<V>>,
    /// Vacant slots of `nodes`, reused before the vector grows.
    free: Vec<NodeId>,
    len: usize,
}

#[derive(Debug)]
struct Node<V> {
    /// Lets removal prune bottom-up without recursion; meaningless for the
    /// root and for vacant slots.
    parent: NodeId,
    children: HashMap<Box<str>, NodeId>,
    /// The full topic and its message, if one is retained at this node.
    value: Option<(Box<str>, V)>,
}

impl<V> Node<V> {
    fn new(parent: NodeId) -> Self {
        Node { parent, children: HashMap::new(), value: None }
    }
}

/// Pending work of the match walk.
enum Step<'f> {
    /// Match the remaining filter levels from this node.
    Match(NodeId, Split<'f, char>),
    /// Visit this node's whole subtree (below a `#`).
    All(NodeId),
}

impl<V> Default for RetainedStore<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> RetainedStore<V> {
    /// An empty store.
    pub fn new() -> Self {
        RetainedStore { nodes: vec![Node::new(ROOT)], free: Vec::new(), len: 0 }
    }

    /// Stores `value` for the exact topic name (no wildcards); returns the
    /// previous one.
    pub fn insert(&mut self, topic: &str, value: V) -> Option<V> {
        let mut id = ROOT;
        for level in topic.split('/') {
            id = self.child_or_insert(id, level);
        }
        let slot = &mut self.nodes[id as usize].value;
        if let Some((_, old)) = slot {
            return Some(std::mem::replace(old, value));
        }
        *slot = Some((topic.into(), value));
        self.len += 1;
        None
    }

    /// Removes and returns the message retained for `topic`.
    pub fn remove(&mut self, topic: &str) -> Option<V> {
        let id = self.find(topic)?;
        let (_, value) = self.nodes[id as usize].value.take()?;
        self.len -= 1;
        self.prune(id, topic);
        self.release_if_empty();
        Some(value)
    }

    /// The message retained for `topic`.
    pub fn get(&self, topic: &str) -> Option<&V> {
        let id = self.find(topic)?;
        self.nodes[id as usize].value.as_ref().map(|(_, v)| v)
    }

    /// Calls `visit(topic, value)` for every retained topic that `filter`
    /// matches. `filter` has no `$share/` prefix. Only subtrees the filter
    /// can match are explored.
    pub fn for_each_match(&self, filter: &str, mut visit: impl FnMut(&str, &V)) {
        self.walk(filter, &mut visit);
    }

    /// Keeps only the messages for which `keep` is true (used to sweep expired
    /// messages), pruning nodes left empty.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &V) -> bool) {
        // A linear pass over the arena: vacant slots and slots freed by
        // pruning during the pass hold no value and are skipped.
        for index in 1..self.nodes.len() {
            let Some((topic, value)) = &self.nodes[index].value else {
                continue;
            };
            if keep(topic, value) {
                continue;
            }
            if let Some((topic, _)) = self.nodes[index].value.take() {
                self.len -= 1;
                self.prune(index as NodeId, &topic);
            }
        }
        self.release_if_empty();
    }

    /// Number of retained messages.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no message is retained.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn find(&self, topic: &str) -> Option<NodeId> {
        let mut id = ROOT;
        for level in topic.split('/') {
            id = *self.nodes[id as usize].children.get(level)?;
        }
        Some(id)
    }

    /// The match walk; returns how many nodes it touched, so tests can check
    /// that a literal prefix confines it.
    fn walk(&self, filter: &str, visit: &mut impl FnMut(&str, &V)) -> usize {
        let mut touched = 0;
        // Literal levels continue in `next` without touching the stack, so a
        // filter without wildcards never allocates.
        let mut next = Some(Step::Match(ROOT, filter.split('/')));
        let mut stack = Vec::new();
        while let Some(step) = next.take().or_else(|| stack.pop()) {
            touched += 1;
            match step {
                Step::All(id) => {
                    let node = &self.nodes[id as usize];
                    if let Some((topic, value)) = &node.value {
                        visit(topic, value);
                    }
                    stack.extend(node.children.values().map(|&child| Step::All(child)));
                }
                Step::Match(id, mut levels) => {
                    let node = &self.nodes[id as usize];
                    match levels.next() {
                        None => {
                            if let Some((topic, value)) = &node.value {
                                visit(topic, value);
                            }
                        }
                        Some("#") => {
                            // `#` also matches its parent level.
                            if let Some((topic, value)) = &node.value {
                                visit(topic, value);
                            }
                            stack.extend(self.wildcard_children(id).map(Step::All));
                        }
                        Some("+") => stack.extend(
                            self.wildcard_children(id)
                                .map(|child| Step::Match(child, levels.clone())),
                        ),
                        Some(level) => {
                            next =
                                node.children.get(level).map(|&child| Step::Match(child, levels));
                        }
                    }
                }
            }
        }
        touched
    }

    /// The children a `+` or `#` level at node `id` may enter. §4.7.2: a first
    /// level wildcard does not match topics starting with `$`.
    fn wildcard_children(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        let at_root = id == ROOT;
        self.nodes[id as usize]
            .children
            .iter()
            .filter(move |(level, _)| !(at_root && level.starts_with('$')))
            .map(|(_, &child)| child)
    }

    fn child_or_insert(&mut self, parent: NodeId, level: &str) -> NodeId {
        if let Some(&id) = self.nodes[parent as usize].children.get(level) {
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize].parent = parent;
                id
            }
            None => {
                let id = NodeId::try_from(self.nodes.len())
                    .expect("retained store exceeds u32::MAX nodes");
                self.nodes.push(Node::new(parent));
                id
            }
        };
        self.nodes[parent as usize].children.insert(level.into(), id);
        id
    }

    /// Frees the nodes from `id` (the node of `topic`) up towards the root for
    /// as long as they hold neither a message nor children.
    fn prune(&mut self, mut id: NodeId, topic: &str) {
        for level in topic.rsplit('/') {
            let node = &self.nodes[id as usize];
            if node.value.is_some() || !node.children.is_empty() {
                return;
            }
            let parent = node.parent;
            let siblings = &mut self.nodes[parent as usize].children;
            siblings.remove(level);
            // Halving the trigger point keeps this amortised O(1).
            if siblings.capacity() > 64 && siblings.len() * 4 < siblings.capacity() {
                siblings.shrink_to(siblings.len() * 2);
            }
            // Replacing the node gives back its map's spare capacity.
            self.nodes[id as usize] = Node::new(ROOT);
            self.free.push(id);
            id = parent;
        }
    }

    /// Hands the whole arena back once only the root is left.
    fn release_if_empty(&mut self) {
        if self.free.len() + 1 == self.nodes.len() && !self.free.is_empty() {
            self.nodes.truncate(1);
            self.nodes.shrink_to_fit();
            self.nodes[ROOT as usize].children = HashMap::new();
            self.free = Vec::new();
        }
    }

    /// Live nodes, root excluded.
    #[cfg(test)]
    fn node_count(&self) -> usize {
        self.nodes.len() - 1 - self.free.len()
    }
}

impl<V: fmt::Debug> fmt::Debug for RetainedStore<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (topic, value) in self.nodes.iter().filter_map(|n| n.value.as_ref()) {
            map.entry(topic, value);
        }
        map.finish()
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

    fn matching(store: &RetainedStore<u32>, filter: &str) -> Vec<(String, u32)> {
        let mut found = Vec::new();
        store.for_each_match(filter, |topic, value| found.push((topic.to_owned(), *value)));
        found.sort();
        found
    }

    fn topics(found: &[(String, u32)]) -> Vec<&str> {
        found.iter().map(|(t, _)| t.as_str()).collect()
    }

    /// Each topic's value is its position in `topics`, which tests use to
    /// tell the messages apart.
    fn numbered_store(topics: &[&str]) -> RetainedStore<u32> {
        let mut store = RetainedStore::new();
        for (i, topic) in topics.iter().enumerate() {
            store.insert(topic, i as u32);
        }
        store
    }

    #[test]
    fn insert_get_replace_remove() {
        let mut store = RetainedStore::new();
        assert!(store.is_empty());
        assert_eq!(store.insert("a/b", 1), None);
        assert_eq!(store.insert("a", 2), None);
        assert_eq!(store.insert("a/b", 3), Some(1));
        assert_eq!(store.len(), 2);
        assert_eq!(store.get("a/b"), Some(&3));
        assert_eq!(store.get("a"), Some(&2));
        assert_eq!(store.get("a/b/c"), None);
        assert_eq!(store.get("a/"), None);
        assert_eq!(store.remove("a"), Some(2));
        assert_eq!(store.remove("a"), None);
        assert_eq!(store.get("a/b"), Some(&3), "removing a parent keeps children");
        assert_eq!(store.remove("x/y"), None);
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn spec_matching_rules() {
        // `sport/#` must find every one of these and nothing else.
        let sport = [
            "sport",
            "sport/",
            "sport/tennis",
            "sport/tennis/player1",
            "sport/tennis/player1/ranking",
            "sport/tennis/player1/score/wimbledon",
            "sport/tennis/player2",
        ];
        let others = [
            "/finance",
            "finance",
            "/",
            "$SYS",
            "$SYS/x",
            "$SYS/monitor/Clients",
            "SYS/monitor/Clients",
            "a//b",
            "a/b",
            "a/$x",
        ];
        let all: Vec<&str> = sport.iter().chain(&others).copied().collect();
        let store = numbered_store(&all);
        let cases: &[(&str, &[&str])] = &[
            (
                "sport/tennis/player1/#",
                &[
                    "sport/tennis/player1",
                    "sport/tennis/player1/ranking",
                    "sport/tennis/player1/score/wimbledon",
                ],
            ),
            ("sport/#", &sport),
            ("sport/tennis/+", &["sport/tennis/player1", "sport/tennis/player2"]),
            ("sport/+", &["sport/", "sport/tennis"]),
            ("+/+", &["/", "/finance", "a/$x", "a/b", "sport/", "sport/tennis"]),
            ("/+", &["/", "/finance"]),
            ("+", &["finance", "sport"]),
            ("+/monitor/Clients", &["SYS/monitor/Clients"]),
            ("$SYS/#", &["$SYS", "$SYS/monitor/Clients", "$SYS/x"]),
            ("$SYS/+", &["$SYS/x"]),
            ("a/+/b", &["a//b"]),
            ("a//b", &["a//b"]),
            ("/#", &["/", "/finance"]),
            ("sport/tennis", &["sport/tennis"]),
            ("nothing/+", &[]),
        ];
        for (filter, expected) in cases {
            let mut expected = expected.to_vec();
            expected.sort();
            assert_eq!(topics(&matching(&store, filter)), expected, "{filter}");
        }
        let everything = matching(&store, "#");
        assert_eq!(everything.len(), all.len() - 3, "# skips the three $SYS topics");
        assert!(everything.iter().all(|(t, _)| !t.starts_with('$')));
    }

    #[test]
    fn visit_passes_the_stored_value() {
        let mut store = RetainedStore::new();
        store.insert("a/b", 7);
        store.insert("a/c", 8);
        assert_eq!(matching(&store, "a/+"), [("a/b".into(), 7), ("a/c".into(), 8)]);
    }

    #[test]
    fn literal_prefix_confines_the_walk() {
        let mut store = RetainedStore::new();
        for i in 0..1000 {
            store.insert(&format!("x/{i}/y"), i);
        }
        store.insert("a/b/c", 1);
        store.insert("a/b/d", 2);
        store.insert("a/e", 3);
        let mut seen = 0;
        // root, a, a/b, then its two children.
        assert_eq!(store.walk("a/b/+", &mut |_, _| seen += 1), 5);
        assert_eq!(seen, 2);
        assert_eq!(store.walk("a/b/#", &mut |_, _| {}), 5);
        assert_eq!(store.walk("x/5/y", &mut |_, _| {}), 4);
        assert_eq!(store.walk("q/+", &mut |_, _| {}), 1);
    }

    #[test]
    fn retain_sweeps_and_prunes() {
        let all = ["a", "a/b", "a/b/c", "a/d", "e", "/", "$SYS/x"];
        let mut store = numbered_store(&all);
        store.retain(|_, v| v % 2 == 0);
        assert_eq!(store.len(), 4);
        assert_eq!(store.get("$SYS/x"), Some(&6));
        assert_eq!(topics(&matching(&store, "#")), ["a", "a/b/c", "e"], "odd values were swept");
        store.retain(|topic, _| topic.starts_with('a'));
        assert_eq!(topics(&matching(&store, "#")), ["a", "a/b/c"]);
        assert_eq!(store.node_count(), 3);
        store.retain(|_, _| false);
        assert!(store.is_empty());
        assert_eq!(store.node_count(), 0);
        assert_eq!(store.nodes.len(), 1);
    }

    #[test]
    fn removing_everything_prunes_every_node() {
        let all = ["a/b/c", "a/b", "a", "a//", "/", "$SYS/x/y", "b/c/d/e/f"];
        let mut store = numbered_store(&all);
        assert!(store.node_count() >= all.len());
        for topic in all {
            assert!(store.remove(topic).is_some());
        }
        assert!(store.is_empty());
        assert_eq!(store.node_count(), 0);
        assert_eq!(store.nodes.len(), 1);
        assert!(store.nodes[ROOT as usize].children.is_empty());
        assert_eq!(matching(&store, "#"), []);
    }

    #[test]
    fn churn_reuses_freed_nodes() {
        let mut store = RetainedStore::new();
        store.insert("keep", 0);
        for i in 0..100 {
            store.insert("x/y/z", i);
            assert!(store.nodes.len() <= 5);
            store.remove("x/y/z");
        }
        assert_eq!(store.node_count(), 1);
    }

    #[test]
    fn deep_topics_need_no_deep_stack() {
        const LEVELS: usize = 32_000;
        run_on_small_stack(|| {
            let deep = vec!["a"; LEVELS].join("/");
            let sibling = format!("{}/b", vec!["a"; LEVELS - 1].join("/"));
            let plus = vec!["+"; LEVELS].join("/");
            let mut store = RetainedStore::new();
            store.insert(&deep, 1);
            store.insert(&sibling, 2);
            assert_eq!(store.get(&deep), Some(&1));
            assert_eq!(matching(&store, "#").len(), 2);
            assert_eq!(matching(&store, &plus).len(), 2);
            assert_eq!(matching(&store, &deep).len(), 1);
            assert_eq!(store.remove(&deep), Some(1));
            store.retain(|_, _| false);
            assert_eq!(store.node_count(), 0);
            store.insert(&deep, 3);
            drop(store);
        });
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn matches_like_the_reference(
            inserts in prop::collection::vec(topic_strategy(), 0..30),
            removals in prop::collection::vec(topic_strategy(), 0..10),
            sweep_modulus in 1..5u32,
            // Shared subscriptions get no retained messages (§4.8.2), so the
            // store never sees a `$share/` filter.
            filters in prop::collection::vec(filter_strategy(false), 1..8),
        ) {
            let mut store = RetainedStore::new();
            let mut model = BTreeMap::new();
            for (serial, topic) in inserts.iter().enumerate() {
                let serial = serial as u32;
                prop_assert_eq!(store.insert(topic, serial), model.insert(topic.clone(), serial));
            }
            for topic in &removals {
                prop_assert_eq!(store.remove(topic), model.remove(topic));
            }
            store.retain(|_, v| v % sweep_modulus != 0);
            model.retain(|_, v| *v % sweep_modulus != 0);
            prop_assert_eq!(store.len(), model.len());
            for (topic, value) in &model {
                prop_assert_eq!(store.get(topic), Some(value));
            }
            for filter in &filters {
                let expected: Vec<(String, u32)> = model
                    .iter()
                    .filter(|(topic, _)| naive_matches(filter, topic))
                    .map(|(t, v)| (t.clone(), *v))
                    .collect();
                prop_assert_eq!(matching(&store, filter), expected, "filter {:?}", filter);
            }
            for topic in model.keys() {
                prop_assert!(store.remove(topic).is_some());
            }
            prop_assert!(store.is_empty());
            prop_assert_eq!(store.node_count(), 0);
        }
    }
}
