//! `ferry serve`: bind the listeners, run until SIGINT/SIGTERM, then shut
//! down gracefully.

use crate::config::Config;
use anyhow::Context;
use ferry_broker::{keep_alive, listener, sys, Broker};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

/// How long shutdown waits for clients to receive their DISCONNECT.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

pub fn run(config: Config) -> anyhow::Result<()> {
    // One worker thread per core: every core serves connections.
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    // Tasks woken by one batch of socket events then run in the order the
    // events arrived. With the LIFO slot, the last woken runs first, so a
    // SUBSCRIBE sent just before another client's PUBLISH was routinely
    // applied after it (a third of the time in a tight loop; never with
    // Mosquitto). `.cargo/config.toml` sets the cfg that exposes this knob.
    #[cfg(tokio_unstable)]
    builder.disable_lifo_slot();
    let runtime = builder.build()?;
    runtime.block_on(serve(config))
}

async fn serve(config: Config) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create data_dir {}", config.data_dir.display()))?;
    // Handlers first: a signal that arrives while listeners are still being
    // set up must stop Ferry gracefully, not kill it.
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let broker = Broker::open(config.broker.clone(), &config.durability, &config.data_dir)
        .with_context(|| {
            format!("cannot open the durable state in {}", config.data_dir.display())
        })?;
    let passwords = match &config.auth.password_file {
        Some(path) => Some(ferry_auth::PasswordFile::load(path)?),
        None => None,
    };
    if let Some(passwords) = &passwords {
        tracing::info!(users = passwords.users().count(), "password file loaded");
    }
    broker
        .set_authenticator(ferry_auth::Authenticator::new(passwords, config.auth.allow_anonymous));
    let mut tasks = Vec::new();

    if let Some(listener) = bind(&config.listeners.mqtt, "mqtt").await? {
        tracing::info!("listening on mqtt://{}", listener.local_addr()?);
        tasks.push(tokio::spawn(listener::serve_tcp(listener, broker.clone())));
    }
    if let Some(listener) = bind(&config.listeners.ws, "ws").await? {
        tracing::info!("listening on ws://{}{}", listener.local_addr()?, ferry_broker::MQTT_PATH);
        tasks.push(tokio::spawn(listener::serve_ws(listener, broker.clone())));
    }
    if let Some(listener) = bind(&config.listeners.http, "http").await? {
        tracing::info!("listening on http://{}", listener.local_addr()?);
        let app = crate::http::router(broker.clone());
        let mut shutdown = broker.shutdown_signal();
        tasks.push(tokio::spawn(async move {
            let stopped = async move {
                let _ = shutdown.changed().await;
            };
            if let Err(error) = axum::serve(listener, app).with_graceful_shutdown(stopped).await {
                tracing::error!(%error, "HTTP server failed");
            }
        }));
    }
    tasks.push(tokio::spawn(sys::run(broker.clone())));
    tasks.push(tokio::spawn(keep_alive::run(broker.clone())));
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "ferry started");

    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("shutting down");
    broker.begin_shutdown();
    for task in tasks {
        let _ = task.await;
    }
    broker.wait_for_connections(SHUTDOWN_GRACE).await;
    broker.close_store();
    tracing::info!("stopped");
    Ok(())
}

async fn bind(address: &str, name: &str) -> anyhow::Result<Option<TcpListener>> {
    if address.is_empty() {
        return Ok(None);
    }
    let listener = TcpListener::bind(address)
        .await
        .with_context(|| format!("cannot listen for {name} on {address}"))?;
    Ok(Some(listener))
}
