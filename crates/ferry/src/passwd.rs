//! `ferry passwd`: manages a password file (`ferry_auth::PasswordFile`)
//! the way `mosquitto_passwd` manages Mosquitto's.

use anyhow::{bail, Context};
use ferry_auth::PasswordFile;
use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct PasswdArgs {
    /// The password file; created (readable by its owner only) if missing.
    file: PathBuf,
    /// The user to add, change or remove.
    user: String,
    /// Remove the user instead.
    #[arg(long)]
    delete: bool,
}

pub fn run(args: PasswdArgs) -> anyhow::Result<()> {
    let PasswdArgs { file, user, delete } = args;
    let exists = file.exists();
    let mut passwords = if exists { PasswordFile::load(&file)? } else { PasswordFile::default() };
    if delete {
        if !passwords.remove(&user) {
            bail!("{}: no user {user:?}", file.display());
        }
        passwords.save(&file)?;
        println!("{}: removed {user}", file.display());
        return Ok(());
    }
    let changing = passwords.users().any(|known| known == user);
    let password = read_password()?;
    passwords.set(&user, password.as_bytes())?;
    passwords.save(&file)?;
    let done = if changing { "changed the password of" } else { "added" };
    println!("{}: {done} {user}", file.display());
    Ok(())
}

/// From the terminal, twice and without echo; otherwise one line of stdin,
/// so that scripts can pipe it in (never as an argument, where `ps` and
/// shell history would show it).
fn read_password() -> anyhow::Result<String> {
    if std::io::stdin().is_terminal() {
        let password = rpassword::prompt_password("Password: ")?;
        let again = rpassword::prompt_password("Password again: ")?;
        if password != again {
            bail!("the two passwords differ");
        }
        return Ok(password);
    }
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).context("cannot read the password from stdin")?;
    let password = line.strip_suffix('\n').unwrap_or(&line);
    Ok(password.strip_suffix('\r').unwrap_or(password).to_owned())
}
