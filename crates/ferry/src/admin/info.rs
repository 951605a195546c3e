//! `GET /api/v1/info`: what this Ferry is — version, since when it runs,
//! where it listens, and a summary of its configuration without a secret
//! (no password, key or URL with credentials; file paths only).

use super::{now_ms, rfc3339, Admin};
use crate::config::{Config, TwinsStore};
use axum::extract::State;
use axum::Json;
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// One listener as bound: its kind (`mqtt`, `mqtts`, `ws`, `wss`, `http`,
/// `https`) and address.
#[derive(Debug, Clone, Serialize)]
pub struct Listening {
    pub kind: &'static str,
    pub address: String,
}

/// What does not change while Ferry runs.
pub(super) struct Info {
    started_at_ms: u64,
    listeners: Vec<Listening>,
    config: Value,
}

impl Info {
    pub(super) fn new(config: &Config, listeners: Vec<Listening>) -> Info {
        Info { started_at_ms: now_ms(), listeners, config: summary(config) }
    }
}

fn summary(config: &Config) -> Value {
    let broker = &config.broker;
    json!({
        "data_dir": config.data_dir,
        "broker": {
            "max_connections": broker.max_connections,
            "max_inflight_messages": broker.max_inflight_messages,
            "max_queued_messages": broker.max_queued_messages,
            "max_queued_bytes": broker.max_queued_bytes,
            "max_packet_size_bytes": broker.max_packet_size_bytes,
            "max_keep_alive_secs": broker.max_keep_alive_secs,
            "max_session_expiry_secs": broker.max_session_expiry_secs,
            "retain_available": broker.retain_available,
        },
        "durability": {
            "enabled": config.durability.enabled,
            "fsync": format!("{:?}", config.durability.fsync).to_lowercase(),
        },
        "auth": {
            "allow_anonymous": config.auth.allow_anonymous,
            "password_file": config.auth.password_file,
            "acl_file": config.auth.acl_file,
            "jwt": config.auth.jwt.is_some(),
        },
        "admin": { "users": config.admin.users, "groups": config.admin.groups },
        "routes": config.routes.routes.len(),
        "endpoints": config.endpoints.len(),
        "twins": {
            "enabled": config.twins.enabled,
            "store": match config.twins.store {
                TwinsStore::Sqlite => "sqlite",
                #[cfg(feature = "postgres")]
                TwinsStore::Postgres(_) => "postgres",
            },
        },
    })
}

pub(super) async fn info(State(admin): State<Arc<Admin>>) -> Json<Value> {
    let info = &admin.info;
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "started_at": rfc3339(info.started_at_ms),
        "uptime_seconds": admin.broker.started_at.elapsed().as_secs(),
        "listeners": info.listeners,
        "config": info.config,
    }))
}
