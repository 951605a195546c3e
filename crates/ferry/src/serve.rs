//! `ferry serve`: bind the listeners, run until SIGINT/SIGTERM, then shut
//! down gracefully.

use crate::config::{Config, ListenerProtocol};
use crate::security::Security;
use crate::tls_listener::TlsListener;
use anyhow::Context;
use ferry_broker::{
    keep_alive, listener, memory_watermark, sys, Broker, Cores, Listener, Protocol, Tls,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

/// How long shutdown waits for clients to receive their DISCONNECT.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

pub fn run(config: Config) -> anyhow::Result<()> {
    // This thread's runtime accepts connections and runs the HTTP listener,
    // signals and periodic chores; the connections themselves run on one
    // runtime per core (`ferry_broker::Cores`).
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(serve(config))
}

async fn serve(config: Config) -> anyhow::Result<()> {
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
    let cores = Arc::new(Cores::per_cpu().context("cannot start the per-core runtimes")?);
    let mut tasks = Vec::new();
    let mut bound = Vec::new();
    for settings in config.all_listeners() {
        let name = settings.name();
        let tls = match &settings.tls {
            Some(tls) => Some(Arc::new(
                Tls::load(tls.clone())
                    .with_context(|| format!("listener {name}: cannot set up TLS"))?,
            )),
            None => None,
        };
        let tcp = TcpListener::bind(&settings.bind)
            .await
            .with_context(|| format!("listener {name}: cannot listen on {}", settings.bind))?;
        bound.push((settings, name, tcp, tls));
    }
    // Before the first accept: until then every client would be let in.
    let tls_listeners =
        bound.iter().filter_map(|(_, name, _, tls)| Some((name.clone(), tls.clone()?))).collect();
    let security = Arc::new(Security::start(config.auth.clone(), tls_listeners, broker.clone())?);
    let mut http = Vec::new();
    for (settings, name, tcp, tls) in bound {
        let address = tcp.local_addr()?;
        let protocol = match settings.protocol {
            ListenerProtocol::Http => {
                http.push((tcp, tls));
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
        tasks.push(tokio::spawn(listener::serve(tcp, listener, broker.clone(), cores.clone())));
    }
    for (tcp, tls) in http {
        let address = tcp.local_addr()?;
        let app = crate::http::router(security.clone());
        let mut shutdown = broker.shutdown_signal();
        let stopped = async move {
            let _ = shutdown.changed().await;
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
    tasks.push(tokio::spawn(keep_alive::run(broker.clone())));
    tasks.push(tokio::spawn(memory_watermark::run(broker.clone())));
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "ferry started");

    loop {
        tokio::select! {
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
            _ = hangup.recv() => {
                tracing::info!("SIGHUP: reloading users, ACL and certificates");
                if let Err(error) = security.reload() {
                    tracing::error!("reload failed, the previous settings stay: {error:#}");
                }
            }
        }
    }
    tracing::info!("shutting down");
    broker.begin_shutdown();
    for task in tasks {
        let _ = task.await;
    }
    broker.wait_for_connections(SHUTDOWN_GRACE).await;
    // The listeners are gone, so this is the last reference; what still
    // runs on the cores after the grace period is cancelled.
    if let Some(cores) = Arc::into_inner(cores) {
        cores.stop();
    }
    broker.close_store();
    tracing::info!("stopped");
    Ok(())
}
