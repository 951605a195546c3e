//! What SIGHUP and `POST /api/v1/reload` change without a restart: users,
//! JWT keys, the ACL and certificates (`security.rs`), the administrators
//! (`[admin]`), and the routes and endpoints, read again from the
//! configuration file. Other settings in the file need a restart.
//!
//! The file is read and checked first: if it is bad, nothing changes. Then
//! the administrators, the routes (whose endpoints are built before any is
//! replaced), then the security files (all read before any is applied); a
//! failure in either of the last two leaves that part as it was.

use crate::config::{AdminSettings, Config};
use crate::security::{Loaded, Security};
use anyhow::Context;
use ferry_routes::config::RoutesConfig;
use ferry_routes::{EndpointStatus, RoutesService};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::Mutex;

pub struct Reloader {
    security: Arc<Security>,
    routes: Mutex<Option<RoutesService>>,
    /// The routes and endpoint types in force, for the admin API.
    applied: parking_lot::Mutex<Applied>,
    /// Who is an administrator: read on every admin API request.
    admin: parking_lot::RwLock<Arc<AdminSettings>>,
    /// `None` when Ferry runs without `--config`: there is no file to
    /// read the routes from again, and they stay as they are (none).
    config_file: Option<PathBuf>,
}

/// What a reload loaded, for its log line and the admin API's answer.
#[derive(Debug, Serialize)]
pub struct Reloaded {
    #[serde(flatten)]
    pub security: Loaded,
    pub routes: usize,
    pub endpoints: usize,
}

/// The routing configuration in force: the routes, and each endpoint's
/// type (its other settings may hold secrets).
#[derive(Clone)]
pub struct Applied {
    pub routes: RoutesConfig,
    pub endpoint_types: BTreeMap<String, &'static str>,
}

impl Applied {
    fn of(config: &Config) -> Applied {
        Applied {
            routes: config.routes.clone(),
            endpoint_types: config
                .endpoints
                .iter()
                .map(|(name, endpoint)| (name.clone(), endpoint.kind.type_name()))
                .collect(),
        }
    }
}

impl Reloader {
    pub fn new(
        security: Arc<Security>,
        routes: RoutesService,
        config: &Config,
        config_file: Option<PathBuf>,
    ) -> Reloader {
        Reloader {
            security,
            routes: Mutex::new(Some(routes)),
            applied: parking_lot::Mutex::new(Applied::of(config)),
            admin: parking_lot::RwLock::new(Arc::new(config.admin.clone())),
            config_file,
        }
    }

    pub async fn reload(&self) -> anyhow::Result<Reloaded> {
        let file = self.config_file.clone();
        let config = tokio::task::spawn_blocking(move || file.map(|file| Config::load(&file)))
            .await
            .context("the reload task failed")?
            .transpose()?;
        if let Some(config) = &config {
            *self.admin.write() = Arc::new(config.admin.clone());
        }
        let mut routes = self.routes.lock().await;
        let (route_count, endpoint_count) = match (&config, routes.as_mut()) {
            (Some(config), Some(routes)) => {
                routes.apply(&config.routes, &config.endpoints).await.context("routes")?;
                *self.applied.lock() = Applied::of(config);
                (config.routes.routes.len(), config.endpoints.len())
            }
            _ => (0, 0),
        };
        drop(routes);
        let security = self.security.clone();
        let loaded = tokio::task::spawn_blocking(move || security.reload())
            .await
            .context("the reload task failed")??;
        let reloaded =
            Reloaded { security: loaded, routes: route_count, endpoints: endpoint_count };
        tracing::info!(?reloaded, "reloaded");
        Ok(reloaded)
    }

    /// The routes' periodic chores: their `$SYS` figures, and the expiry
    /// of queues no endpoint reads any more.
    pub async fn tick(&self) {
        if let Some(routes) = self.routes.lock().await.as_ref() {
            routes.sweep_orphans().await;
            routes.publish_sys();
        }
    }

    /// The routes' metrics as they are now.
    pub async fn routes_metrics(&self) -> Option<ferry_routes::RoutesMetrics> {
        let routes = self.routes.lock().await;
        let routes = routes.as_ref()?;
        Some(ferry_routes::RoutesMetrics::new(routes.status(), routes.unrouted()))
    }

    /// The `[admin]` settings in force.
    pub fn admin_settings(&self) -> Arc<AdminSettings> {
        self.admin.read().clone()
    }

    /// The routes and endpoint types in force.
    pub fn applied(&self) -> Applied {
        self.applied.lock().clone()
    }

    /// Every endpoint's state and queue (`RoutesService::status`).
    pub async fn endpoints(&self) -> Vec<EndpointStatus> {
        self.routes.lock().await.as_ref().map(RoutesService::status).unwrap_or_default()
    }

    /// Pauses or resumes an endpoint; false if none of that name runs.
    pub async fn set_paused(&self, endpoint: &str, paused: bool) -> bool {
        let routes = self.routes.lock().await;
        routes.as_ref().is_some_and(|routes| routes.set_paused(endpoint, paused))
    }

    /// Stops the endpoints at shutdown; what is in flight stays queued.
    pub async fn stop(&self) {
        if let Some(routes) = self.routes.lock().await.take() {
            routes.stop().await;
        }
    }
}
