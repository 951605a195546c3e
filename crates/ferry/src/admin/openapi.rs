//! `GET /api/v1/openapi.json`: an OpenAPI 3 document of exactly the
//! admin API, built from the one table below (`OPERATIONS`) rather than
//! written as JSON by hand. The integration tests validate it and call
//! every operation it lists.

use axum::Json;
use serde_json::{json, Map, Value};

/// One operation: a path and a method.
struct Operation {
    path: &'static str,
    method: &'static str,
    summary: &'static str,
    /// Query parameters: name and description.
    query: &'static [(&'static str, &'static str)],
    /// The schema of the JSON body, if it takes one.
    body: Option<&'static str>,
    /// The success status and the schema of its JSON (`None`: no body;
    /// `Some("stream")`: Server-Sent Events).
    ok: (&'static str, Option<&'static str>),
    /// Error statuses beyond 401 and 403, which every guarded operation
    /// can answer.
    errors: &'static [&'static str],
    /// False for the two operations open to anyone.
    guarded: bool,
}

const PAGING: [(&str, &str); 2] = [
    ("page", "The page, from 1 (default 1)"),
    ("limit", "Items per page, 1 to 1000 (default 100)"),
];

const fn op(
    path: &'static str,
    method: &'static str,
    summary: &'static str,
    ok: (&'static str, Option<&'static str>),
) -> Operation {
    Operation { path, method, summary, query: &[], body: None, ok, errors: &[], guarded: true }
}

/// Every operation under `/api/v1`, in the order the document lists them.
const OPERATIONS: &[Operation] = &[
    Operation {
        body: Some("Login"),
        errors: &["400"],
        guarded: false,
        ..op("/api/v1/login", "post", "Log in: answers a session cookie (ferry_session)", ("200", Some("Me")))
    },
    op("/api/v1/logout", "post", "End the login session of the request's cookie", ("204", None)),
    op("/api/v1/me", "get", "Who the request is from (401 when not logged in)", ("200", Some("Me"))),
    op("/api/v1/info", "get", "Version, start time, uptime, listeners, configuration summary", ("200", Some("Info"))),
    Operation {
        query: &[
            ("client_id_prefix", "Client ids that start with this"),
            ("username", "This user name"),
            ("address", "Peer addresses (ip:port) that start with this"),
            ("protocol", "3.1, 3.1.1 or 5"),
            PAGING[0],
            PAGING[1],
        ],
        errors: &["400"],
        ..op("/api/v1/clients", "get", "Connected clients with their figures", ("200", Some("ClientPage")))
    },
    Operation {
        errors: &["404"],
        ..op("/api/v1/clients/{client_id}", "get", "One connected client and its subscriptions", ("200", Some("ClientDetail")))
    },
    Operation {
        query: &[("reason", "Sent to an MQTT 5 client with DISCONNECT 0x98, and logged")],
        errors: &["400", "404"],
        ..op("/api/v1/clients/{client_id}", "delete", "Disconnect a client (MQTT 5: DISCONNECT 0x98 Administrative action)", ("204", None))
    },
    Operation {
        query: &[
            ("client_id_prefix", "Client ids that start with this"),
            ("state", "online or offline"),
            PAGING[0],
            PAGING[1],
        ],
        errors: &["400"],
        ..op("/api/v1/sessions", "get", "Sessions, online and offline", ("200", Some("SessionPage")))
    },
    Operation {
        errors: &["404"],
        ..op("/api/v1/sessions/{client_id}", "get", "One session", ("200", Some("Session")))
    },
    Operation {
        errors: &["404", "409"],
        ..op("/api/v1/sessions/{client_id}", "delete", "Delete an offline session (409 while its client is connected)", ("204", None))
    },
    Operation {
        query: &[
            ("client_id", "This client's subscriptions"),
            ("filter", "Subscriptions through exactly this filter"),
            PAGING[0],
            PAGING[1],
        ],
        errors: &["400"],
        ..op("/api/v1/subscriptions", "get", "Subscriptions, by client and filter", ("200", Some("SubscriptionPage")))
    },
    Operation {
        query: &[("filter", "A topic filter (default #)"), PAGING[0], PAGING[1]],
        errors: &["400"],
        ..op("/api/v1/retained", "get", "Retained messages whose topics a filter matches", ("200", Some("RetainedPage")))
    },
    Operation {
        errors: &["404"],
        ..op("/api/v1/retained/{topic}", "get", "The retained message of a topic (the rest of the path, slashes and all)", ("200", Some("Message")))
    },
    Operation {
        errors: &["404"],
        ..op("/api/v1/retained/{topic}", "delete", "Delete the retained message of a topic", ("204", None))
    },
    Operation {
        body: Some("Publish"),
        errors: &["400", "503"],
        ..op("/api/v1/publish", "post", "Publish a message as the administrator (no ACL)", ("200", Some("Published")))
    },
    op("/api/v1/routes", "get", "The routes in force", ("200", Some("Routes"))),
    op("/api/v1/endpoints", "get", "Every endpoint's state, queue and figures", ("200", Some("Endpoints"))),
    Operation {
        errors: &["404"],
        ..op("/api/v1/endpoints/{name}/pause", "post", "Stop sending to an endpoint; messages keep queuing", ("204", None))
    },
    Operation {
        errors: &["404"],
        ..op("/api/v1/endpoints/{name}/resume", "post", "Send to a paused endpoint again", ("204", None))
    },
    Operation {
        errors: &["422"],
        ..op("/api/v1/reload", "post", "Read users, keys, the ACL, certificates, routes and endpoints again (as SIGHUP)", ("200", Some("Reloaded")))
    },
    op("/api/v1/overview", "get", "Counters since start and current sizes", ("200", Some("Overview"))),
    Operation {
        errors: &["503"],
        ..op("/api/v1/overview/stream", "get", "The overview every second, as Server-Sent Events (event: overview)", ("200", Some("stream")))
    },
    Operation {
        query: &[("filter", "The topic filter to stream (required)")],
        errors: &["400", "503"],
        ..op("/api/v1/topics/stream", "get", "Messages a filter matches as they are published, as Server-Sent Events (event: message, event: dropped)", ("200", Some("stream")))
    },
    Operation { guarded: false, ..op("/api/v1/openapi.json", "get", "This document", ("200", None)) },
];

pub(super) async fn serve() -> Json<Value> {
    Json(document())
}

fn document() -> Value {
    let mut paths = Map::new();
    for operation in OPERATIONS {
        let item = paths.entry(operation.path).or_insert_with(|| Value::Object(Map::new()));
        item[operation.method] = describe(operation);
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Ferry admin API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Operate a running Ferry: clients, sessions, subscriptions, retained messages, publishing, routes and endpoints, live figures (docs/operations.md). Errors are {status, error, message}.",
        },
        "components": {
            "securitySchemes": {
                "basic": {"type": "http", "scheme": "basic"},
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": "ferry_session"},
            },
            "schemas": schemas(),
        },
        "security": [{"basic": []}, {"bearer": []}, {"cookie": []}],
        "paths": paths,
    })
}

fn describe(operation: &Operation) -> Value {
    let mut parameters: Vec<Value> = operation
        .path
        .split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect();
    for (name, description) in operation.query {
        let required = operation.path == "/api/v1/topics/stream";
        parameters.push(json!({"name": name, "in": "query", "required": required, "schema": {"type": "string"}, "description": description}));
    }
    let (status, schema) = operation.ok;
    let mut responses = Map::new();
    let success = match schema {
        None if operation.path.ends_with("openapi.json") => {
            json!({"description": "The OpenAPI document", "content": {"application/json": {}}})
        }
        None => json!({"description": "Done"}),
        Some("stream") => {
            json!({"description": "Server-Sent Events", "content": {"text/event-stream": {"schema": {"type": "string"}}}})
        }
        Some(name) => {
            json!({"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{name}")}}}})
        }
    };
    responses.insert(status.into(), success);
    let error = json!({"description": "An error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
    let mut errors: Vec<&str> = operation.errors.to_vec();
    // Login refuses a wrong password and a user who is no administrator.
    if operation.guarded || operation.body.is_some() {
        errors.extend(["401", "403"]);
    }
    for status in errors {
        responses.insert(status.into(), error.clone());
    }
    let mut described =
        json!({"summary": operation.summary, "parameters": parameters, "responses": responses});
    if let Some(body) = operation.body {
        described["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{body}")}}}});
    }
    if !operation.guarded {
        described["security"] = json!([]);
    }
    described
}

/// A JSON Schema object of `properties`, all required unless named in
/// `optional`.
fn object(properties: Value, optional: &[&str]) -> Value {
    let required: Vec<&String> = properties
        .as_object()
        .map(|map| map.keys().filter(|key| !optional.contains(&key.as_str())).collect())
        .unwrap_or_default();
    let mut schema = json!({"type": "object", "properties": properties});
    // OpenAPI 3.0 wants at least one name in a `required` list.
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    schema
}

fn page_of(item: &str) -> Value {
    object(
        json!({
            "data": {"type": "array", "items": {"$ref": format!("#/components/schemas/{item}")}},
            "meta": {"$ref": "#/components/schemas/Meta"},
        }),
        &[],
    )
}

fn schemas() -> Value {
    let integer = json!({"type": "integer"});
    let string = json!({"type": "string"});
    let boolean = json!({"type": "boolean"});
    let time = json!({"type": "string", "format": "date-time"});
    let nullable = |schema: &Value| {
        let mut schema = schema.clone();
        schema["nullable"] = true.into();
        schema
    };
    let client = |subscriptions: Value| {
        object(
            json!({
                "client_id": string, "username": nullable(&string), "address": string,
                "protocol": {"type": "string", "enum": ["3.1", "3.1.1", "5"]},
                "keep_alive": integer, "clean_start": boolean, "connected_at": time,
                "subscriptions": subscriptions, "inflight": integer, "queued": integer,
                "bytes_in": integer, "bytes_out": integer, "messages_in": integer,
                "messages_out": integer, "listener": string,
            }),
            &[],
        )
    };
    let entries: Vec<(&str, Value)> = vec![
        ("Error", object(json!({"status": integer, "error": string, "message": string}), &[])),
        ("Meta", object(json!({"page": integer, "limit": integer, "count": integer}), &[])),
        ("Login", object(json!({"username": string, "password": string}), &[])),
        ("Me", object(json!({"username": string}), &[])),
        (
            "Info",
            object(
                json!({
                    "version": string, "started_at": time, "uptime_seconds": integer,
                    "listeners": {"type": "array", "items": object(json!({
                        "kind": {"type": "string", "enum": ["mqtt", "mqtts", "ws", "wss", "http", "https"]},
                        "address": string,
                    }), &[])},
                    "config": {"type": "object"},
                }),
                &[],
            ),
        ),
        ("Client", client(integer.clone())),
        (
            "ClientDetail",
            client(
                json!({"type": "array", "items": {"$ref": "#/components/schemas/Subscription"}}),
            ),
        ),
        ("ClientPage", page_of("Client")),
        (
            "Subscription",
            object(
                json!({
                    "client_id": string, "filter": string, "qos": {"type": "integer", "enum": [0, 1, 2]},
                    "no_local": boolean, "retain_as_published": boolean,
                    "retain_handling": {"type": "integer", "enum": [0, 1, 2]},
                }),
                &[],
            ),
        ),
        ("SubscriptionPage", page_of("Subscription")),
        (
            "Session",
            object(
                json!({
                    "client_id": string, "online": boolean, "expiry_interval": integer,
                    "queued": integer, "subscriptions": integer,
                }),
                &[],
            ),
        ),
        ("SessionPage", page_of("Session")),
        (
            "Properties",
            object(
                json!({
                    "content_type": string, "payload_format_indicator": integer,
                    "message_expiry_interval": integer, "response_topic": string,
                    "correlation_data_base64": string,
                    "user_properties": {"type": "object", "additionalProperties": {"type": "string"}},
                }),
                &[
                    "content_type",
                    "payload_format_indicator",
                    "message_expiry_interval",
                    "response_topic",
                    "correlation_data_base64",
                    "user_properties",
                ],
            ),
        ),
        (
            "Message",
            object(
                json!({
                    "topic": string, "qos": integer, "retain": boolean,
                    "payload": nullable(&string), "payload_base64": string, "size": integer,
                    "properties": {"$ref": "#/components/schemas/Properties"},
                }),
                &["properties"],
            ),
        ),
        ("RetainedPage", page_of("Message")),
        (
            "Publish",
            object(
                json!({
                    "topic": string, "payload": string, "payload_base64": string,
                    "qos": {"type": "integer", "enum": [0, 1, 2]}, "retain": boolean,
                    "properties": {"$ref": "#/components/schemas/Properties"},
                }),
                &["payload", "payload_base64", "qos", "retain", "properties"],
            ),
        ),
        ("Published", object(json!({"delivered_to": integer}), &[])),
        (
            "Routes",
            object(
                json!({"data": {"type": "array", "items": object(json!({
            "name": string, "route": string, "filter": string, "endpoint": string,
            "priority": integer, "ttl_seconds": nullable(&integer),
        }), &[])}}),
                &[],
            ),
        ),
        (
            "Endpoints",
            object(
                json!({"data": {"type": "array", "items": object(json!({
            "name": string, "type": nullable(&string),
            "state": {"type": "string", "enum": ["connected", "backoff", "paused", "removed"]},
            "queued_messages": integer,
            "queued_by_priority": {"type": "array", "items": integer},
            "queued_bytes": integer, "oldest_age_seconds": {"type": "number", "nullable": true},
            "routed": integer, "sent": integer,
            "dropped": {"type": "object", "additionalProperties": integer},
            "backoff_until": nullable(&time),
        }), &[])}}),
                &[],
            ),
        ),
        ("Reloaded", object(json!({"status": string, "loaded": {"type": "object"}}), &[])),
        (
            "Overview",
            object(
                json!({
                    "time": time, "connections": integer, "sessions_online": integer,
                    "sessions_offline": integer, "subscriptions": integer, "retained": integer,
                    "messages_in": integer, "messages_out": integer, "bytes_in": integer,
                    "bytes_out": integer, "dropped": integer, "queued_messages": integer,
                    "queued_bytes": integer,
                    "latency": object(json!({
                        "p50": {"type": "number", "nullable": true},
                        "p90": {"type": "number", "nullable": true},
                        "p99": {"type": "number", "nullable": true},
                    }), &[]),
                    "disk_free_bytes": nullable(&integer), "log_bytes": nullable(&integer),
                }),
                &[],
            ),
        ),
    ];
    Value::Object(entries.into_iter().map(|(name, schema)| (name.to_owned(), schema)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_is_in_the_document_once() {
        let document = document();
        let mut count = 0;
        for (path, item) in document["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                assert!(
                    OPERATIONS.iter().any(|op| op.path == path && op.method == method),
                    "{method} {path}"
                );
                count += 1;
            }
        }
        assert_eq!(count, OPERATIONS.len(), "an operation listed twice");
    }
}
