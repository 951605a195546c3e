//! Test helpers shared by `topic_tree` and `retained`. Both answer "which
//! topics does this filter match" by the rules of §4.7, so both are checked
//! against one reference matcher on the same generated topics and filters:
//! a fix to the reference or the generators then reaches both.

use proptest::prelude::*;

/// Plain reference matcher, written straight from §4.7. `topic_tree`'s tests
/// check it against the spec's examples.
pub(crate) fn naive_matches(filter: &str, topic: &str) -> bool {
    let f: Vec<&str> = filter.split('/').collect();
    let t: Vec<&str> = topic.split('/').collect();
    if topic.starts_with('$') && (f[0] == "+" || f[0] == "#") {
        return false;
    }
    for (i, level) in f.iter().enumerate() {
        if *level == "#" {
            return true;
        }
        match t.get(i) {
            None => return false,
            Some(t) if *level != "+" && level != t => return false,
            Some(_) => {}
        }
    }
    f.len() == t.len()
}

/// So few levels that generated topics and filters often meet; `$x` brings in
/// the rule for `$` topics and `""` the empty level.
const LEVELS: &[&str] = &["a", "b", "$x", ""];

pub(crate) fn topic_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(LEVELS), 1..5)
        .prop_map(|levels| levels.join("/"))
        .prop_filter("topics are nonempty", |t| !t.is_empty())
}

/// Filters over [`LEVELS`] and `+`, with `#` only last as §4.7.1 demands.
/// With `shared`, two thirds of them get a `$share/g/` or `$share/h/` prefix:
/// two group names, so that one filter can belong to two groups.
pub(crate) fn filter_strategy(shared: bool) -> impl Strategy<Value = String> {
    let level = prop::sample::select(&["a", "b", "$x", "", "+"][..]);
    let share = if shared { 0..3u8 } else { 0..1u8 };
    (prop::collection::vec(level, 0..4), any::<bool>(), share)
        .prop_map(|(mut levels, hash, share)| {
            if hash || levels.is_empty() {
                levels.push("#");
            }
            let filter = levels.join("/");
            match share {
                0 => filter,
                1 => format!("$share/g/{filter}"),
                _ => format!("$share/h/{filter}"),
            }
        })
        .prop_filter("filters are nonempty", |f| !f.is_empty())
}

/// Runs `test` on a thread with a 256 KiB stack. Clients choose topics of
/// tens of thousands of levels, and on so small a stack a walk that recursed
/// once per level overflows instead of passing by the grace of a large
/// default stack.
pub(crate) fn run_on_small_stack(test: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new().stack_size(256 * 1024).spawn(test).unwrap().join().unwrap();
}
