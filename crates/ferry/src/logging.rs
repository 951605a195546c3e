//! Logs go to stderr as text or JSON lines, filtered by `log.level`.

use crate::config::{LogConfig, LogFormat};
use tracing_subscriber::EnvFilter;

pub fn init(config: &LogConfig) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(&config.level)?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match config.format {
        LogFormat::Text => builder.with_ansi(false).init(),
        LogFormat::Json => builder.json().init(),
    }
    Ok(())
}
