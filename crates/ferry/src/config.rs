//! The configuration file: one TOML document, every key optional, every
//! default safe (listeners on localhost only, like Mosquitto 2).
//! docs/configuration.md lists each key; keep the two in step.

use ferry_broker::{BrokerConfig, DurabilityConfig};
use ferry_routes::config::{EndpointConfig, RoutesConfig};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub data_dir: PathBuf,
    /// Connections the kernel holds for every listener (MQTT, TLS,
    /// WebSocket, HTTP) until Ferry accepts them: listen(2)'s backlog.
    /// Unset, the system's maximum (`net.core.somaxconn`), so a fleet that
    /// reconnects at once is queued rather than dropped (`serve::listen`).
    #[serde(deserialize_with = "positive")]
    pub listen_backlog: Option<u32>,
    /// Threads that serve connections, each a single-threaded runtime with
    /// its connections pinned to it (`ferry_broker::Cores`). Unset, one per
    /// CPU the process may run on.
    #[serde(deserialize_with = "positive")]
    pub cores: Option<u32>,
    /// How long a core woken often naps before it waits for events, in
    /// µs, so that one wake-up handles what came meanwhile
    /// (`ferry_broker::coalesce`). 0, the default, never naps.
    #[serde(deserialize_with = "coalesce_us")]
    pub coalesce_us: u64,
    pub log: LogConfig,
    pub listeners: ListenersConfig,
    /// Listeners beyond the three plain ones, each with its own settings.
    pub listener: Vec<ListenerConfig>,
    pub broker: BrokerConfig,
    pub durability: DurabilityConfig,
    pub auth: AuthConfig,
    /// `[routes]` settings and `[routes.NAME]` tables (docs/routes.md).
    pub routes: RoutesConfig,
    /// `[endpoints.NAME]` tables: where routes send messages.
    pub endpoints: BTreeMap<String, EndpointConfig>,
    /// `[twins]`: the digital twins and their HTTP API (docs/twins.md).
    pub twins: TwinsSettings,
    /// `[admin]`: who may use the admin API (docs/operations.md).
    pub admin: AdminSettings,
}

/// `[admin]`: the users of the admin API and the console, by name and by
/// group. Nobody by default: beyond loopback, the API then refuses every
/// request.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminSettings {
    /// User names (from the password file, or a JWT's user) that are
    /// administrators.
    pub users: Vec<String>,
    /// Groups (the ACL file's `[groups]`, or a JWT's groups claim) whose
    /// members are administrators.
    pub groups: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from("./ferry-data"),
            listen_backlog: None,
            cores: None,
            coalesce_us: 0,
            log: LogConfig::default(),
            listeners: ListenersConfig::default(),
            listener: Vec::new(),
            broker: BrokerConfig::default(),
            durability: DurabilityConfig::default(),
            auth: AuthConfig::default(),
            routes: RoutesConfig::default(),
            endpoints: BTreeMap::new(),
            twins: TwinsSettings::default(),
            admin: AdminSettings::default(),
        }
    }
}

/// `[twins]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TwinsSettings {
    pub enabled: bool,
    /// `"sqlite"` (a file in the data directory) or a PostgreSQL URL.
    pub store: TwinsStore,
    /// The subject of a request without credentials on a loopback listener
    /// when no password file or JWT keys are set up; `""` for none.
    pub anonymous_subject: String,
    /// `<prefix>:<user>` for HTTP Basic users.
    pub basic_subject_prefix: String,
    /// `<prefix>:<user>` for the user a bearer JWT names.
    pub jwt_subject_prefix: String,
    /// Whether to take a proxy's `x-ditto-pre-authenticated` header.
    pub pre_authenticated: bool,
    /// Policies kept in memory, compiled.
    pub cached_policies: usize,
    /// The topic level under which MQTT clients speak the Ditto protocol
    /// (`ditto/…`); `""` turns the Ditto protocol over MQTT off.
    pub mqtt_prefix: String,
    /// `<prefix>:<user>` for an MQTT client's verified user name.
    pub mqtt_subject_prefix: String,
    /// Which identity of an MQTT client names the only thing it may send
    /// commands for: `none`, `client_id`, `username` or `certificate`.
    pub mqtt_own_thing: OwnThingSetting,
    /// How long the event journal keeps twin events for streams that
    /// resume (`Last-Event-ID`); `"0s"` keeps none.
    pub event_retention: ferry_routes::Span,
    /// What a policy subject's `expiry` is rounded up to when written
    /// (Ditto's `policies.subject-expiry-granularity`); `"0s"` keeps it.
    pub subject_expiry_granularity: ferry_routes::Span,
    /// Whether to serve AWS IoT Device Shadow topics (`$aws/things/…`).
    pub shadows: bool,
    /// The namespace of the thing a shadow's thing name stands for.
    pub shadow_namespace: String,
    /// The feature that is a thing's classic (unnamed) shadow.
    pub shadow_feature: String,
    /// Whether a device's first write to an unknown thing creates it.
    pub implicit_creation: bool,
    /// The JSON thing body an implicitly created thing starts from; `""`
    /// for an empty thing.
    pub implicit_template_file: PathBuf,
    /// The subjects that may manage connections (`/api/2/connections`),
    /// Ditto's devops role.
    pub connection_subjects: Vec<String>,
}

/// `[twins] mqtt_own_thing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OwnThingSetting {
    None,
    ClientId,
    Username,
    Certificate,
}

impl Default for TwinsSettings {
    fn default() -> Self {
        TwinsSettings {
            enabled: true,
            store: TwinsStore::Sqlite,
            anonymous_subject: "nginx:ditto".into(),
            basic_subject_prefix: "nginx".into(),
            jwt_subject_prefix: "jwt".into(),
            pre_authenticated: false,
            cached_policies: 100_000,
            mqtt_prefix: "ditto".into(),
            mqtt_subject_prefix: "nginx".into(),
            mqtt_own_thing: OwnThingSetting::None,
            event_retention: ferry_routes::Span(std::time::Duration::from_secs(24 * 3600)),
            subject_expiry_granularity: ferry_routes::Span(std::time::Duration::from_secs(3600)),
            shadows: false,
            shadow_namespace: "devices".into(),
            shadow_feature: "shadow".into(),
            implicit_creation: false,
            implicit_template_file: PathBuf::new(),
            connection_subjects: vec!["nginx:ditto".into()],
        }
    }
}

/// The largest thing template read: a thing's own size limit (Ditto's
/// 100 kB), since a larger template could never make a thing.
const TEMPLATE_MAX_BYTES: u64 = 100 * 1024;

impl TwinsSettings {
    /// The template of implicitly created things, when they are on:
    /// `implicit_template_file` read and checked, or an empty thing.
    /// The error says what is wrong with the file.
    pub fn implicit_template(&self) -> Result<Option<ferry_twins::shadow::Template>, String> {
        use std::io::Read;
        if !self.implicit_creation {
            return Ok(None);
        }
        let path = &self.implicit_template_file;
        let value = if path.as_os_str().is_empty() {
            serde_json::Value::Object(Default::default())
        } else {
            let file = std::fs::File::open(path)
                .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
            let mut text = Vec::new();
            file.take(TEMPLATE_MAX_BYTES + 1)
                .read_to_end(&mut text)
                .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
            if text.len() as u64 > TEMPLATE_MAX_BYTES {
                return Err(format!("{} is over {TEMPLATE_MAX_BYTES} bytes", path.display()));
            }
            serde_json::from_slice(&text)
                .map_err(|error| format!("{} is not JSON: {error}", path.display()))?
        };
        ferry_twins::shadow::Template::parse(value)
            .map(Some)
            .map_err(|error| format!("{} is no thing template: {}", path.display(), error.message))
    }
}

/// Where the twins are kept.
#[derive(Clone, PartialEq, Eq)]
pub enum TwinsStore {
    Sqlite,
    /// A `postgres://` URL or a libpq `key=value` string.
    #[cfg(feature = "postgres")]
    Postgres(String),
}

/// Without the URL, which may hold a password.
impl std::fmt::Debug for TwinsStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TwinsStore::Sqlite => f.write_str("Sqlite"),
            #[cfg(feature = "postgres")]
            TwinsStore::Postgres(_) => f.write_str("Postgres(…)"),
        }
    }
}

impl<'de> Deserialize<'de> for TwinsStore {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text == "sqlite" {
            Ok(TwinsStore::Sqlite)
        } else if text.starts_with("postgres://")
            || text.starts_with("postgresql://")
            || text.contains("host=")
        {
            #[cfg(feature = "postgres")]
            return Ok(TwinsStore::Postgres(text));
            // A PostgreSQL store this build left out: say which build has
            // it, so the error is not read as a malformed URL.
            #[cfg(not(feature = "postgres"))]
            return Err(serde::de::Error::custom(
                "a PostgreSQL store is not in this build of Ferry: it needs the `postgres` cargo feature (on by default; left out of the edge build, `--no-default-features`); \"sqlite\" is",
            ));
        } else {
            Err(serde::de::Error::custom(
                "expected \"sqlite\" or a PostgreSQL URL (postgres://user@host/db, or host=… dbname=…)",
            ))
        }
    }
}

/// Who may connect and what they may do. The methods' files are shared by
/// every listener; a `[[listener]]` may narrow the methods and set its own
/// `allow_anonymous`. See docs/security.md. Relative paths are from the
/// directory Ferry runs in.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Whether clients that prove no identity may connect, on listeners
    /// that do not say. Unset, they may on listeners bound to a loopback
    /// address only, as with Mosquitto 2: exposing a broker without
    /// authentication takes an explicit `true`.
    pub allow_anonymous: Option<bool>,
    /// A password file made with `ferry passwd`: a client that gives a user
    /// name must give that user's password.
    pub password_file: Option<PathBuf>,
    /// Rules of who may publish and subscribe where; without one, every
    /// client may do everything.
    pub acl_file: Option<PathBuf>,
    /// JWTs accepted as passwords.
    pub jwt: Option<ferry_auth::JwtConfig>,
}

/// One `[[listener]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerConfig {
    /// For logs; by default the protocol and address.
    pub name: Option<String>,
    pub protocol: ListenerProtocol,
    /// An address like `0.0.0.0:8883`.
    pub bind: String,
    pub tls: Option<ferry_broker::TlsSettings>,
    /// Overrides `[auth] allow_anonymous` on this listener.
    pub allow_anonymous: Option<bool>,
    /// The methods this listener accepts; by default all that are set up.
    pub auth_methods: Option<Vec<AuthMethod>>,
    /// Connections open at once on this listener; 0 for no limit beyond
    /// `[broker] max_connections`.
    #[serde(default)]
    pub max_connections: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListenerProtocol {
    Mqtt,
    Ws,
    Http,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    Password,
    Jwt,
    Certificate,
}

impl ListenerConfig {
    /// A listener of the `[listeners]` shorthand: no TLS, `[auth]` as is.
    fn plain(protocol: ListenerProtocol, bind: String) -> ListenerConfig {
        ListenerConfig {
            name: None,
            protocol,
            bind,
            tls: None,
            allow_anonymous: None,
            auth_methods: None,
            max_connections: 0,
        }
    }

    /// The URL scheme of what this listener serves: `mqtts`, `wss`, ...
    pub fn scheme(&self) -> &'static str {
        match (self.protocol, self.tls.is_some()) {
            (ListenerProtocol::Mqtt, false) => "mqtt",
            (ListenerProtocol::Mqtt, true) => "mqtts",
            (ListenerProtocol::Ws, false) => "ws",
            (ListenerProtocol::Ws, true) => "wss",
            (ListenerProtocol::Http, false) => "http",
            (ListenerProtocol::Http, true) => "https",
        }
    }

    pub fn name(&self) -> String {
        self.name.clone().unwrap_or_else(|| format!("{}://{}", self.scheme(), self.bind))
    }

    /// How this listener lets clients in, given the shared `[auth]`.
    pub fn auth(&self, auth: &AuthConfig) -> ferry_auth::ListenerAuth {
        let offers =
            |method| self.auth_methods.as_ref().is_none_or(|methods| methods.contains(&method));
        ferry_auth::ListenerAuth {
            allow_anonymous: self.allow_anonymous.or(auth.allow_anonymous).unwrap_or_else(|| {
                self.bind.parse::<std::net::SocketAddr>().is_ok_and(|bind| bind.ip().is_loopback())
            }),
            password: offers(AuthMethod::Password) && auth.password_file.is_some(),
            jwt: offers(AuthMethod::Jwt) && auth.jwt.is_some(),
            certificate: offers(AuthMethod::Certificate)
                && self.tls.as_ref().is_some_and(|tls| tls.client_ca_file.is_some()),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// A `tracing` filter: a level (`info`) or directives (`info,ferry_broker=debug`).
    pub level: String,
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig { level: "info".into(), format: LogFormat::Text }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Text,
    Json,
}

/// Listener addresses; an empty string disables a listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ListenersConfig {
    pub mqtt: String,
    pub ws: String,
    pub http: String,
}

impl Default for ListenersConfig {
    fn default() -> Self {
        ListenersConfig {
            mqtt: "127.0.0.1:1883".into(),
            ws: "127.0.0.1:8083".into(),
            http: "127.0.0.1:8080".into(),
        }
    }
}

/// A configuration file that cannot be used, located as precisely as the
/// problem allows: file, line and key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("{path}: cannot read: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}: key `{key}`: {message}")]
    Invalid { path: PathBuf, line: usize, key: String, message: String },
    /// Not TOML at all: there is no key to name yet.
    #[error("{path}:{line}: {message}")]
    Syntax { path: PathBuf, line: usize, message: String },
    #[error("{path}: key `{key}`: {message}")]
    Semantic { path: PathBuf, key: String, message: String },
}

impl Config {
    /// Every listener to open: the `[listeners]` shorthand's, then the
    /// `[[listener]]` tables.
    pub fn all_listeners(&self) -> Vec<ListenerConfig> {
        let shorthand = [
            (ListenerProtocol::Mqtt, &self.listeners.mqtt),
            (ListenerProtocol::Ws, &self.listeners.ws),
            (ListenerProtocol::Http, &self.listeners.http),
        ];
        shorthand
            .into_iter()
            .filter(|(_, bind)| !bind.is_empty())
            .map(|(protocol, bind)| ListenerConfig::plain(protocol, bind.clone()))
            .chain(self.listener.iter().cloned())
            .collect()
    }

    pub fn load(path: &Path) -> Result<Config, ConfigFileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigFileError::Read { path: path.to_owned(), source })?;
        Config::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigFileError> {
        let deserializer = toml::Deserializer::new(text);
        let config: Config = serde_path_to_error::deserialize(deserializer).map_err(|error| {
            let key = error.path().to_string();
            let inner = error.into_inner();
            let line = inner.span().map_or(0, |span| line_of(text, span.start));
            let message = inner.message().trim_end().to_string();
            if key == "." {
                return ConfigFileError::Syntax { path: path.to_owned(), line, message };
            }
            ConfigFileError::Invalid { path: path.to_owned(), line, key, message }
        })?;
        config.validate(path)?;
        Ok(config)
    }

    /// Checks what the types cannot: ranges, addresses, and that every
    /// listener lets someone in. `path` names the source in errors.
    pub fn validate(&self, path: &Path) -> Result<(), ConfigFileError> {
        self.broker.validate().and_then(|()| self.durability.validate()).map_err(|error| {
            ConfigFileError::Semantic {
                path: path.to_owned(),
                key: format!("{}.{}", error.section, error.key),
                message: error.message,
            }
        })?;
        let semantic = |key: String, message: String| ConfigFileError::Semantic {
            path: path.to_owned(),
            key,
            message,
        };
        ferry_routes::config::check(&self.routes, &self.endpoints)
            .map_err(|(key, message)| semantic(key, message))?;
        let routing = !self.routes.routes.is_empty() || !self.endpoints.is_empty();
        if routing && !self.durability.enabled {
            return Err(semantic(
                "durability.enabled".into(),
                "routes and endpoints need durability: routed messages wait in the durable log"
                    .into(),
            ));
        }
        let prefix = &self.twins.mqtt_prefix;
        if !prefix.is_empty()
            && (!ferry_mqtt::topic::is_valid_topic_name(prefix) || prefix.ends_with('/'))
        {
            return Err(semantic(
                "twins.mqtt_prefix".into(),
                format!("{prefix:?} is not a topic prefix like \"ditto\" (whole topic levels, no wildcards)"),
            ));
        }
        self.validate_shadows().map_err(|(key, message)| semantic(key.into(), message))?;
        for (key, value) in [
            ("listeners.mqtt", &self.listeners.mqtt),
            ("listeners.ws", &self.listeners.ws),
            ("listeners.http", &self.listeners.http),
        ] {
            if !value.is_empty() && value.parse::<std::net::SocketAddr>().is_err() {
                return Err(semantic(
                    key.into(),
                    format!("{value:?} is not an address like 127.0.0.1:1883"),
                ));
            }
        }
        for (index, listener) in self.listener.iter().enumerate() {
            if listener.bind.parse::<std::net::SocketAddr>().is_err() {
                return Err(semantic(
                    format!("listener[{index}].bind"),
                    format!("{:?} is not an address like 0.0.0.0:8883", listener.bind),
                ));
            }
        }
        for listener in self.all_listeners() {
            if listener.protocol == ListenerProtocol::Http
                || listener.auth(&self.auth).accepts_anyone()
            {
                continue;
            }
            let table = self
                .listener
                .iter()
                .position(|l| l.bind == listener.bind && l.name == listener.name);
            let key = match table {
                Some(index) if self.listener[index].allow_anonymous.is_some() => {
                    format!("listener[{index}].allow_anonymous")
                }
                _ => "auth.allow_anonymous".into(),
            };
            // Every key that would let someone in: a method the listener
            // accepts, or anonymous clients.
            let offers = |method| {
                listener.auth_methods.as_ref().is_none_or(|methods| methods.contains(&method))
            };
            let mut fixes = Vec::new();
            if offers(AuthMethod::Password) {
                fixes.push("`auth.password_file`".to_string());
            }
            if offers(AuthMethod::Jwt) {
                fixes.push("`auth.jwt`".to_string());
            }
            let origin = match table {
                Some(index) => {
                    if offers(AuthMethod::Certificate) {
                        fixes.push(format!("`listener[{index}].tls.client_ca_file`"));
                    }
                    format!("listener[{index}]")
                }
                None if listener.protocol == ListenerProtocol::Mqtt => {
                    "listeners.mqtt or --mqtt".to_string()
                }
                None => "listeners.ws or --ws".to_string(),
            };
            let anonymous = format!("`{key} = true`");
            let fixes = if fixes.is_empty() {
                anonymous
            } else {
                format!("{} or {anonymous}", fixes.join(", "))
            };
            return Err(semantic(
                key,
                format!(
                    "listener {} ({origin}) accepts no credentials and no anonymous clients: \
                     nobody could connect. Set {fixes} (anonymous clients are allowed by \
                     default only on loopback addresses)",
                    listener.name()
                ),
            ));
        }
        Ok(())
    }
}

impl Config {
    /// `[twins]`' shadow and implicit creation keys: the key to blame and
    /// why.
    fn validate_shadows(&self) -> Result<(), (&'static str, String)> {
        let twins = &self.twins;
        if ferry_twins::ThingId::from_parts(&twins.shadow_namespace, "thing").is_err() {
            return Err((
                "twins.shadow_namespace",
                format!("{:?} is not a thing namespace like \"org.acme\"", twins.shadow_namespace),
            ));
        }
        if let Err(error) = ferry_twins::id::validate_key(&twins.shadow_feature) {
            return Err(("twins.shadow_feature", error.message));
        }
        let own_thing = twins.mqtt_own_thing != OwnThingSetting::None;
        if twins.implicit_creation && !twins.shadows && !own_thing {
            return Err((
                "twins.implicit_creation",
                "creates things for shadow updates and for devices held to their own thing: \
                 set twins.shadows = true or twins.mqtt_own_thing"
                    .into(),
            ));
        }
        twins.implicit_template().map(drop).map_err(|error| ("twins.implicit_template_file", error))
    }
}

/// A count that must be at least 1. Checked while deserializing, so the
/// error carries the value's line as well as its key.
fn positive<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    match u32::deserialize(deserializer)? {
        0 => Err(serde::de::Error::custom("must be at least 1")),
        value => Ok(Some(value)),
    }
}

/// A nap of at most `coalesce::MAX_COALESCE`, in µs. Checked while
/// deserializing, as `positive` is.
fn coalesce_us<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let most = ferry_broker::coalesce::MAX_COALESCE.as_micros();
    match u64::deserialize(deserializer)? {
        value if u128::from(value) > most => {
            Err(serde::de::Error::custom(format!("must be at most {most} (µs)")))
        }
        value => Ok(value),
    }
}

/// 1-based line number of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|&&byte| byte == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigFileError> {
        Config::parse(text, Path::new("ferry.toml"))
    }

    #[test]
    fn empty_file_gives_safe_defaults() {
        let config = parse("").unwrap();
        assert_eq!(config.listeners.mqtt, "127.0.0.1:1883");
        assert_eq!(config.broker.max_queued_messages, 100_000);
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let error =
            parse("data_dir = \"x\"\n[broker]\nmax_keep_alive_secs = 60\nbogus = 1\n").unwrap_err();
        let text = error.to_string();
        assert!(text.starts_with("ferry.toml:4: key `broker"), "{text}");
        assert!(text.contains("bogus"), "{text}");
    }

    #[test]
    fn admin_users_and_groups() {
        let config = parse("[admin]\nusers = [\"alice\"]\ngroups = [\"ops\"]\n").unwrap();
        assert_eq!(config.admin.users, ["alice"]);
        assert_eq!(config.admin.groups, ["ops"]);
        assert!(parse("").unwrap().admin.users.is_empty(), "nobody is an administrator by default");
        let error = parse("[admin]\n\nusers = \"alice\"\n").unwrap_err().to_string();
        assert!(error.starts_with("ferry.toml:3: key `admin.users`"), "{error}");
    }

    #[test]
    fn broken_toml_names_the_line() {
        let error = parse("[broker]\nreceive_maximum = \"unterminated\n").unwrap_err();
        let text = error.to_string();
        assert!(text.starts_with("ferry.toml:2: "), "{text}");
        assert!(!text.contains("key `.`"), "{text}");
    }

    #[test]
    fn wrong_type_names_the_key() {
        let error = parse("[broker]\n\nreceive_maximum = \"many\"\n").unwrap_err();
        let text = error.to_string();
        assert!(text.starts_with("ferry.toml:3: key `broker.receive_maximum`"), "{text}");
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let error = parse("[broker]\nreceive_maximum = 0\n").unwrap_err();
        assert_eq!(
            error.to_string(),
            "ferry.toml: key `broker.receive_maximum`: must be at least 1"
        );
        let error = parse("[listeners]\nmqtt = \"nowhere\"\n").unwrap_err();
        assert!(error.to_string().contains("listeners.mqtt"), "{error}");
        let error = parse("[auth]\nallow_anonymous = false\n").unwrap_err();
        assert!(error.to_string().contains("auth.allow_anonymous"), "{error}");
    }

    #[test]
    fn anonymous_clients_beyond_loopback_take_an_explicit_yes() {
        let exposed = "[listeners]\nmqtt = \"0.0.0.0:1883\"\n";
        let error = parse(exposed).unwrap_err().to_string();
        assert!(
            error.contains("listener mqtt://0.0.0.0:1883 (listeners.mqtt or --mqtt)"),
            "{error}"
        );
        assert!(
            error.contains("Set `auth.password_file`, `auth.jwt` or `auth.allow_anonymous = true`"),
            "{error}"
        );
        assert!(parse(&format!("{exposed}[auth]\nallow_anonymous = true\n")).is_ok());
        let listener = "[[listener]]\nprotocol = \"mqtt\"\nbind = \"0.0.0.0:8883\"\n";
        let error = parse(listener).unwrap_err();
        assert!(error.to_string().contains("auth.allow_anonymous"), "{error}");
        let open = parse(&format!("{listener}allow_anonymous = true\n")).unwrap();
        let all = open.all_listeners();
        assert_eq!(all.len(), 4);
        assert!(all.iter().all(|listener| listener.auth(&open.auth).allow_anonymous));
        let error = parse(&format!("{listener}allow_anonymous = false\n")).unwrap_err();
        assert!(error.to_string().contains("listener[0].allow_anonymous"), "{error}");
        // A table's own methods: a client CA would do, a password would not.
        let error = parse(&format!("{listener}auth_methods = [\"certificate\"]\n"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(
                "(listener[0]) accepts no credentials and no anonymous clients: nobody could \
                 connect. Set `listener[0].tls.client_ca_file` or `auth.allow_anonymous = true`"
            ),
            "{error}"
        );
    }

    #[test]
    fn listen_backlog_is_a_positive_count() {
        assert_eq!(parse("").unwrap().listen_backlog, None);
        assert_eq!(parse("listen_backlog = 8192\n").unwrap().listen_backlog, Some(8192));
        for bad in ["listen_backlog = 0\n", "listen_backlog = -1\n", "listen_backlog = \"max\"\n"] {
            let error = parse(&format!("data_dir = \"x\"\n{bad}")).unwrap_err().to_string();
            assert!(error.starts_with("ferry.toml:2: key `listen_backlog`: "), "{error}");
        }
        let error = parse("listen_backlog = 0\n").unwrap_err().to_string();
        assert_eq!(error, "ferry.toml:1: key `listen_backlog`: must be at least 1");
    }

    #[test]
    fn cores_is_a_positive_count() {
        assert_eq!(parse("").unwrap().cores, None);
        assert_eq!(parse("cores = 1\n").unwrap().cores, Some(1));
        let error = parse("data_dir = \"x\"\ncores = 0\n").unwrap_err().to_string();
        assert_eq!(error, "ferry.toml:2: key `cores`: must be at least 1");
    }

    #[test]
    fn coalesce_us_is_at_most_a_millisecond() {
        assert_eq!(parse("").unwrap().coalesce_us, 0);
        assert_eq!(parse("coalesce_us = 1000\n").unwrap().coalesce_us, 1000);
        let error = parse("data_dir = \"x\"\ncoalesce_us = 1001\n").unwrap_err().to_string();
        assert_eq!(error, "ferry.toml:2: key `coalesce_us`: must be at most 1000 (µs)");
        let error = parse("coalesce_us = -1\n").unwrap_err().to_string();
        assert!(error.starts_with("ferry.toml:1: key `coalesce_us`: "), "{error}");
    }

    #[test]
    fn listener_tables_are_checked() {
        let error = parse("[[listener]]\nprotocol = \"mqtt\"\nbind = \"x\"\n").unwrap_err();
        assert!(error.to_string().contains("listener[0].bind"), "{error}");
        let error =
            parse("[[listener]]\nprotocol = \"mqtt\"\nbind = \"127.0.0.1:1\"\ntls = { cert_file = \"c\" }\n")
                .unwrap_err();
        assert!(error.to_string().starts_with("ferry.toml:4: key `listener[0].tls`"), "{error}");
    }

    #[test]
    fn shadow_keys_are_checked_naming_the_key() {
        let refused = |text: &str, key: &str| {
            let error = parse(text).unwrap_err().to_string();
            assert!(error.contains(key), "{text}: {error}");
        };
        refused("[twins]\nshadow_namespace = \"not a namespace\"\n", "twins.shadow_namespace");
        refused("[twins]\nshadow_feature = \"a/b\"\n", "twins.shadow_feature");
        refused("[twins]\nimplicit_creation = true\n", "twins.implicit_creation");
        refused(
            "[twins]\nshadows = true\nimplicit_creation = true\nimplicit_template_file = \"/nonexistent/t.json\"\n",
            "twins.implicit_template_file",
        );
        let dir = tempfile::tempdir().unwrap();
        let template = dir.path().join("t.json");
        std::fs::write(&template, r#"{"thingId": "a:b"}"#).unwrap();
        let with_template = format!(
            "[twins]\nshadows = true\nimplicit_creation = true\nimplicit_template_file = {:?}\n",
            template.display().to_string()
        );
        refused(&with_template, "twins.implicit_template_file");
        std::fs::write(&template, r#"{"attributes": {"model": "x"}}"#).unwrap();
        let config = parse(&with_template).unwrap();
        assert!(config.twins.implicit_template().unwrap().is_some());
        assert!(parse("[twins]\nshadows = true\n")
            .unwrap()
            .twins
            .implicit_template()
            .unwrap()
            .is_none());
    }
}
