//! The digital twins in the binary: the store `[twins]` names, and who
//! each HTTP request to `/api/2` comes from.
//!
//! A request's subjects, as Ditto's policies name them:
//! - `Authorization: Basic` checked against Ferry's password file gives
//!   `<basic_subject_prefix>:<user>` (`nginx:` by default, because Ditto's
//!   reference deployment authenticates through nginx and the policies its
//!   users have name `nginx:` subjects);
//! - `Authorization: Bearer <JWT>` verified with `[auth.jwt]` gives
//!   `<jwt_subject_prefix>:<user>`, the user the token names;
//! - with `pre_authenticated = true`, the `x-ditto-pre-authenticated`
//!   header a proxy in front sets (`nginx:alice,google:bob`) is taken as
//!   given; off by default, since anyone who can reach the listener can
//!   set it;
//! - a console login's session cookie (`POST /api/v1/login`, an
//!   administrator) gives `<basic_subject_prefix>:<user>`, as the same
//!   user's Basic credentials do, so the console's twins page sees what
//!   that user may see; the cookie is `SameSite=Strict`, so another site
//!   cannot make a browser send it;
//! - no credentials, on a loopback listener with no password file and no
//!   JWT keys (Ferry with no configuration): `anonymous_subject`
//!   (`nginx:ditto`), so that Ditto's documentation examples run against
//!   a fresh `ferry serve`. Never beyond loopback.

use crate::admin::Admin;
use crate::config::{Config, OwnThingSetting, TwinsStore};
use crate::http_auth::{HttpAuth, HttpUser};
use anyhow::Context;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use ferry_broker::{Broker, Fsync};
use ferry_twins::connections::Connections;
use ferry_twins::mqtt::{MqttSettings, OwnThing, TwinTopics};
use ferry_twins::service::{Caller, Twins, TwinsConfig};
use ferry_twins::shadow::ShadowSettings;
#[cfg(feature = "postgres")]
use ferry_twins::store::postgres::PostgresStore;
use ferry_twins::store::sqlite::SqliteStore;
use ferry_twins::store::Store;
use std::net::SocketAddr;
use std::sync::Arc;

/// Opens the store and starts the service, or `None` with `[twins]
/// enabled = false`.
pub async fn start(config: &Config) -> anyhow::Result<Option<Arc<Twins>>> {
    let settings = &config.twins;
    if !settings.enabled {
        return Ok(None);
    }
    let store = match &settings.store {
        TwinsStore::Sqlite => {
            std::fs::create_dir_all(&config.data_dir).with_context(|| {
                format!("cannot create the data directory {}", config.data_dir.display())
            })?;
            let path = config.data_dir.join("twins.db");
            let power_safe = config.durability.fsync == Fsync::Always;
            let store = SqliteStore::open(&path, power_safe)
                .with_context(|| format!("cannot open the twin store {}", path.display()))?;
            tracing::info!(path = %path.display(), "twins stored in SQLite");
            Store::Sqlite(store)
        }
        #[cfg(feature = "postgres")]
        TwinsStore::Postgres(url) => {
            let store = PostgresStore::open(url)
                .await
                .context("cannot open the twin store in PostgreSQL")?;
            tracing::info!("twins stored in PostgreSQL");
            Store::Postgres(store)
        }
    };
    let retention = settings.event_retention.0;
    let granularity = settings.subject_expiry_granularity.0.as_secs();
    let service = TwinsConfig {
        cached_policies: settings.cached_policies,
        event_retention: (!retention.is_zero()).then_some(retention),
        policy_limits: ferry_twins::policy::PolicyLimits {
            subject_expiry_granularity_seconds: i64::try_from(granularity).unwrap_or(i64::MAX),
            ..Default::default()
        },
        ..TwinsConfig::default()
    };
    let twins = Arc::new(Twins::new(store, service));
    tokio::spawn(twins.clone().run_journal_pruning());
    tokio::spawn(twins.clone().run_announcements());
    Ok(Some(twins))
}

/// Loads the connections stored in the data directory and starts the
/// open ones (`ferry_twins::connections`); this Ferry's MQTT listeners
/// are on `own_mqtt_ports`.
pub fn connections(
    config: &Config,
    twins: &Arc<Twins>,
    broker: &Arc<Broker>,
    own_mqtt_ports: Vec<u16>,
) -> anyhow::Result<Arc<Connections>> {
    std::fs::create_dir_all(&config.data_dir).with_context(|| {
        format!("cannot create the data directory {}", config.data_dir.display())
    })?;
    let file = config.data_dir.join("twin-connections.json");
    let managers = config.twins.connection_subjects.clone();
    let connections =
        Connections::open(twins.clone(), file, managers, Arc::downgrade(broker), own_mqtt_ports)?;
    Ok(Arc::new(connections))
}

/// Serves the Ditto protocol on the broker's `[twins] mqtt_prefix` topics
/// (`ferry_twins::mqtt`), unless the prefix is empty. A client without a
/// verified user name is `anonymous_subject` under the HTTP API's rule:
/// only with no password file or JWT keys set up and every listener on a
/// loopback address (`loopback_only`), which is Ferry with no
/// configuration.
pub fn serve_mqtt(
    config: &Config,
    twins: &Arc<Twins>,
    broker: &Arc<Broker>,
    loopback_only: bool,
) -> anyhow::Result<()> {
    let settings = &config.twins;
    if settings.mqtt_prefix.is_empty() && !settings.shadows {
        return Ok(());
    }
    let no_credentials_configured =
        config.auth.password_file.is_none() && config.auth.jwt.is_none();
    let anonymous_subject =
        (loopback_only && no_credentials_configured && !settings.anonymous_subject.is_empty())
            .then(|| settings.anonymous_subject.clone());
    let own_thing = match settings.mqtt_own_thing {
        OwnThingSetting::None => OwnThing::Any,
        OwnThingSetting::ClientId => OwnThing::ClientId,
        OwnThingSetting::Username => OwnThing::Username,
        OwnThingSetting::Certificate => OwnThing::Certificate,
    };
    let mqtt = MqttSettings {
        prefix: settings.mqtt_prefix.clone(),
        subject_prefix: settings.mqtt_subject_prefix.clone(),
        anonymous_subject,
        own_thing,
        shadows: settings.shadows.then(|| ShadowSettings {
            namespace: settings.shadow_namespace.clone(),
            classic_feature: settings.shadow_feature.clone(),
        }),
        // Checked by `Config::validate`; a file changed since is refused
        // here rather than half-read.
        implicit_template: settings.implicit_template().unwrap_or_else(|error| {
            tracing::error!(%error, "implicit thing creation is off");
            None
        }),
    };
    if !mqtt.prefix.is_empty() {
        tracing::info!(prefix = %mqtt.prefix, "the Ditto protocol is served over MQTT under {}/", mqtt.prefix);
    }
    if settings.shadows {
        tracing::info!(namespace = %settings.shadow_namespace, "AWS IoT Device Shadows are served under $aws/things/");
    }
    TwinTopics::start(twins.clone(), broker, mqtt)?;
    Ok(())
}

/// How one HTTP listener tells who a request to the twin API is from:
/// the credentials `HttpAuth` checks, as Ditto subjects.
pub struct TwinAuth {
    http: Arc<HttpAuth>,
    /// The console's login sessions.
    admin: Arc<Admin>,
    anonymous: Option<String>,
    basic_prefix: String,
    jwt_prefix: String,
    pre_authenticated: bool,
}

impl TwinAuth {
    pub fn new(config: &Config, http: Arc<HttpAuth>, admin: Arc<Admin>) -> TwinAuth {
        let settings = &config.twins;
        TwinAuth {
            http,
            admin,
            anonymous: (!settings.anonymous_subject.is_empty())
                .then(|| settings.anonymous_subject.clone()),
            basic_prefix: settings.basic_subject_prefix.clone(),
            jwt_prefix: settings.jwt_subject_prefix.clone(),
            pre_authenticated: settings.pre_authenticated,
        }
    }

    /// The caller's subjects, or why there are none.
    async fn caller(&self, headers: &HeaderMap, peer: SocketAddr) -> Result<Caller, &'static str> {
        if self.pre_authenticated {
            if let Some(value) = headers.get("x-ditto-pre-authenticated") {
                let subjects: Vec<String> = value
                    .to_str()
                    .map_err(|_| "x-ditto-pre-authenticated is not text")?
                    .split(',')
                    .map(|subject| subject.trim().to_owned())
                    .filter(|subject| !subject.is_empty())
                    .collect();
                if subjects.is_empty() {
                    return Err("x-ditto-pre-authenticated names no subject");
                }
                return Ok(Caller::new(subjects));
            }
        }
        if let Some(user) = self.admin.session_user(headers) {
            return Ok(Caller::new(vec![format!("{}:{user}", self.basic_prefix)]));
        }
        let subject = match self.http.user(headers, peer).await? {
            HttpUser::Basic(user) => format!("{}:{user}", self.basic_prefix),
            HttpUser::Bearer { user, .. } => format!("{}:{user}", self.jwt_prefix),
            HttpUser::LoopbackDefault => self.anonymous.clone().ok_or("no credentials")?,
        };
        Ok(Caller::new(vec![subject]))
    }
}

/// The address a request came from, on plain and TLS listeners alike:
/// what `into_make_service_with_connect_info::<Peer>` gives each request.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

impl
    axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, tokio::net::TcpListener>>
    for Peer
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, tokio::net::TcpListener>) -> Peer {
        Peer(*stream.remote_addr())
    }
}

impl
    axum::extract::connect_info::Connected<
        axum::serve::IncomingStream<'_, crate::tls_listener::TlsListener>,
    > for Peer
{
    fn connect_info(
        stream: axum::serve::IncomingStream<'_, crate::tls_listener::TlsListener>,
    ) -> Peer {
        Peer(*stream.remote_addr())
    }
}

/// The layer in front of `/api/2`: puts the caller into the request, or
/// answers Ditto's 401.
pub async fn authenticate(
    State(auth): State<Arc<TwinAuth>>,
    ConnectInfo(Peer(peer)): ConnectInfo<Peer>,
    mut request: Request,
    next: Next,
) -> Response {
    match auth.caller(request.headers(), peer).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(reason) => {
            tracing::debug!(%peer, reason, "twin API request not authenticated");
            let mut response = ferry_twins::http::error_response(ferry_twins::DittoError::new(
                401,
                "gateway:authentication.failed",
                format!("The request could not be authenticated: {reason}."),
                "Check if your credentials were correct.".to_string(),
            ));
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Basic realm=\"ferry\""),
            );
            response
        }
    }
}
