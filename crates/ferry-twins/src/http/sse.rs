//! Server-Sent Events of twin changes, as Ditto's gateway serves them
//! (`ThingsSseRouteBuilder`): `GET /api/2/things` and
//! `/api/2/things/{thingId}[/path]` with `Accept: text/event-stream`.
//!
//! Each change the caller may see (`service/watch.rs`) is one event whose
//! `data:` is the partial thing on one line, or, on a thing's sub-path,
//! the value at that path. What Ferry adds: each event's `id:` is its
//! place in the event journal, so a client that reconnects with
//! `Last-Event-ID` (as `EventSource` does by itself) is sent what it
//! missed first, then the live changes. Events the caller may not see
//! still move its place on: a keep-alive carries the latest place
//! examined as an `id:` without data, which sets a client's last event id
//! without dispatching an event, so a resume never re-examines them.
//!
//! A stream ends when the server shuts down, when its client falls so far
//! behind that the live feed dropped events for it (it resumes from the
//! journal), and after [`REPLAY_LIMIT`] replayed events (likewise).

use super::reply::Reply;
use crate::id::ThingId;
use crate::pointer::JsonPointer;
use crate::service::watch::Watch;
use crate::service::{Caller, ThingEvent, Twins};
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

/// The longest a stream stays silent: Ditto's gateway sends a heartbeat
/// after a second without an event, which keeps proxies and load
/// balancers from closing an idle connection.
const KEEP_ALIVE: Duration = Duration::from_secs(1);

/// Journal entries read per store round trip while resuming: a page is
/// held in memory until it is sent.
const REPLAY_PAGE: usize = 256;

/// Journal entries one connection examines on resuming at most; then the
/// stream ends, with its place sent, and the client's reconnect goes on
/// from there. Bounds the work one request makes, and the time its live
/// events wait behind the replay.
const REPLAY_LIMIT: usize = 10_000;

/// Whether the request asks for an event stream: a media range of
/// `Accept` that matches `text/event-stream`, `*/*` not counting (Ditto's
/// `matchesTextEventStream`).
pub(super) fn requested(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|range| range.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .any(|range| range == "text/event-stream" || range == "text/*")
}

/// `GET /api/2/things` as a stream: every thing the caller may read, or
/// those `ids`, `namespaces` and `filter` select.
pub(super) fn things(
    twins: Arc<Twins>,
    caller: Caller,
    params: &[(String, String)],
    headers: &HeaderMap,
) -> Reply {
    let watch = Watch::parse(params)?;
    Ok(respond(twins, caller, watch, JsonPointer::root(), headers))
}

/// `GET /api/2/things/{thingId}[/path]` as a stream: that thing's changes
/// and, on a path, the value there.
pub(super) fn thing(
    twins: Arc<Twins>,
    caller: Caller,
    thing_id: ThingId,
    path: &str,
    params: &[(String, String)],
    headers: &HeaderMap,
) -> Reply {
    let resource = JsonPointer::parse(path)?;
    let watch = Watch::parse(params)?.of_thing(thing_id, &resource);
    Ok(respond(twins, caller, watch, resource, headers))
}

fn respond(
    twins: Arc<Twins>,
    caller: Caller,
    watch: Watch,
    resource: JsonPointer,
    headers: &HeaderMap,
) -> Response {
    // A place this server did not hand out is no place to resume from.
    let resume_after = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.trim().parse::<u64>().ok());
    let stream = Stream::new(twins, caller, watch, resource, resume_after);
    let body = futures_util::stream::unfold(stream, |mut stream| async move {
        let frame = stream.next_frame().await?;
        Some((Ok::<_, Infallible>(frame), stream))
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"))],
        Body::from_stream(body),
    )
        .into_response()
}

/// One client's stream: its replay from the journal, then the live feed.
struct Stream {
    twins: Arc<Twins>,
    caller: Caller,
    watch: Watch,
    /// The path inside the thing that the stream is of (root: the thing).
    resource: JsonPointer,
    /// Subscribed before the journal is read, so that nothing committed
    /// meanwhile falls between the two.
    events: tokio::sync::broadcast::Receiver<ThingEvent>,
    closing: tokio::sync::watch::Receiver<bool>,
    /// Journal entries read and not yet examined.
    replay: VecDeque<ThingEvent>,
    /// Where the next journal read starts; `None` once the replay is read.
    resume_after: Option<u64>,
    examined: usize,
    /// Set when the stream is to end after what it sends now.
    done: bool,
    /// The latest journal place examined, for the ids sent.
    place: Option<u64>,
    /// The latest place read from the journal: a live event at or before
    /// it was replayed already (the feed is subscribed to before the
    /// journal is read, so a commit in between is in both). Only the
    /// replay's: live events of one group commit can be announced out of
    /// order, so a live event below the latest live one is no duplicate.
    replayed: Option<u64>,
    /// The latest place the client was sent.
    place_sent: Option<u64>,
    next_keep_alive: Instant,
}

impl Stream {
    /// Subscribes to the feed at once: what commits from here on is sent.
    fn new(
        twins: Arc<Twins>,
        caller: Caller,
        watch: Watch,
        resource: JsonPointer,
        resume_after: Option<u64>,
    ) -> Stream {
        Stream {
            events: twins.subscribe(),
            closing: twins.closing(),
            twins,
            caller,
            watch,
            resource,
            replay: VecDeque::new(),
            resume_after,
            examined: 0,
            done: false,
            // From what the journal holds, not from what the client claims:
            // a place from before the store was replaced must not hide
            // events.
            place: None,
            replayed: None,
            place_sent: resume_after,
            next_keep_alive: Instant::now() + KEEP_ALIVE,
        }
    }

    /// The next bytes to send, `None` to end the stream.
    async fn next_frame(&mut self) -> Option<Bytes> {
        loop {
            if self.done || *self.closing.borrow() {
                return None;
            }
            if let Some(event) = self.replay.pop_front() {
                self.examined += 1;
                if let Some(frame) = self.frame(&event).await? {
                    return Some(frame);
                }
                continue;
            }
            if let Some(after) = self.resume_after {
                if self.examined >= REPLAY_LIMIT {
                    self.done = true;
                    return self.place_frame();
                }
                self.read_journal(after).await?;
                continue;
            }
            tokio::select! {
                () = closed(&mut self.closing) => return None,
                () = tokio::time::sleep_until(self.next_keep_alive) => {
                    self.next_keep_alive = Instant::now() + KEEP_ALIVE;
                    return Some(self.place_frame().unwrap_or_else(|| Bytes::from_static(b":\n\n")));
                }
                received = self.events.recv() => match received {
                    Ok(event) => {
                        if event.journal.is_some_and(|seq| self.replayed.is_some_and(|last| seq <= last)) {
                            continue;
                        }
                        if let Some(frame) = self.frame(&event).await? {
                            return Some(frame);
                        }
                    }
                    Err(RecvError::Lagged(missed)) => {
                        // The client resumes from the journal when it
                        // reconnects; going on would skip events silently.
                        self.twins.note_lagged(missed);
                        return None;
                    }
                    Err(RecvError::Closed) => return None,
                },
            }
        }
    }

    /// The next page of the journal after `after`; `None` (ending the
    /// stream) when the store fails, for the client to resume later.
    async fn read_journal(&mut self, after: u64) -> Option<()> {
        let page = match self.twins.journal_after(after, REPLAY_PAGE).await {
            Ok(page) => page,
            Err(error) => {
                tracing::warn!(%error, "an event stream could not read the journal");
                return None;
            }
        };
        self.replayed = self.replayed.max(page.last().and_then(|event| event.journal));
        self.resume_after = match page.last().and_then(|event| event.journal) {
            Some(last) if page.len() == REPLAY_PAGE => Some(last),
            _ => None,
        };
        self.replay.extend(page);
        Some(())
    }

    /// The event's frame when the caller sees it: `Some(None)` when it does
    /// not, `None` (ending the stream) when that cannot be told.
    async fn frame(&mut self, event: &ThingEvent) -> Option<Option<Bytes>> {
        self.place = self.place.max(event.journal);
        let visible = match self.twins.visible_event(&self.caller, event, &self.watch).await {
            Ok(visible) => visible,
            Err(error) => {
                tracing::warn!(error = %error.message, "an event stream could not check an event");
                return None;
            }
        };
        let Some(data) = visible.and_then(|visible| self.resource.get(&visible.thing).cloned())
        else {
            return Some(None);
        };
        // The latest place examined, not the event's own: ids only grow,
        // even where the feed announced two commits out of order.
        self.place_sent = self.place;
        self.next_keep_alive = Instant::now() + KEEP_ALIVE;
        Some(Some(encode(&data, self.place)))
    }

    /// An `id:` without data when the place examined moved past the one
    /// sent.
    fn place_frame(&mut self) -> Option<Bytes> {
        let place = self.place.filter(|&place| Some(place) > self.place_sent)?;
        self.place_sent = Some(place);
        Some(Bytes::from(format!("id:{place}\n\n")))
    }
}

/// Waits for the server to shut down.
async fn closed(closing: &mut tokio::sync::watch::Receiver<bool>) {
    // An error means the service is gone, which is a shutdown too.
    let _ = closing.wait_for(|&closed| closed).await;
}

/// One event as pekko-http writes it: `data:` then `id:`, then a blank
/// line. JSON on one line needs one `data:` line.
fn encode(data: &Value, place: Option<u64>) -> Bytes {
    let mut frame = format!("data:{data}\n");
    if let Some(place) = place {
        frame.push_str(&format!("id:{place}\n"));
    }
    frame.push('\n');
    Bytes::from(frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{Conditions, ThingWrite, TwinsConfig, EVENT_BUFFER};
    use crate::store::sqlite::SqliteStore;
    use crate::store::Store;
    use crate::thing::ThingResource;

    fn twins(dir: &tempfile::TempDir) -> Arc<Twins> {
        let store = SqliteStore::open(&dir.path().join("twins.db"), false).unwrap();
        Arc::new(Twins::new(Store::Sqlite(store), TwinsConfig::default()))
    }

    fn stream(twins: &Arc<Twins>, resume_after: Option<u64>) -> Stream {
        let caller = Caller::new(vec!["nginx:ditto".into()]);
        Stream::new(twins.clone(), caller, Watch::default(), JsonPointer::root(), resume_after)
    }

    async fn put(twins: &Twins, path: &str, value: Value) {
        let caller = Caller::new(vec!["nginx:ditto".into()]);
        let resource = ThingResource::parse(path).unwrap().unwrap();
        let id = ThingId::parse("ns:x").unwrap();
        let write = ThingWrite::Put(&value);
        twins.write_thing(&caller, &id, &resource, write, &Conditions::default()).await.unwrap();
    }

    fn text(frame: Option<Bytes>) -> String {
        String::from_utf8(frame.expect("a frame").to_vec()).unwrap()
    }

    /// The next frame with an event in it, or `None` for the end: the
    /// keep-alive (a comment, or the latest place alone) may come between
    /// any two when a loaded machine takes over a second for the writes.
    async fn next_event_frame(stream: &mut Stream) -> Option<Bytes> {
        let frame = async {
            loop {
                let frame = stream.next_frame().await?;
                if frame.starts_with(b"data:") {
                    return Some(frame);
                }
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(30), frame)
            .await
            .expect("an event or the end within 30 s, not only keep-alives")
    }

    #[tokio::test]
    async fn a_stream_that_falls_behind_ends_and_is_counted_and_its_resume_replays() {
        let dir = tempfile::tempdir().unwrap();
        let twins = twins(&dir);
        put(&twins, "", serde_json::json!({})).await;
        let mut behind = stream(&twins, None);
        for n in 0..=EVENT_BUFFER {
            put(&twins, "attributes/n", Value::from(n)).await;
        }
        assert_eq!(next_event_frame(&mut behind).await, None);
        assert_eq!(twins.lagged_subscribers(), 1);

        // Resuming from the first change gets the rest, in order, each
        // with its place, then what is live.
        let mut resumed = stream(&twins, Some(1));
        assert_eq!(
            text(resumed.next_frame().await),
            "data:{\"thingId\":\"ns:x\",\"attributes\":{\"n\":0}}\nid:2\n\n"
        );
        for _ in 1..EVENT_BUFFER {
            resumed.next_frame().await.expect("a replayed event");
        }
        let last = text(resumed.next_frame().await);
        assert!(
            last.ends_with(&format!("{{\"n\":{EVENT_BUFFER}}}}}\nid:{}\n\n", EVENT_BUFFER + 2)),
            "{last}"
        );
        put(&twins, "attributes/live", Value::Bool(true)).await;
        assert!(text(next_event_frame(&mut resumed).await).contains("\"live\":true"));
    }

    #[tokio::test]
    async fn live_events_announced_out_of_journal_order_are_all_sent() {
        let dir = tempfile::tempdir().unwrap();
        let twins = twins(&dir);
        put(&twins, "", serde_json::json!({})).await;
        let mut live = stream(&twins, None);
        // Two commits of one group commit, announced later one first.
        let event = |n: u64| crate::service::ThingEvent {
            thing_id: ThingId::parse("ns:x").unwrap(),
            policy_id: Some(crate::id::PolicyId::parse("ns:x").unwrap()),
            revision: n,
            timestamp: crate::policy::Timestamp::now(),
            action: crate::service::ThingAction::Modified,
            path: JsonPointer::parse("/attributes/n").unwrap(),
            value: Some(Value::from(n)),
            journal: Some(n),
            acks: None,
            correlation_id: None,
            originator: None,
        };
        twins.announce(event(11));
        twins.announce(event(10));
        assert!(text(live.next_frame().await).contains("\"n\":11"));
        assert!(text(live.next_frame().await).contains("\"n\":10"));
    }

    #[tokio::test]
    async fn streams_end_when_the_service_closes() {
        let dir = tempfile::tempdir().unwrap();
        let twins = twins(&dir);
        let mut open = stream(&twins, None);
        twins.close();
        assert_eq!(open.next_frame().await, None);
        assert_eq!(stream(&twins, Some(0)).next_frame().await, None);
    }

    #[test]
    fn a_stream_is_asked_for_by_a_range_that_names_it() {
        let asks = |accept: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
            requested(&headers)
        };
        assert!(asks("text/event-stream"));
        assert!(asks("application/json, Text/Event-Stream; q=0.5"));
        assert!(asks("text/*"));
        assert!(!asks("*/*"));
        assert!(!asks("application/json"));
        assert!(!requested(&HeaderMap::new()));
    }

    #[test]
    fn an_event_is_its_data_line_then_its_place() {
        let data = serde_json::json!({"thingId": "a:b", "attributes": {"s": "x\ny"}});
        assert_eq!(
            encode(&data, Some(7)),
            Bytes::from_static(
                b"data:{\"thingId\":\"a:b\",\"attributes\":{\"s\":\"x\\ny\"}}\nid:7\n\n"
            )
        );
        assert_eq!(encode(&Value::from(3), None), Bytes::from_static(b"data:3\n\n"));
    }
}
