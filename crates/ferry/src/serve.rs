//! `ferry serve`: bind the listeners, run until SIGINT/SIGTERM, then shut
//! down gracefully.

use crate::admin::{Admin, Listening};
use crate::config::{Config, ListenerProtocol};
use crate::http_auth::HttpAuth;
use crate::ready::Accepting;
use crate::reload::Reloader;
use crate::security::Security;
use crate::tls_listener::TlsListener;
use crate::twins::TwinAuth;
use anyhow::Context;
use ferry_broker::{
    accept, keep_alive, memory_watermark, sys, Broker, Cores, Listener, Protocol, Tls,
};
use ferry_routes::RoutesService;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket};
use tokio::signal::unix::{signal, SignalKind};

/// How long shutdown waits for clients to receive their DISCONNECT.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The listen backlog when the system's maximum cannot be read: Linux's
/// SOMAXCONN since 5.4.
const LISTEN_BACKLOG_FALLBACK: u32 = 4096;

pub fn run(config: Config, config_file: Option<PathBuf>) -> anyhow::Result<()> {
    // This thread's runtime accepts connections and runs the HTTP listener,
    // signals and periodic chores; the connections themselves run on one
    // runtime per core (`ferry_broker::Cores`).
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(serve(config, config_file))
}

async fn serve(config: Config, config_file: Option<PathBuf>) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create data_dir {}", config.data_dir.display()))?;
    // Handlers first: a signal that arrives while listeners are still being
    // set up must stop Ferry gracefully, not kill it.
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let broker = Broker::open(config.broker.clone(), &config.durability, &config.data_dir)
        .with_context(|| {
            format!("cannot open the durable state in {}", config.data_dir.display())
        })?;
    let coalesce = Duration::from_micros(config.coalesce_us);
    let cores = match config.cores {
        Some(count) => Cores::start(count as usize, coalesce),
        None => Cores::per_cpu(coalesce),
    };
    let cores = Arc::new(cores.context("cannot start the per-core runtimes")?);
    cores.spawn_on_each(crate::give_free_pages_back);
    let mut tasks = Vec::new();
    let mut bound = Vec::new();
    let backlog = listen_backlog(config.listen_backlog);
    for settings in config.all_listeners() {
        let name = settings.name();
        let tls = match &settings.tls {
            Some(tls) => Some(Arc::new(
                Tls::load(tls.clone())
                    .with_context(|| format!("listener {name}: cannot set up TLS"))?,
            )),
            None => None,
        };
        let tcp = listen(&settings.bind, backlog)
            .with_context(|| format!("listener {name}: cannot listen on {}", settings.bind))?;
        bound.push((settings, name, tcp, tls));
    }
    // Before the first accept: until then every client would be let in.
    let tls_listeners =
        bound.iter().filter_map(|(_, name, _, tls)| Some((name.clone(), tls.clone()?))).collect();
    let security = Arc::new(Security::start(config.auth.clone(), tls_listeners, broker.clone())?);
    // Also before the first accept, so that no message misses its route.
    let routes = RoutesService::start(broker.clone(), &config.routes, &config.endpoints)
        .await
        .context("cannot start the routes")?;
    let reloader = Arc::new(Reloader::new(security, routes, &config, config_file));
    let twins = crate::twins::start(&config).await?;
    if let Some(twins) = &twins {
        let loopback_only = bound
            .iter()
            .all(|(_, _, tcp, _)| tcp.local_addr().is_ok_and(|address| address.ip().is_loopback()));
        crate::twins::serve_mqtt(&config, twins, &broker, loopback_only)?;
    }
    let own_mqtt_ports = bound
        .iter()
        .filter(|(settings, ..)| settings.protocol == ListenerProtocol::Mqtt)
        .filter_map(|(_, _, tcp, _)| Some(tcp.local_addr().ok()?.port()))
        .collect::<Vec<_>>();
    let connections = twins
        .as_ref()
        .map(|twins| crate::twins::connections(&config, twins, &broker, own_mqtt_ports))
        .transpose()?;
    let listening: Vec<Listening> = bound
        .iter()
        .filter_map(|(settings, _, tcp, _)| {
            Some(Listening { kind: settings.scheme(), address: tcp.local_addr().ok()?.to_string() })
        })
        .collect();
    let mut http = Vec::new();
    let mut listeners = Vec::new();
    for (settings, name, tcp, tls) in bound {
        let address = tcp.local_addr()?;
        let protocol = match settings.protocol {
            ListenerProtocol::Http => {
                let auth = settings.auth(&config.auth);
                http.push((tcp, tls, auth));
                continue;
            }
            ListenerProtocol::Mqtt => Protocol::Mqtt,
            ListenerProtocol::Ws => Protocol::WebSocket,
        };
        let scheme = settings.scheme();
        let path = if protocol == Protocol::WebSocket { ferry_broker::MQTT_PATH } else { "" };
        match &settings.name {
            Some(name) => {
                tracing::info!(listener = %name, "listening on {scheme}://{address}{path}")
            }
            None => tracing::info!("listening on {scheme}://{address}{path}"),
        }
        let auth = settings.auth(&config.auth);
        let listener = Arc::new(Listener::new(name, protocol, tls, auth, settings.max_connections));
        let accepting = Accepting::new(listener.clone());
        listeners.push(accepting.clone());
        let (broker, cores) = (broker.clone(), cores.clone());
        tasks.push(tokio::spawn(async move {
            accept::serve(tcp, listener, broker, cores).await;
            accepting.stopped();
        }));
    }
    let listeners: Arc<[Arc<Accepting>]> = listeners.into();
    for (tcp, tls, auth) in http {
        let address = tcp.local_addr()?;
        let http_auth = Arc::new(HttpAuth::new(&config, auth, address, broker.clone()));
        let admin = Arc::new(Admin::new(
            &config,
            http_auth.clone(),
            reloader.clone(),
            listening.clone(),
            tls.is_some(),
        ));
        let twins = twins.clone().zip(connections.clone()).map(|(twins, connections)| {
            (twins, Arc::new(TwinAuth::new(&config, http_auth, admin.clone())), connections)
        });
        let app =
            crate::http::router(reloader.clone(), broker.clone(), listeners.clone(), admin, twins)
                .into_make_service_with_connect_info::<crate::twins::Peer>();
        let mut shutdown = broker.shutdown_signal();
        let stopped = async move {
            let _ = shutdown.wait_for(|&stopping| stopping).await;
        };
        let served = match tls {
            None => {
                tracing::info!("listening on http://{address}");
                tokio::spawn(
                    async move { axum::serve(tcp, app).with_graceful_shutdown(stopped).await },
                )
            }
            Some(tls) => {
                tracing::info!("listening on https://{address}");
                let tcp = TlsListener::new(tcp, tls)?;
                tokio::spawn(
                    async move { axum::serve(tcp, app).with_graceful_shutdown(stopped).await },
                )
            }
        };
        tasks.push(tokio::spawn(async move {
            if let Ok(Err(error)) = served.await {
                tracing::error!(%error, "HTTP server failed");
            }
        }));
    }
    tasks.push(tokio::spawn(sys::run(broker.clone())));
    tasks.push(tokio::spawn(routes_tick(broker.clone(), reloader.clone())));
    tasks.push(tokio::spawn(keep_alive::run(broker.clone())));
    tasks.push(tokio::spawn(memory_watermark::run(broker.clone())));
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "ferry started");

    loop {
        tokio::select! {
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
            _ = hangup.recv() => {
                tracing::info!("SIGHUP: reloading users, ACL, certificates, routes and endpoints");
                if let Err(error) = reloader.reload().await {
                    tracing::error!("reload failed, the previous settings stay: {error:#}");
                }
            }
        }
    }
    tracing::info!("shutting down");
    broker.begin_shutdown();
    // Event streams never end by themselves and the HTTP listeners wait
    // for every response to end; WebSocket sessions are no longer the
    // HTTP server's to wait for, so they are closed here too.
    if let Some(connections) = &connections {
        connections.shut_down().await;
    }
    if let Some(twins) = &twins {
        twins.close();
        twins.live().close();
        if tokio::time::timeout(SHUTDOWN_GRACE, twins.live().sessions_ended()).await.is_err() {
            tracing::warn!("WebSocket sessions still open after {SHUTDOWN_GRACE:?}; ending them");
        }
    }
    for task in tasks {
        let _ = task.await;
    }
    broker.wait_for_connections(SHUTDOWN_GRACE).await;
    reloader.stop().await;
    // The listeners are gone, so this is the last reference; what still
    // runs on the cores after the grace period is cancelled.
    if let Some(cores) = Arc::into_inner(cores) {
        cores.stop();
    }
    broker.close_store();
    tracing::info!("stopped");
    Ok(())
}

/// The routes' `$SYS` figures and expiry sweep, at the broker's
/// `sys_interval_secs`.
async fn routes_tick(broker: Arc<Broker>, reloader: Arc<Reloader>) {
    let interval = broker.config.sys_interval_secs;
    if interval == 0 {
        return;
    }
    let mut shutdown = broker.shutdown_signal();
    let mut ticker = tokio::time::interval(Duration::from_secs(interval));
    loop {
        tokio::select! {
            _ = shutdown.wait_for(|&stopping| stopping) => return,
            _ = ticker.tick() => {}
        }
        reloader.tick().await;
    }
}

/// The backlog of every listener: the configured `listen_backlog`, else
/// the system's maximum, `net.core.somaxconn`, which the kernel caps any
/// backlog at anyway. Tokio's `TcpListener::bind` asks for 128 (mio, as
/// the standard library), Mosquitto for 100: when a fleet reconnects at
/// once (a broker restart, a network blip) the kernel drops the SYNs beyond
/// the backlog, and each of those clients waits a second or more for its
/// retry (docs/benchmarks.md, Reconnect storm).
fn listen_backlog(configured: Option<u32>) -> u32 {
    let system = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok());
    match (configured, system) {
        (Some(backlog), Some(system)) if backlog > system => {
            tracing::warn!(
                "listen_backlog {backlog} is above net.core.somaxconn {system}, \
                 which the kernel holds listeners to"
            );
            backlog
        }
        (Some(backlog), _) => backlog,
        (None, system) => system.unwrap_or(LISTEN_BACKLOG_FALLBACK),
    }
}

/// A listening socket on `bind` (an address `Config::validate` checked)
/// with a backlog of `backlog`, set up as `TcpListener::bind` would but for
/// the backlog.
fn listen(bind: &str, backlog: u32) -> std::io::Result<TcpListener> {
    let address: SocketAddr = bind
        .parse()
        .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidInput, error))?;
    let socket = if address.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    // As TcpListener::bind: a restarted broker binds its port at once,
    // whatever connections of the last run linger in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(backlog)
}
