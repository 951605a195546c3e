//! The hand-written sections of a document `compare` wrote before: a
//! comparison of two builds of one broker, say, which a suite cannot run.
//! Regenerating the document, whole or with `--only`, must not lose them.
//!
//! They are found by elimination: every `## ` section of the earlier
//! document whose title is neither one of the document's own (`Machine`,
//! `Versions`, `How to reproduce`) nor the name of one of the suite's runs.
//! They come after the runs in the new document, in their earlier order. A
//! run renamed or taken out of the suite leaves its last section behind
//! this way, to be deleted by hand.

use super::suite::Suite;

/// Titles of the sections `markdown::render` writes besides the runs'.
const OWN_TITLES: [&str; 3] = ["Machine", "Versions", "How to reproduce"];

/// How every document `compare` writes begins (`markdown::render`); a file
/// that does not is not one, and nothing of it is carried over.
const WRITTEN_BY: &str = "<!-- Written by `ferry bench compare";

/// The sections of `earlier` to carry over, each with its trailing blank
/// lines, in order; empty when `earlier` is not a document of `compare`.
pub fn hand_written(earlier: &str, suite: &Suite) -> String {
    if !earlier.starts_with(WRITTEN_BY) {
        return String::new();
    }
    let generated =
        |title: &str| OWN_TITLES.contains(&title) || suite.runs.iter().any(|run| run.name == title);
    let mut kept = String::new();
    let mut keeping = false;
    let mut in_code = false;
    for line in earlier.split_inclusive('\n') {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code {
            if let Some(title) = line.strip_prefix("## ") {
                keeping = !generated(title.trim_end());
            }
        }
        if keeping {
            kept.push_str(line);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn suite(runs: &[&str]) -> Suite {
        let runs =
            runs.iter().map(|name| format!("[[run]]\nname = \"{name}\"\nargs = [\"conn\"]\n"));
        let text = format!(
            "title = \"t\"\n[[broker]]\nname = \"B\"\ncommand = [\"b\"]\nport = 1\n{}",
            runs.collect::<String>()
        );
        Suite::parse(&text, Path::new("s.toml")).unwrap()
    }

    const EARLIER: &str = "<!-- Written by `ferry bench compare --suite s.toml`: ... -->

# t

## Machine

| | |

## conn

```sh
## not a title: inside a code block
```

## Two builds side by side

By hand.

```sh
## still the hand section's
```

### A part of it

## other run

## Later, by hand

More.
";

    #[test]
    fn only_the_sections_compare_did_not_write_are_kept() {
        let kept = hand_written(EARLIER, &suite(&["conn", "other run"]));
        assert_eq!(
            kept,
            "## Two builds side by side\n\nBy hand.\n\n```sh\n## still the hand section's\n```\n\n\
             ### A part of it\n\n## Later, by hand\n\nMore.\n"
        );
    }

    #[test]
    fn a_run_no_longer_in_the_suite_is_kept() {
        let kept = hand_written(EARLIER, &suite(&["conn"]));
        assert!(kept.contains("## other run\n"), "{kept}");
    }

    #[test]
    fn a_file_compare_did_not_write_gives_nothing() {
        assert_eq!(hand_written("# Notes\n\n## Mine\n", &suite(&["conn"])), "");
        assert_eq!(hand_written("", &suite(&["conn"])), "");
    }
}
