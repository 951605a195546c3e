//! Parses the input as ferry.toml with `Config::parse`. The parser lives in
//! the `ferry` binary crate, which cannot be a dependency, so its file is
//! compiled here as a module (its dependencies are in fuzz/Cargo.toml).
//! Errors are expected; panics are not, in parsing, in validation, or in
//! what `ferry serve` asks of a parsed config before opening listeners.
#![no_main]

#[allow(dead_code)]
#[path = "../../crates/ferry/src/config.rs"]
mod config;

use config::Config;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Config::parse(text, Path::new("ferry.toml")) {
        Ok(config) => {
            for listener in config.all_listeners() {
                let _ = listener.name();
                let _ = listener.auth(&config.auth);
            }
        }
        // Rendered as `ferry check-config` would print it.
        Err(error) => {
            let _ = error.to_string();
        }
    }
});
