//! The web console's assets, built from `console/` by esbuild and committed
//! in `console/dist`, embedded here at compile time: building Ferry needs
//! no npm, and a running Ferry serves its console offline.
//!
//! The assets are static and served to anyone (they hold no data); every
//! call the console makes for data goes through the admin API's
//! authentication. The Content-Security-Policy lets the page load only
//! its own script, style and API, so markup injected into a page (a topic,
//! a payload) could run nothing.

use axum::extract::{Path, Request};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// One embedded file: its bytes, content type and the hash its entity
/// tag is made of.
struct Asset {
    bytes: &'static [u8],
    content_type: &'static str,
    hash: u64,
}

macro_rules! asset {
    ($file:literal, $content_type:literal) => {{
        const BYTES: &[u8] = include_bytes!(concat!("../../../console/dist/", $file));
        Asset { bytes: BYTES, content_type: $content_type, hash: fnv1a(BYTES) }
    }};
}

const INDEX: Asset = asset!("index.html", "text/html; charset=utf-8");
const SCRIPT: Asset = asset!("app.js", "text/javascript; charset=utf-8");
const STYLE: Asset = asset!("app.css", "text/css; charset=utf-8");
const ICON: Asset = asset!("favicon.svg", "image/svg+xml");

/// `default-src 'self'` and nothing looser: the bundle is one file of the
/// same origin, uPlot styles through the CSSOM (which CSP allows), and
/// charts draw on canvases.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'; object-src 'none'";

/// The file names carry no hash, so a browser must ask again each time;
/// the entity tag makes that a 304.
const CACHE_CONTROL: &str = "no-cache";

/// The console's routes: `/` (the one page; `#/…` routes inside it) and
/// `/console/app.js`, `/console/app.css`, `/console/favicon.svg`.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|headers: HeaderMap| async move { serve(&INDEX, &headers) }))
        .route("/console/{file}", get(file))
}

async fn file(Path(name): Path<String>, headers: HeaderMap) -> Response {
    match name.as_str() {
        "app.js" => serve(&SCRIPT, &headers),
        "app.css" => serve(&STYLE, &headers),
        "favicon.svg" => serve(&ICON, &headers),
        "index.html" => serve(&INDEX, &headers),
        _ => crate::http::error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no console file {name}"),
        ),
    }
}

/// FNV-1a of an asset's bytes, at compile time: its strong entity tag,
/// which changes when a rebuilt binary carries other assets.
const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash = (hash ^ bytes[i] as u64).wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    hash
}

fn serve(asset: &Asset, request: &HeaderMap) -> Response {
    let tag = format!("\"{:016x}\"", asset.hash);
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.split(',').any(|candidate| candidate.trim() == tag));
    let headers = [
        (header::CONTENT_TYPE, asset.content_type),
        (header::CACHE_CONTROL, CACHE_CONTROL),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
    ];
    if fresh {
        return (StatusCode::NOT_MODIFIED, headers, [(header::ETAG, tag)]).into_response();
    }
    (headers, [(header::ETAG, tag)], asset.bytes).into_response()
}

/// Takes the `WWW-Authenticate` challenge off a 401 answering a request a
/// script made (`Sec-Fetch-Mode` other than `navigate`, as `fetch` and
/// `EventSource` send): a browser answers a Basic challenge to a script
/// with its own password dialog, over the console's login page, and
/// holds the request until it is closed. `curl -u` and other clients
/// send no `Sec-Fetch-Mode` and keep the challenge; so does a page opened
/// in the address bar.
pub async fn no_password_dialog(request: Request, next: Next) -> Response {
    let scripted =
        request.headers().get("sec-fetch-mode").is_some_and(|mode| mode.as_bytes() != b"navigate");
    let mut response = next.run(request).await;
    if scripted && response.status() == StatusCode::UNAUTHORIZED {
        response.headers_mut().remove(header::WWW_AUTHENTICATE);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    /// Every file the page names is one this module serves, so a renamed
    /// asset in `console/build.mjs` cannot leave the page without it.
    #[tokio::test]
    async fn the_page_names_only_files_that_are_served() {
        let html = std::str::from_utf8(INDEX.bytes).unwrap();
        let named: Vec<&str> =
            html.split(['"', '\'']).filter_map(|part| part.strip_prefix("/console/")).collect();
        assert_eq!(named, ["favicon.svg", "app.css", "app.js"]);
        for name in named {
            let response = file(Path(name.to_owned()), HeaderMap::new()).await;
            assert_eq!(response.status(), StatusCode::OK, "{name}");
        }
    }
}
