//! `/api/2/things` and `/api/2/things/{thingId}[/…]`, as Ditto's gateway
//! routes them (`ThingsRoute`, `FeaturesRoute`): GET, PUT, PATCH and
//! DELETE on the thing and each part of it (`ThingResource`), POST of a
//! thing with a generated id, and `GET /things?ids=…`.
//!
//! What the gateway does before the things service sees a request is done
//! here: the media type (`application/json` or none for PUT and POST,
//! `application/merge-patch+json` for PATCH, else 415), the body parsed as
//! JSON (`json.invalid`), the thing id checked (`things:id.invalid`),
//! `fields=`, the conditional headers and `condition=` (query parameter or
//! header) read, and a write answered as its `requested-acks`,
//! `response-required` and `timeout` (query parameters or headers) ask
//! (`acks.rs`): by default its response once committed (the
//! `twin-persisted` acknowledgement), a bare 202 with
//! `response-required=false`, the aggregated acknowledgements when more
//! was requested. A path no route matches is Pekko's plain-text 404, as in
//! Ditto.

use super::live::{self, LiveRequest};
use super::params::{self, Parameters, Plus};
use super::reply::{self, Reply};
use super::sse;
use crate::acks::{self, Ack, Requested, Waiter};
use crate::error::DittoError;
use crate::fields::FieldSelector;
use crate::id::ThingId;
use crate::service::search::SearchParams;
use crate::service::{
    Caller, Conditions, IfEqual, Refused, TagMatch, ThingWrite, ThingWritten, Twins,
};
use crate::thing::metadata_headers::DITTO_METADATA;
use crate::thing::{EntityTag, MetadataHeaders, ThingBody, ThingResource, UNKNOWN_RESOURCE_BODY};
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde_json::Value;
use std::sync::Arc;

type Twin = State<Arc<Twins>>;
type Who = Option<Extension<Caller>>;
type Params = RawQuery;

const MERGE_PATCH_JSON: &str = "application/merge-patch+json";

/// The query parameters and headers every thing route reads.
struct Request {
    fields: Option<FieldSelector>,
    conditions: Conditions,
    acks: Requested,
    /// The request's `correlation-id`; one made up for it when the answer
    /// is acknowledgements, else empty when it has none.
    correlation_id: String,
}

impl Request {
    /// `retrieve`: the request reads, which decides the metadata header
    /// that counts.
    fn read(
        params: &[(String, String)],
        headers: &HeaderMap,
        retrieve: bool,
    ) -> Result<Request, DittoError> {
        let param =
            |name: &str| params.iter().find(|(key, _)| key == name).map(|(_, v)| v.as_str());
        let header_text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        // Ditto takes several `fields=` as one selector joined by commas.
        let fields: Vec<&str> =
            params.iter().filter(|(key, _)| key == "fields").map(|(_, v)| v.as_str()).collect();
        let fields =
            if fields.is_empty() { None } else { Some(FieldSelector::parse(&fields.join(","))?) };
        let condition = param("condition").or_else(|| header_text("condition")).map(str::to_owned);
        let response_required = param("response-required")
            .or_else(|| header_text("response-required"))
            .map(|value| !value.eq_ignore_ascii_case("false"));
        let labels = param("requested-acks")
            .or_else(|| header_text("requested-acks"))
            .map(acks::parse_labels)
            .transpose()?;
        let timeout = param("timeout").or_else(|| header_text("timeout"));
        let acks = Requested::twin_modify(labels, response_required, timeout)?;
        // Made up only for an answer of acknowledgements, which carries
        // one: not a random draw on every read.
        let correlation_id = match header_text("correlation-id") {
            Some(id) => id.to_owned(),
            None if acks.plain() => String::new(),
            None => crate::id::random_uuid(),
        };
        let event_acks = acks.event_acks(&correlation_id).map(Arc::new);
        Ok(Request {
            fields,
            conditions: Conditions {
                if_match: header_text("if-match").map(TagMatch::parse),
                if_none_match: header_text("if-none-match").map(TagMatch::parse),
                condition,
                // `live::Selection` reads it, before this.
                live_channel_condition: None,
                if_equal: header_text("if-equal")
                    .map(IfEqual::parse)
                    .transpose()?
                    .unwrap_or_default(),
                acks: event_acks,
                metadata: MetadataHeaders::read(|name| header_unicode(headers, name), retrieve)?,
                correlation_id: Some(correlation_id.as_str())
                    .filter(|id| !id.is_empty())
                    .map(Arc::from),
            },
            acks,
            correlation_id,
        })
    }

    /// Registers the wait for subscribers' acknowledgements, before the
    /// write, so that none that comes back at once is missed.
    fn waiter(&self, twins: &Twins) -> Result<Option<Waiter>, DittoError> {
        self.conditions.acks.as_deref().map(|acks| twins.ack_hub().expect(acks)).transpose()
    }

    /// The answer to a committed write: `response` itself when no more
    /// than the commit was asked for (202 without a response), else the
    /// acknowledgements requested, aggregated. `created` is the body of a
    /// 201; `waiter` brings the subscribers' acknowledgements.
    async fn acknowledged(
        &self,
        response: Response,
        created: Option<&Value>,
        waiter: Option<Waiter>,
    ) -> Response {
        let acks = &self.acks;
        if acks.plain() {
            return if acks.response_required {
                response
            } else {
                StatusCode::ACCEPTED.into_response()
            };
        }
        let received = match waiter {
            Some(waiter) => waiter.collect(acks.timeout).await,
            None => Vec::new(),
        };
        let correlation_id = &self.correlation_id;
        let mut headers = acks::correlation_headers(correlation_id);
        for name in [header::ETAG, header::LOCATION] {
            if let Some(value) = response.headers().get(&name).and_then(|v| v.to_str().ok()) {
                headers.insert(name.as_str().into(), value.into());
            }
        }
        let persisted = Ack {
            label: acks::TWIN_PERSISTED.into(),
            status: response.status().as_u16(),
            payload: created.cloned(),
            headers,
        };
        let mut fulfilled = acks.fulfil(Some(persisted), received, correlation_id);
        let status = acks::combined_status(&fulfilled);
        if !acks.response_required {
            if (200..300).contains(&status) {
                return StatusCode::ACCEPTED.into_response();
            }
            fulfilled = acks::minimized(&fulfilled);
        }
        let mut answer = reply::acknowledgements(status, &fulfilled);
        if let Ok(value) = HeaderValue::from_str(correlation_id) {
            answer.headers_mut().insert("correlation-id", value);
        }
        answer
    }
}

/// A refusal as its answer: Ditto's error body, the current `ETag` when
/// a precondition failed, and a bare 304 for "not modified".
fn refused(refused: Refused) -> Response {
    let mut response = if refused.error.status == 304 {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        refused.error.into_response()
    };
    if let Some(etag) = refused.etag {
        with_etag(&mut response, Some(&etag));
    }
    response
}

fn with_etag(response: &mut Response, etag: Option<&EntityTag>) {
    if let Some(value) = etag.and_then(|etag| HeaderValue::from_str(etag.as_str()).ok()) {
        response.headers_mut().insert(header::ETAG, value);
    }
}

/// Pekko's answer to a path no route matches.
fn unknown_resource() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=UTF-8"))],
        UNKNOWN_RESOURCE_BODY,
    )
        .into_response()
}

/// Ditto's `UnsupportedMediaTypeException` (`mediatype.unsupported`, 415).
fn unsupported_media_type(given: &str, merge_patch: bool) -> DittoError {
    let error = DittoError::new(
        415,
        "mediatype.unsupported",
        format!("The Media-Type <{given}> is not supported for this resource."),
        if merge_patch {
            format!("Allowed Media-Type is: <{MERGE_PATCH_JSON}>.")
        } else {
            "Allowed Media-Types are: <[application/json]>.".to_string()
        },
    );
    if merge_patch {
        error.with_href("https://tools.ietf.org/html/rfc7396")
    } else {
        error
    }
}

/// The request's media type without parameters; Pekko takes a request
/// without one as `application/octet-stream`.
fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(|value| value.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_else(|| "application/octet-stream".to_owned())
}

/// PUT and POST take JSON, and octet-stream as Ditto's default fallback
/// (`additional-accepted-media-types`); PATCH only a merge patch.
fn check_media_type(headers: &HeaderMap, merge_patch: bool) -> Result<(), DittoError> {
    let given = media_type(headers);
    let accepted = if merge_patch {
        given == MERGE_PATCH_JSON
    } else {
        given == "application/json" || given == "application/octet-stream"
    };
    if accepted {
        Ok(())
    } else {
        Err(unsupported_media_type(&given, merge_patch))
    }
}

/// The query's `name=value` pairs (`+` is itself in a query string).
fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    params::pairs(query.unwrap_or("").as_bytes(), Plus::Literal)
}

fn thing_id(text: &str) -> Result<ThingId, DittoError> {
    ThingId::parse(text)
}

/// `GET /api/2/things?ids=a,b[&fields=…]`.
pub async fn list(
    State(twins): Twin,
    caller: Who,
    RawQuery(query): Params,
    headers: HeaderMap,
    uri: Uri,
) -> Reply {
    let caller = super::caller(caller)?;
    let params = query_pairs(query.as_deref());
    if sse::requested(&headers) {
        return sse::things(twins, caller, &params, &headers);
    }
    let request = Request::read(&params, &headers, true)?;
    let ids: Vec<&str> = params
        .iter()
        .filter(|(key, _)| key == "ids")
        .flat_map(|(_, value)| value.split(','))
        .filter(|id| !id.is_empty())
        .collect();
    if ids.is_empty() {
        return list_by_search(&twins, &caller, &params, &uri).await;
    }
    let ids = ids.into_iter().map(thing_id).collect::<Result<Vec<_>, _>>()?;
    let found = twins.retrieve_things(&caller, &ids, request.fields.as_ref()).await?;
    Ok(reply::json(StatusCode::OK, &Value::Array(found)))
}

/// `GET /things` without `ids`: Ditto answers it with a search of the
/// caller's things (`QueryThings`), which is the search API's; until that
/// is wired here, the answer is Ditto's missing-parameter 400.
/// `GET /api/2/things` without `ids`: Ditto answers with a search of
/// every thing the caller may read (`QueryThings` without a filter; a
/// `filter` is for `/search/things` only), as a bare array, and points at
/// the next page with a `Link` header (`ThingsRoute`).
async fn list_by_search(
    twins: &Twins,
    caller: &Caller,
    params: &[(String, String)],
    uri: &Uri,
) -> Reply {
    let params = Parameters(params.to_vec());
    let (option, fields) = (params.joined("option"), params.joined("fields"));
    let search = SearchParams {
        filter: None,
        option: option.as_deref(),
        fields: fields.as_deref(),
        namespaces: params.namespaces(),
    };
    let mut result = twins.search_things(caller, search).await?;
    let items = result.get_mut("items").map(Value::take).unwrap_or(Value::Array(Vec::new()));
    let mut response = reply::json(StatusCode::OK, &items);
    let mut links = vec![format!("<{uri}>; rel=\"canonical\"")];
    if let Some(cursor) = result.get("cursor").and_then(Value::as_str) {
        links.push(format!("<{}?option=cursor({cursor})>; rel=\"next\"", uri.path()));
    }
    if let Ok(link) = HeaderValue::from_str(&links.join(", ")) {
        response.headers_mut().insert(header::LINK, link);
    }
    Ok(response)
}

/// `POST /api/2/things[?namespace=…]`: a thing with a generated id.
pub async fn create(
    State(twins): Twin,
    caller: Who,
    RawQuery(query): Params,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Reply {
    let caller = super::caller(caller)?;
    let params = query_pairs(query.as_deref());
    let request = Request::read(&params, &headers, false)?;
    check_media_type(&headers, false)?;
    let value = reply::parse_body(&body)?;
    let namespace = params.iter().find(|(key, _)| key == "namespace").map(|(_, v)| v.as_str());
    let thing_body = ThingBody::for_post(namespace, &value)?;
    let id = thing_body.thing_id().clone();
    let waiter = request.waiter(&twins)?;
    let outcome = match twins
        .write_thing(
            &caller,
            &id,
            &ThingResource::Thing,
            ThingWrite::Post(&thing_body),
            &request.conditions,
        )
        .await
    {
        Ok(outcome) => outcome,
        Err(refusal) => return Ok(refused(refusal)),
    };
    let created = match &outcome.written {
        ThingWritten::Created(value) => value.clone(),
        _ => Value::Null,
    };
    let mut response = reply::json(StatusCode::CREATED, &created);
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost");
    let location = format!("http://{host}{}/{}", uri.path().trim_end_matches('/'), id);
    if let Ok(location) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    with_etag(&mut response, outcome.etag.as_ref());
    Ok(request.acknowledged(response, Some(&created), waiter).await)
}

/// Every method on `/api/2/things/{thingId}`.
#[allow(clippy::too_many_arguments)] // one per axum extractor
pub async fn thing(
    twins: Twin,
    caller: Who,
    method: Method,
    Path(id): Path<String>,
    params: Params,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Reply {
    handle(twins, caller, method, &id, "", params, headers, uri, body).await
}

/// Every method on `/api/2/things/{thingId}/{*rest}`.
#[allow(clippy::too_many_arguments)]
pub async fn part(
    twins: Twin,
    caller: Who,
    method: Method,
    Path((id, rest)): Path<(String, String)>,
    params: Params,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Reply {
    handle(twins, caller, method, &id, &rest, params, headers, uri, body).await
}

#[allow(clippy::too_many_arguments)]
async fn handle(
    State(twins): Twin,
    caller: Who,
    method: Method,
    id: &str,
    rest: &str,
    RawQuery(query): Params,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Reply {
    let params = query_pairs(query.as_deref());
    let caller = super::caller(caller)?;
    let thing_id = thing_id(id)?;
    let live_request = LiveRequest {
        method: &method,
        thing_id: &thing_id,
        rest,
        query: &params,
        headers: &headers,
        body: &body,
    };
    let mut selection = live::Selection::read(&params, &headers)?;
    let live_requested = live::requested(&params, &headers);
    let twin_first = selection.twin_first(&method, live_requested)?;
    if live_requested && !twin_first {
        return live::command(&twins, &caller, &live_request).await;
    }
    if let Some(feature_id) = crate::shadow::delta_path(rest)? {
        return delta(&twins, &caller, &thing_id, &feature_id, &method).await;
    }
    if method == Method::GET && sse::requested(&headers) {
        return sse::thing(twins, caller, thing_id, rest, &params, &headers);
    }
    let Some(resource) = ThingResource::parse(rest)? else {
        return Ok(unknown_resource());
    };
    let mut request = Request::read(&params, &headers, method == Method::GET)?;
    request.conditions.live_channel_condition = selection.condition.take();
    if method == Method::GET {
        // Ditto takes `fields=` on the thing, attributes, features, a
        // feature and its (desired) properties; a single value has none.
        let fields = match resource {
            ThingResource::Thing
            | ThingResource::Attributes
            | ThingResource::Features
            | ThingResource::Feature(_)
            | ThingResource::FeatureProperties(_)
            | ThingResource::FeatureDesiredProperties(_) => request.fields.as_ref(),
            _ => None,
        };
        let retrieved = match twins
            .retrieve_thing(&caller, &thing_id, &resource, fields, &request.conditions)
            .await
        {
            Ok(retrieved) => retrieved,
            Err(refusal) => return Ok(refused(refusal)),
        };
        let mut response = reply::json(StatusCode::OK, &retrieved.value);
        with_etag(&mut response, retrieved.etag.as_ref());
        let metadata = retrieved.metadata.as_ref().map(ascii_json);
        if let Some(value) = metadata.and_then(|m| HeaderValue::from_str(&m).ok()) {
            response.headers_mut().insert(DITTO_METADATA, value);
        }
        if !twin_first {
            return Ok(response);
        }
        // A live retrieve with a timeout strategy goes to the device as it is.
        let matched = retrieved.live_channel_matched.unwrap_or(true);
        return live::select(&twins, &caller, &live_request, response, matched, selection.strategy)
            .await;
    }
    let value;
    let write = match method {
        Method::PUT => {
            check_media_type(&headers, false)?;
            value = reply::parse_body(&body)?;
            ThingWrite::Put(&value)
        }
        Method::PATCH => {
            check_media_type(&headers, true)?;
            value = reply::parse_body(&body)?;
            ThingWrite::Merge(&value)
        }
        Method::DELETE => {
            // Ditto routes no DELETE of the policy id.
            if resource == ThingResource::PolicyId {
                return Err(reply::method_not_allowed(&method));
            }
            ThingWrite::Delete
        }
        _ => return Err(reply::method_not_allowed(&method)),
    };
    let waiter = request.waiter(&twins)?;
    let outcome =
        match twins.write_thing(&caller, &thing_id, &resource, write, &request.conditions).await {
            Ok(outcome) => outcome,
            Err(refusal) => return Ok(refused(refusal)),
        };
    let (mut response, created) = match &outcome.written {
        ThingWritten::Created(value) => (reply::created(&headers, &uri, value), Some(value)),
        ThingWritten::Modified | ThingWritten::Deleted => (reply::no_content(), None),
    };
    with_etag(&mut response, outcome.etag.as_ref());
    Ok(request.acknowledged(response, created, waiter).await)
}

/// A header's text, for the metadata headers, whose values are JSON
/// that may hold any character: UTF-8 as curl sends it, else Latin-1 as
/// Python's and Java's clients encode a header.
fn header_unicode(headers: &HeaderMap, name: &str) -> Option<String> {
    let bytes = headers.get(name)?.as_bytes();
    Some(match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => bytes.iter().map(|&byte| char::from(byte)).collect(),
    })
}

/// `value` as JSON in ASCII alone, for a header: whatever else a string
/// holds escaped as `\uXXXX`, which any JSON reader reads back, where raw
/// UTF-8 would be read as Latin-1 by HTTP clients.
fn ascii_json(value: &Value) -> String {
    let text = value.to_string();
    let mut ascii = String::with_capacity(text.len());
    for character in text.chars() {
        if character.is_ascii() {
            ascii.push(character);
        } else {
            let mut units = [0u16; 2];
            for unit in character.encode_utf16(&mut units) {
                ascii.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    ascii
}

/// `GET /api/2/things/{thingId}/features/{featureId}/delta`: Ferry's
/// device-shadow delta (`shadow.rs`), not a Ditto route.
async fn delta(
    twins: &Twins,
    caller: &Caller,
    thing_id: &ThingId,
    feature_id: &str,
    method: &Method,
) -> Reply {
    if method != Method::GET {
        return Err(reply::method_not_allowed(method));
    }
    Ok(match twins.retrieve_delta(caller, thing_id, feature_id).await {
        Ok(delta) => reply::json(StatusCode::OK, &delta),
        Err(refusal) => refused(refusal),
    })
}
