//! Search over the Ditto protocol (`_/_/things/twin/search/…`): Ditto's
//! reactive-streams binding of the search, where the server publishes
//! pages of results and the client says how many it can take.
//!
//! The client sends `subscribe` (value `{filter, options, namespaces}`, the
//! envelope's `fields`) and is answered `created` with a subscription id;
//! it then sends `request` (`{subscriptionId, demand}`: a number of
//! *pages*) and gets up to that many `next` events (`{subscriptionId,
//! items}`, `size(n)` things each, 25 by default), then `complete` once
//! the results are exhausted, or `failed` with an error. `cancel` ends a
//! subscription without a word. As Ditto's `SubscriptionManager` and
//! `SubscriptionActor`:
//! - a subscription whose filter, options or fields are wrong is still
//!   `created`, then `failed` with the error a search over HTTP answers;
//! - a demand of 0 or less fails it with `thing-search:subscription.
//!   protocol.error` (reactive streams' rule 3.9);
//! - an unknown id is `failed` with `thing-search:subscription.not.found`;
//! - one that waits [`IDLE_TIMEOUT`] for demand fails with
//!   `thing-search:subscription.timeout`;
//! - an ended subscription stays known for [`ZOMBIE_LIFETIME`], and a
//!   request for it fails as "considered cancelled".
//!
//! Pages are what `GET /api/2/search/things` answers (`service/search.rs`),
//! continued with its cursor, so a page holds what the caller may read as
//! it may see it, exactly as over HTTP. One difference: `complete` follows
//! the last page at once, where Ditto may wait for the next request to
//! find out there is nothing more.
//!
//! Each subscription is a task of its own that writes its events to the
//! transport's queue (`out`), which waits for room: a client that does not
//! read its pages stops the search rather than buffering it.

use super::commands::answer_headers;
use super::envelope::Envelope;
use super::topic::{unknown_topic_path, Channel, Criterion, Group, Topic};
use crate::error::DittoError;
use crate::fields::FieldSelector;
use crate::rql::SearchQuery;
use crate::service::search::SearchParams;
use crate::service::{Caller, Twins};
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

/// How long a subscription waits for demand before it fails: Ditto's
/// `gateway.streaming.search-idle-timeout`.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long an ended subscription still answers requests for it, as
/// Ditto's `SubscriptionActor.ZOMBIE_LIFETIME`.
pub const ZOMBIE_LIFETIME: Duration = Duration::from_secs(10);

/// Subscriptions one owner (a WebSocket session, an MQTT client, a
/// connection) may hold open at once, as many as its live calls
/// (`ws::CALLS_IN_FLIGHT`): each holds a task and a search position.
pub const SUBSCRIPTIONS_PER_OWNER: usize = 100;

/// Events a transport that forwards a subscription's events through a
/// queue of its own keeps waiting: a page is sent only once asked for, so
/// a few are enough.
pub const PAGES_QUEUED: usize = 4;

/// Commands a subscription has not yet taken: a client sends one request
/// at a time and waits for its pages; more than this many are refused.
const COMMAND_QUEUE: usize = 16;

/// Whether `topic` is a search message.
pub fn is_search(topic: &Topic) -> bool {
    (topic.group, topic.channel, topic.criterion)
        == (Group::Things, Channel::Twin, Criterion::Search)
}

/// The search subscriptions of one transport, each held by an owner (a
/// session, a client id) that alone may request from or cancel it.
#[derive(Clone)]
pub struct Searches {
    inner: Arc<Inner>,
}

struct Inner {
    twins: Arc<Twins>,
    open: Mutex<HashMap<String, Open>>,
    next_id: AtomicU64,
}

struct Open {
    owner: Arc<str>,
    commands: mpsc::Sender<Command>,
}

enum Command {
    Request { demand: i64, headers: Map<String, Value> },
    Cancel,
}

/// What a subscription is asked to find.
struct Query {
    filter: Option<String>,
    options: Option<String>,
    fields: Option<String>,
    namespaces: Option<Vec<String>>,
}

impl Searches {
    pub fn new(twins: Arc<Twins>) -> Searches {
        let inner = Inner { twins, open: Mutex::new(HashMap::new()), next_id: AtomicU64::new(0) };
        Searches { inner: Arc::new(inner) }
    }

    /// Applies one search message from `owner`. What must be said at once
    /// (an error, a `failed` for an unknown id) is returned; a new
    /// subscription's events go to the queue `out` makes.
    pub fn apply(
        &self,
        owner: &str,
        caller: &Caller,
        topic: &Topic,
        envelope: &Envelope,
        out: impl FnOnce() -> mpsc::Sender<Envelope>,
    ) -> Option<Envelope> {
        let answer = match topic.action.as_str() {
            "subscribe" => self.subscribe(owner, caller, envelope, out),
            "request" => self.request(owner, envelope),
            "cancel" => self.cancel(owner, envelope),
            _ => Err(Refusal::Error(unknown_topic_path(&envelope.topic))),
        };
        match answer {
            Ok(()) => None,
            Err(Refusal::Error(error)) => {
                Some(super::error_response(Some(topic), &envelope.headers, &error))
            }
            Err(Refusal::Failed(id, error)) => Some(failed(&id, &error, &envelope.headers)),
        }
    }

    fn subscribe(
        &self,
        owner: &str,
        caller: &Caller,
        envelope: &Envelope,
        out: impl FnOnce() -> mpsc::Sender<Envelope>,
    ) -> Result<(), Refusal> {
        let value = envelope.value.clone().unwrap_or(Value::Null);
        let query = Query {
            filter: optional_string(&value, "filter")?,
            options: optional_string(&value, "options")?,
            fields: envelope.fields.clone(),
            namespaces: namespaces(&value)?,
        };
        let mut open = self.inner.open.lock();
        let held = open.values().filter(|held| &*held.owner == owner).count();
        if held >= SUBSCRIPTIONS_PER_OWNER {
            return Err(Refusal::Error(DittoError::too_many_requests()));
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed).to_string();
        let (commands, receiver) = mpsc::channel(COMMAND_QUEUE);
        open.insert(id.clone(), Open { owner: owner.into(), commands });
        let subscription = Subscription {
            searches: Arc::downgrade(&self.inner),
            twins: self.inner.twins.clone(),
            caller: caller.clone(),
            id,
            headers: answer_headers(&envelope.headers),
            out: out(),
        };
        tokio::spawn(subscription.run(query, receiver));
        Ok(())
    }

    fn request(&self, owner: &str, envelope: &Envelope) -> Result<(), Refusal> {
        let id = subscription_id(envelope)?;
        let demand = match envelope.value.as_ref().and_then(|value| value.get("demand")) {
            Some(demand) => demand.as_i64().ok_or_else(|| {
                Refusal::Error(DittoError::json_parse(format!(
                    "Value <{demand}> for </demand> is not of type <long>!"
                )))
            })?,
            None => return Err(Refusal::Error(missing("demand"))),
        };
        let command = Command::Request { demand, headers: answer_headers(&envelope.headers) };
        self.send(owner, id, command)
    }

    fn cancel(&self, owner: &str, envelope: &Envelope) -> Result<(), Refusal> {
        let id = subscription_id(envelope)?;
        self.send(owner, id, Command::Cancel)
    }

    fn send(&self, owner: &str, id: String, command: Command) -> Result<(), Refusal> {
        let commands = self
            .inner
            .open
            .lock()
            .get(&id)
            .filter(|open| &*open.owner == owner)
            .map(|open| open.commands.clone());
        let Some(commands) = commands else {
            let error = not_found(&id);
            return Err(Refusal::Failed(id, error));
        };
        commands.try_send(command).map_err(|_| {
            let error = protocol_error("Too many requests are waiting for this subscription.");
            Refusal::Failed(id, error)
        })
    }
}

/// Why a search message is answered at once.
enum Refusal {
    /// An error response: the message itself is wrong.
    Error(DittoError),
    /// A `failed` event: the subscription it names cannot take it.
    Failed(String, DittoError),
}

/// One subscription's task.
struct Subscription {
    searches: Weak<Inner>,
    twins: Arc<Twins>,
    caller: Caller,
    id: String,
    /// Those of the command last received: events echo its correlation id.
    headers: Map<String, Value>,
    out: mpsc::Sender<Envelope>,
}

impl Subscription {
    async fn run(mut self, query: Query, mut commands: mpsc::Receiver<Command>) {
        let created = self.event("created", json!({ "subscriptionId": self.id }));
        let served = match self.out.send(created).await {
            Ok(()) => match Pages::new(query) {
                Ok(pages) => self.serve(pages, &mut commands).await,
                Err(error) => self.fail(&error).await,
            },
            Err(_) => Ended::Gone,
        };
        if served == Ended::Done {
            self.linger(&mut commands).await;
        }
        if let Some(searches) = self.searches.upgrade() {
            searches.open.lock().remove(&self.id);
        }
    }

    /// Sends pages as they are asked for, until the results, the client
    /// or its interest run out.
    async fn serve(&mut self, mut pages: Pages, commands: &mut mpsc::Receiver<Command>) -> Ended {
        let mut demand: u64 = 0;
        loop {
            let command = if demand == 0 {
                match tokio::time::timeout(IDLE_TIMEOUT, commands.recv()).await {
                    Ok(Some(command)) => Some(command),
                    Ok(None) => return Ended::Gone,
                    Err(_idle) => return self.fail(&timed_out(&self.id)).await,
                }
            } else {
                commands.try_recv().ok()
            };
            match command {
                Some(Command::Cancel) => return Ended::Done,
                Some(Command::Request { demand: asked, headers }) => {
                    self.headers = headers;
                    let Ok(asked) = u64::try_from(asked) else { return self.fail_rule_3_9().await };
                    if asked == 0 {
                        return self.fail_rule_3_9().await;
                    }
                    demand = demand.saturating_add(asked);
                    continue;
                }
                None => {}
            }
            let page = match pages.next(&self.twins, &self.caller, &self.out).await {
                Ok(page) => page,
                Err(error) => return self.fail(&error).await,
            };
            if let Some(items) = page {
                let next = self.event("next", json!({ "subscriptionId": self.id, "items": items }));
                if self.out.send(next).await.is_err() {
                    return Ended::Gone;
                }
                demand -= 1;
            }
            if pages.exhausted() {
                let complete = self.event("complete", json!({ "subscriptionId": self.id }));
                return if self.out.send(complete).await.is_ok() {
                    Ended::Done
                } else {
                    Ended::Gone
                };
            }
        }
    }

    /// After the end: requests still coming are told the subscription is
    /// over, until it is forgotten.
    async fn linger(&self, commands: &mut mpsc::Receiver<Command>) {
        let over = protocol_error(
            "This subscription is considered cancelled. No more messages are processed.",
        );
        let _ = tokio::time::timeout(ZOMBIE_LIFETIME, async {
            while let Some(command) = commands.recv().await {
                if let Command::Request { headers, .. } = command {
                    if self.out.send(failed(&self.id, &over, &headers)).await.is_err() {
                        return;
                    }
                }
            }
        })
        .await;
    }

    async fn fail_rule_3_9(&self) -> Ended {
        let error = protocol_error(
            "Rule 3.9: While the Subscription is not cancelled, Subscription.request(long n) MUST signal onError with a java.lang.IllegalArgumentException if the argument is <= 0. The cause message SHOULD explain that non-positive request signals are illegal.",
        )
        .with_description("The intent of this rule is to prevent faulty implementations to proceed operation without any exceptions being raised. Requesting a negative or 0 number of elements, since requests are additive, most likely to be the result of an erroneous calculation on the behalf of the Subscriber.");
        self.fail(&error).await
    }

    async fn fail(&self, error: &DittoError) -> Ended {
        match self.out.send(failed(&self.id, error, &self.headers)).await {
            Ok(()) => Ended::Done,
            Err(_) => Ended::Gone,
        }
    }

    fn event(&self, action: &str, value: Value) -> Envelope {
        search_event(action, value, &self.headers)
    }
}

/// How a subscription's service ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// Completed, failed or cancelled: it lingers for late requests.
    Done,
    /// Nobody is left to tell: the transport closed.
    Gone,
}

/// The search's results, a page at a time.
struct Pages {
    query: Query,
    page_size: usize,
    next: Continue,
    found: VecDeque<Value>,
}

/// Where the next search request starts.
enum Continue {
    First,
    After(String),
    End,
}

impl Pages {
    /// The pages of `query`, refused as a search over HTTP would refuse it.
    fn new(query: Query) -> Result<Pages, DittoError> {
        query.fields.as_deref().map(FieldSelector::parse).transpose()?;
        let parsed = SearchQuery::parse(query.filter.as_deref(), query.options.as_deref())
            .map_err(|error| error.to_ditto_error())?;
        let page_size = parsed.options.page_size() as usize;
        Ok(Pages { query, page_size, next: Continue::First, found: VecDeque::new() })
    }

    /// The next page, or `None` when no result is left. Search requests
    /// are made until a page is full: one may come back short when the
    /// caller may read few of the things it examined.
    async fn next(
        &mut self,
        twins: &Twins,
        caller: &Caller,
        out: &mpsc::Sender<Envelope>,
    ) -> Result<Option<Vec<Value>>, DittoError> {
        while self.found.len() < self.page_size && !out.is_closed() {
            let option = match &self.next {
                Continue::End => break,
                Continue::First => self.query.options.clone(),
                Continue::After(cursor) => {
                    Some(format!("size({}),cursor({cursor})", self.page_size))
                }
            };
            let params = SearchParams {
                filter: self.query.filter.as_deref(),
                option: option.as_deref(),
                fields: self.query.fields.as_deref(),
                namespaces: self.query.namespaces.clone(),
            };
            let mut result = twins.search_things(caller, params).await?;
            if let Some(Value::Array(items)) = result.get_mut("items").map(Value::take) {
                self.found.extend(items);
            }
            self.next = match result.get("cursor").and_then(Value::as_str) {
                Some(cursor) => Continue::After(cursor.to_owned()),
                None => Continue::End,
            };
        }
        if self.found.is_empty() {
            return Ok(None);
        }
        let take = self.page_size.min(self.found.len());
        Ok(Some(self.found.drain(..take).collect()))
    }

    fn exhausted(&self) -> bool {
        matches!(self.next, Continue::End) && self.found.is_empty()
    }
}

fn search_event(action: &str, value: Value, headers: &Map<String, Value>) -> Envelope {
    let mut envelope = Envelope::new(format!("_/_/things/twin/search/{action}"), "/");
    envelope.headers = headers.clone();
    envelope.headers.insert("content-type".into(), "application/json".into());
    envelope.value = Some(value);
    envelope
}

fn failed(id: &str, error: &DittoError, headers: &Map<String, Value>) -> Envelope {
    let value = json!({ "subscriptionId": id, "error": error.to_json() });
    search_event("failed", value, &answer_headers(headers))
}

fn subscription_id(envelope: &Envelope) -> Result<String, Refusal> {
    match envelope.value.as_ref().and_then(|value| value.get("subscriptionId")) {
        Some(Value::String(id)) => Ok(id.clone()),
        Some(other) => Err(Refusal::Error(DittoError::json_parse(format!(
            "Value <{other}> for </subscriptionId> is not of type <String>!"
        )))),
        None => Err(Refusal::Error(missing("subscriptionId"))),
    }
}

fn optional_string(value: &Value, field: &str) -> Result<Option<String>, Refusal> {
    match value.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(Refusal::Error(DittoError::json_parse(format!(
            "Value <{other}> for </{field}> is not of type <String>!"
        )))),
    }
}

/// The namespaces to search; none or an empty list searches all, as
/// Ditto's `SubscriptionManager` reads them.
fn namespaces(value: &Value) -> Result<Option<Vec<String>>, Refusal> {
    let invalid = |other: &Value| {
        Refusal::Error(DittoError::json_parse(format!(
            "Value <{other}> for </namespaces> is not of type <JsonArray>!"
        )))
    };
    match value.get("namespaces") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(list)) => {
            let names = list
                .iter()
                .map(|name| name.as_str().map(str::to_owned).ok_or_else(|| invalid(name)))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((!names.is_empty()).then_some(names))
        }
        Some(other) => Err(invalid(other)),
    }
}

fn missing(field: &str) -> DittoError {
    DittoError::json_field_missing(format!("JSON did not include required </{field}> field!"))
}

/// Ditto's `SubscriptionNotFoundException`.
fn not_found(id: &str) -> DittoError {
    DittoError::new(
        404,
        "thing-search:subscription.not.found",
        format!("No subscription with ID '{id}' exists."),
        None,
    )
}

/// Ditto's `SubscriptionTimeoutException`.
fn timed_out(id: &str) -> DittoError {
    DittoError::new(
        408,
        "thing-search:subscription.timeout",
        format!("The subscription '{id}' stopped due to a lack of interaction."),
        None,
    )
}

/// Ditto's `SubscriptionProtocolErrorException`.
fn protocol_error(message: &str) -> DittoError {
    DittoError::new(400, "thing-search:subscription.protocol.error", message, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::TwinsConfig;
    use crate::store::{sqlite::SqliteStore, Store};

    struct Client {
        searches: Searches,
        out: mpsc::Sender<Envelope>,
        events: mpsc::Receiver<Envelope>,
        caller: Caller,
        _dir: tempfile::TempDir,
    }

    impl Client {
        fn new() -> Client {
            let dir = tempfile::tempdir().unwrap();
            let store = SqliteStore::open(&dir.path().join("twins.db"), false).unwrap();
            let twins = Arc::new(Twins::new(Store::Sqlite(store), TwinsConfig::default()));
            let (out, events) = mpsc::channel(2 * SUBSCRIPTIONS_PER_OWNER);
            let caller = Caller::new(vec!["nginx:alice".into()]);
            Client { searches: Searches::new(twins), out, events, caller, _dir: dir }
        }

        fn send(&self, owner: &str, action: &str, value: Value) -> Option<Envelope> {
            let mut envelope = Envelope::new(format!("_/_/things/twin/search/{action}"), "/");
            envelope.value = Some(value);
            let topic = Topic::parse(&envelope.topic).unwrap();
            let out = self.out.clone();
            self.searches.apply(owner, &self.caller, &topic, &envelope, || out)
        }

        async fn next(&mut self) -> (String, Value) {
            let event = self.events.recv().await.unwrap();
            (event.topic, event.value.unwrap())
        }
    }

    fn error_of(event: &Envelope) -> &str {
        event.value.as_ref().unwrap()["error"]["error"].as_str().unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_subscription_times_out_lingers_and_is_forgotten() {
        let mut client = Client::new();
        assert!(client.send("a", "subscribe", json!({})).is_none());
        let (topic, created) = client.next().await;
        assert_eq!(topic, "_/_/things/twin/search/created");
        let id = created["subscriptionId"].clone();

        // Only its owner may ask for it.
        let stolen = client.send("b", "request", json!({"subscriptionId": id, "demand": 1}));
        assert_eq!(error_of(&stolen.unwrap()), "thing-search:subscription.not.found");

        // Nothing asked for a minute: it fails.
        let started = tokio::time::Instant::now();
        let (topic, failed) = client.next().await;
        assert_eq!(started.elapsed(), IDLE_TIMEOUT);
        assert_eq!(topic, "_/_/things/twin/search/failed");
        assert_eq!(failed["error"]["error"], "thing-search:subscription.timeout");
        assert_eq!(failed["error"]["status"], 408);

        // Then it is over, and a while later unknown.
        assert!(client.send("a", "request", json!({"subscriptionId": id, "demand": 1})).is_none());
        let (_, over) = client.next().await;
        assert_eq!(over["error"]["error"], "thing-search:subscription.protocol.error");
        tokio::time::sleep(ZOMBIE_LIFETIME + Duration::from_secs(1)).await;
        let gone = client.send("a", "request", json!({"subscriptionId": id, "demand": 1}));
        assert_eq!(error_of(&gone.unwrap()), "thing-search:subscription.not.found");
    }

    #[tokio::test(start_paused = true)]
    async fn an_owner_holds_a_bounded_number_of_subscriptions() {
        let mut client = Client::new();
        for _ in 0..SUBSCRIPTIONS_PER_OWNER {
            assert!(client.send("a", "subscribe", json!({})).is_none());
        }
        let refused = client.send("a", "subscribe", json!({})).unwrap();
        assert_eq!(refused.topic, "_/_/things/twin/errors");
        assert_eq!(refused.status, Some(429));
        // Another owner still may.
        assert!(client.send("b", "subscribe", json!({})).is_none());
        // Cancelled ones linger, then make room.
        for _ in 0..=SUBSCRIPTIONS_PER_OWNER {
            let (_, created) = client.next().await;
            let id = created["subscriptionId"].clone();
            client.send("a", "cancel", json!({"subscriptionId": id}));
        }
        tokio::time::sleep(ZOMBIE_LIFETIME + Duration::from_secs(1)).await;
        assert!(client.send("a", "subscribe", json!({})).is_none());
    }
}
