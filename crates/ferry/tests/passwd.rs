//! `ferry passwd` as a script would run it: the password piped on stdin.

use ferry_auth::PasswordFile;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `ferry passwd [--delete] FILE USER`; `args` is the user, after
/// `--delete` when given.
fn passwd(file: &Path, args: &[&str], stdin: &str) -> Output {
    let (user, flags) = args.split_last().expect("a user");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("passwd")
        .args(flags)
        .arg(file)
        .arg(user)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ferry runs");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn ok(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    stdout
}

#[test]
fn users_are_added_changed_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("passwd");
    assert!(ok(&passwd(&file, &["sensor-1"], "first secret\n")).contains("added sensor-1"));
    ok(&passwd(&file, &["sensor-2"], "second\r\n"));
    let out = ok(&passwd(&file, &["sensor-1"], "changed"));
    assert!(out.contains("changed the password of sensor-1"), "{out}");

    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("secret") && !text.contains("changed"), "no password in clear");
    let passwords = PasswordFile::load(&file).unwrap();
    assert!(passwords.verify("sensor-1", b"changed"));
    assert!(!passwords.verify("sensor-1", b"first secret"));
    assert!(passwords.verify("sensor-2", b"second"), "line ending not part of the password");

    ok(&passwd(&file, &["--delete", "sensor-1"], ""));
    let passwords = PasswordFile::load(&file).unwrap();
    assert_eq!(passwords.users().collect::<Vec<_>>(), ["sensor-2"]);
}

#[test]
fn mistakes_are_refused_and_leave_the_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("passwd");
    ok(&passwd(&file, &["keep"], "p\n"));
    let before = std::fs::read_to_string(&file).unwrap();
    for (args, stdin, says) in [
        (vec!["--delete", "nobody"], "", "no user \"nobody\""),
        (vec!["a:b"], "p\n", "contains `:`"),
        (vec!["empty"], "\n", "empty"),
    ] {
        let output = passwd(&file, &args, stdin);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
}
