//! `GET /api/2/openapi.json`: an OpenAPI 3 document of exactly the routes
//! `http.rs` serves. It is built from the table below rather than written
//! by hand as JSON, and a test checks the table against the router, so
//! the two cannot drift apart.

use serde_json::{json, Map, Value};

/// One path: its template, its methods, and what it is.
pub(super) struct Route {
    pub path: &'static str,
    pub methods: &'static [&'static str],
    pub summary: &'static str,
}

/// Every route under `/api/2`, in the order the document lists them.
pub(super) const ROUTES: &[Route] = &[
    Route {
        path: "/api/2/things",
        methods: &["get", "post"],
        summary: "Things by id (`ids=`), or a new thing with a generated id; with `Accept: text/event-stream`, Server-Sent Events of changes",
    },
    Route {
        path: "/api/2/things/{thingId}",
        methods: &["get", "put", "patch", "delete"],
        summary: "A thing; with `Accept: text/event-stream` (here and below), its changes as Server-Sent Events",
    },
    Route {
        path: "/api/2/things/{thingId}/policyId",
        methods: &["get", "put"],
        summary: "The id of the thing's policy",
    },
    Route {
        path: "/api/2/things/{thingId}/definition",
        methods: &["get", "put", "patch", "delete"],
        summary: "The thing's definition",
    },
    Route {
        path: "/api/2/things/{thingId}/attributes",
        methods: &["get", "put", "patch", "delete"],
        summary: "All attributes",
    },
    Route {
        path: "/api/2/things/{thingId}/attributes/{attributePath}",
        methods: &["get", "put", "patch", "delete"],
        summary: "One attribute, at any depth",
    },
    Route {
        path: "/api/2/things/{thingId}/features",
        methods: &["get", "put", "patch", "delete"],
        summary: "All features",
    },
    Route {
        path: "/api/2/things/{thingId}/features/{featureId}",
        methods: &["get", "put", "patch", "delete"],
        summary: "One feature",
    },
    Route {
        path: "/api/2/things/{thingId}/features/{featureId}/definition",
        methods: &["get", "put", "patch", "delete"],
        summary: "A feature's definition",
    },
    Route {
        path: "/api/2/things/{thingId}/features/{featureId}/properties",
        methods: &["get", "put", "patch", "delete"],
        summary: "A feature's properties",
    },
    Route {
        path: "/api/2/things/{thingId}/features/{featureId}/properties/{propertyPath}",
        methods: &["get", "put", "patch", "delete"],
        summary: "One property, at any depth",
    },
    Route {
        path: "/api/2/things/{thingId}/features/{featureId}/desiredProperties",
        methods: &["get", "put", "patch", "delete"],
        summary: "A feature's desired properties",
    },
    Route {
        path: "/api/2/things/{thingId}/features/{featureId}/desiredProperties/{propertyPath}",
        methods: &["get", "put", "patch", "delete"],
        summary: "One desired property, at any depth",
    },
    Route {
        path: "/api/2/things/{thingId}/inbox/messages/{messageSubject}",
        methods: &["post", "get"],
        summary: "A live message to the thing, answered by the device (GET with `correlation-id`: the outcome of a `qos=1` message, Ferry's extension)",
    },
    Route {
        path: "/api/2/things/{thingId}/inbox/claim",
        methods: &["post"],
        summary: "A claim message to the thing: needs no WRITE on its messages; the device answers whether it grants access",
    },
    Route {
        path: "/api/2/things/{thingId}/outbox/messages/{messageSubject}",
        methods: &["post"],
        summary: "A live message from the thing",
    },
    Route {
        path: "/api/2/things/{thingId}/features/{featureId}/inbox/messages/{messageSubject}",
        methods: &["post"],
        summary: "A live message to a feature",
    },
    Route {
        path: "/api/2/things/{thingId}/features/{featureId}/outbox/messages/{messageSubject}",
        methods: &["post"],
        summary: "A live message from a feature",
    },
    Route {
        path: "/api/2/things/{thingId}/features/{featureId}/delta",
        methods: &["get"],
        summary:
            "Ferry's device-shadow delta: the desired properties that differ from the reported ones",
    },
    Route {
        path: "/api/2/policies/{policyId}",
        methods: &["get", "put", "delete"],
        summary: "A policy",
    },
    Route {
        path: "/api/2/policies/{policyId}/entries",
        methods: &["get", "put"],
        summary: "All entries of a policy",
    },
    Route {
        path: "/api/2/policies/{policyId}/entries/{label}",
        methods: &["get", "put", "delete"],
        summary: "One entry",
    },
    Route {
        path: "/api/2/policies/{policyId}/entries/{label}/subjects",
        methods: &["get", "put"],
        summary: "An entry's subjects",
    },
    Route {
        path: "/api/2/policies/{policyId}/entries/{label}/subjects/{subjectId}",
        methods: &["get", "put", "delete"],
        summary: "One subject",
    },
    Route {
        path: "/api/2/policies/{policyId}/entries/{label}/resources",
        methods: &["get", "put"],
        summary: "An entry's resources",
    },
    Route {
        path: "/api/2/policies/{policyId}/entries/{label}/resources/{resourcePath}",
        methods: &["get", "put", "delete"],
        summary: "One resource (`thing:/…`, `policy:/…`, `message:/…`)",
    },
    Route {
        path: "/api/2/policies/{policyId}/imports",
        methods: &["get", "put", "delete"],
        summary: "The policies whose entries this one imports",
    },
    Route {
        path: "/api/2/policies/{policyId}/imports/{importedPolicyId}",
        methods: &["get", "put", "delete"],
        summary: "One import: `{}` brings in the imported policy's `implicit` entries, `{\"entries\": [labels]}` its listed `explicit` ones too",
    },
    Route {
        path: "/api/2/policies/{policyId}/imports/{importedPolicyId}/entries",
        methods: &["get", "put"],
        summary: "The labels of the `explicit` entries an import brings in",
    },
    Route {
        path: "/api/2/search/things",
        methods: &["get", "post"],
        summary: "Things matching an RQL filter, paged (POST: the same parameters as a form)",
    },
    Route {
        path: "/api/2/search/things/count",
        methods: &["get", "post"],
        summary: "How many things match an RQL filter",
    },
    Route {
        path: "/api/2/connections",
        methods: &["get", "post"],
        summary: "Connections (`ids-only=true`: their ids), or a new one with a generated id; for `[twins] connection_subjects`",
    },
    Route {
        path: "/api/2/connections/{connectionId}",
        methods: &["get", "put", "delete"],
        summary: "A connection: `http-push`, `kafka`, `mqtt` or `mqtt-5`, with targets on twin events (and sources for kafka)",
    },
    Route {
        path: "/api/2/connections/{connectionId}/status",
        methods: &["get"],
        summary: "Whether the connection runs, and its last failure",
    },
    Route {
        path: "/api/2/connections/{connectionId}/metrics",
        methods: &["get"],
        summary: "What the connection dispatched, filtered, published, failed and dropped",
    },
    Route {
        path: "/api/2/connections/{connectionId}/command",
        methods: &["post"],
        summary: "`connectivity.commands:openConnection|closeConnection|resetConnectionMetrics` as text",
    },
    Route { path: "/api/2/openapi.json", methods: &["get"], summary: "This document" },
];

/// The document.
pub(super) fn document() -> Value {
    let mut paths = Map::new();
    for route in ROUTES {
        let mut item = Map::new();
        for method in route.methods {
            item.insert((*method).to_owned(), operation(route, method));
        }
        paths.insert(route.path.to_owned(), Value::Object(item));
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Ferry twins: Eclipse Ditto HTTP API v2",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The parts of Ditto's HTTP API v2 that Ferry serves (docs/twins.md). Bodies, status codes and error bodies are Ditto's.",
        },
        "components": {
            "securitySchemes": {
                "basic": {"type": "http", "scheme": "basic"},
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
            },
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["status", "error", "message"],
                    "properties": {
                        "status": {"type": "integer"},
                        "error": {"type": "string", "example": "things:thing.notfound"},
                        "message": {"type": "string"},
                        "description": {"type": "string"},
                        "href": {"type": "string"},
                    },
                },
            },
        },
        "security": [{"basic": []}, {"bearer": []}],
        "paths": paths,
    })
}

fn operation(route: &Route, method: &str) -> Value {
    let mut parameters: Vec<Value> = path_parameters(route.path);
    let query = |name: &str, description: &str| json!({"name": name, "in": "query", "required": false, "schema": {"type": "string"}, "description": description});
    let header = |name: &str, description: &str| json!({"name": name, "in": "header", "required": false, "schema": {"type": "string"}, "description": description});
    let is_search = route.path.starts_with("/api/2/search");
    let is_thing = route.path.starts_with("/api/2/things/");
    if is_search {
        parameters.push(query("filter", "An RQL filter"));
        parameters.push(query("namespaces", "Comma-separated namespaces to search in"));
        if !route.path.ends_with("/count") {
            parameters
                .push(query("option", "sort(+a,-b), size(n), cursor(…), limit(offset,count)"));
            parameters.push(query("fields", "The fields of each thing to return"));
        }
    } else if route.path == "/api/2/things" {
        if method == "get" {
            parameters.push(query("ids", "Comma-separated thing ids"));
            parameters.push(query("fields", "The fields of each thing to return"));
        } else {
            parameters.push(query("namespace", "The namespace of the generated id"));
        }
    } else if route.path == "/api/2/connections" && method == "get" {
        parameters.push(query("ids-only", "true: only the connections' ids"));
    } else if is_thing {
        if method == "get" {
            parameters.push(query(
                "fields",
                "The fields to return, e.g. attributes/location,features/*/properties",
            ));
        }
        parameters.push(query("condition", "An RQL condition the thing must meet (412 otherwise)"));
        parameters.push(header("If-Match", "An entity tag, or *"));
        parameters.push(header("If-None-Match", "An entity tag, or * (create only)"));
        if method == "put" || method == "patch" {
            parameters.push(header(
                "if-equal",
                "update (default), skip (412 when nothing would change) or skip-minimizing-merge",
            ));
        }
        if method == "get" {
            parameters.push(query(
                "live-channel-condition",
                "An RQL condition: when the twin meets it, the device answers the retrieve over the live channel (headers `channel` and `live-channel-condition-matched` say which answered)",
            ));
            parameters.push(header(
                "live-channel-timeout-strategy",
                "fail (default: 408) or use-twin: the answer when the device does not answer a live retrieve in time",
            ));
            parameters.push(header(
                "get-metadata",
                "Metadata paths relative to the resource (`*` for all, `*/key` at every leaf), answered in the response header `ditto-metadata`",
            ));
        } else {
            if method != "delete" {
                parameters.push(header(
                    "put-metadata",
                    "A JSON array of {\"key\", \"value\"}: metadata set relative to the resource (`*/key` at every leaf written)",
                ));
            }
            parameters.push(header(
                "delete-metadata",
                "Metadata paths relative to the resource to remove (`*` for all)",
            ));
        }
        parameters.push(header("response-required", "false: answer 202 without a body"));
        if method != "get" {
            parameters.push(header(
                "requested-acks",
                "Acknowledgement labels, comma-separated: twin-persisted (the default), search-persisted, custom ones; more than twin-persisted answers the aggregated acknowledgements (200, or 424 when one failed)",
            ));
            parameters.push(header(
                "timeout",
                "How long to wait for the acknowledgements (default 60s, at most 60s; 0 with none requested)",
            ));
        }
    }
    let mut responses = Map::new();
    let error = json!({"description": "Ditto's error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
    match method {
        "get" => {
            responses.insert("200".into(), json!({"description": "The resource, as the caller may see it", "content": {"application/json": {}}}));
            if is_thing {
                responses.insert("304".into(), json!({"description": "If-None-Match matched"}));
            }
        }
        "put" => {
            responses.insert("201".into(), json!({"description": "Created; the body is what was created", "content": {"application/json": {}}}));
            responses.insert("204".into(), json!({"description": "Modified"}));
        }
        "post" if route.path == "/api/2/things" => {
            responses.insert("201".into(), json!({"description": "Created; Location names the thing", "content": {"application/json": {}}}));
        }
        "post" if route.path == "/api/2/connections" => {
            responses.insert("201".into(), json!({"description": "Created; Location names the connection", "content": {"application/json": {}}}));
        }
        "post" if route.path.ends_with("/command") => {
            responses.insert("204".into(), json!({"description": "Done"}));
        }
        "post" => {
            responses.insert(
                "200".into(),
                json!({"description": "As the GET form", "content": {"application/json": {}}}),
            );
        }
        _ => {
            responses.insert("204".into(), json!({"description": "Done"}));
        }
    }
    if is_thing && method != "get" {
        responses
            .insert("202".into(), json!({"description": "Done, with response-required=false"}));
        responses.insert("424".into(), json!({"description": "A requested acknowledgement failed or timed out; the body has each one's status", "content": {"application/json": {}}}));
    }
    for status in ["400", "401", "403", "404", "412", "413"] {
        responses.insert(status.into(), error.clone());
    }
    let mut operation =
        json!({"summary": route.summary, "parameters": parameters, "responses": responses});
    let creates = matches!(route.path, "/api/2/things" | "/api/2/connections");
    if matches!(method, "put" | "patch") || (method == "post" && creates) {
        let content_type =
            if method == "patch" { "application/merge-patch+json" } else { "application/json" };
        operation["requestBody"] = json!({"required": true, "content": {content_type: {}}});
    }
    if method == "post" && route.path.ends_with("/command") {
        operation["requestBody"] = json!({"required": true, "content": {"text/plain": {}}});
    }
    if method == "post" && is_search {
        operation["requestBody"] =
            json!({"required": false, "content": {"application/x-www-form-urlencoded": {}}});
    }
    operation
}

fn path_parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|level| level.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect()
}
