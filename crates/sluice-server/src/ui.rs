//! `/ui`: the dashboard, hand-written HTML, CSS and JavaScript (ES modules, no framework, no
//! build step) under `crates/sluice-server/ui/`, embedded in the binary with `include_bytes!`,
//! so it works offline and nothing is fetched from anywhere but this server. The page talks to
//! the native API like any client (`/v1/...`).
//!
//! Adding a page (sagas, events, trace): write `ui/js/pages/<name>.js`, which
//! calls `registerPage` (see `ui/js/core.js`), import it in `ui/js/main.js`, and add its line to
//! [`ASSETS`]. The `/ui/...` routes serve exactly the files listed there.

use axum::Router;
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sluice_api::ErrorCode;
use utoipa::OpenApi;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::Path;

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// Every file of the dashboard: its path under `/ui/`, its type, its bytes.
const ASSETS: &[(&str, &str, &[u8])] = &[
    ("index.html", HTML, include_bytes!("../ui/index.html")),
    ("app.css", CSS, include_bytes!("../ui/app.css")),
    ("favicon.svg", SVG, include_bytes!("../ui/favicon.svg")),
    ("js/main.js", JS, include_bytes!("../ui/js/main.js")),
    ("js/core.js", JS, include_bytes!("../ui/js/core.js")),
    ("js/widgets.js", JS, include_bytes!("../ui/js/widgets.js")),
    ("js/chart.js", JS, include_bytes!("../ui/js/chart.js")),
    ("js/pages/overview.js", JS, include_bytes!("../ui/js/pages/overview.js")),
    ("js/pages/queues.js", JS, include_bytes!("../ui/js/pages/queues.js")),
    ("js/pages/queue.js", JS, include_bytes!("../ui/js/pages/queue.js")),
    ("js/pages/dlqs.js", JS, include_bytes!("../ui/js/pages/dlqs.js")),
    ("js/pages/topics.js", JS, include_bytes!("../ui/js/pages/topics.js")),
    ("js/pages/streams.js", JS, include_bytes!("../ui/js/pages/streams.js")),
    ("js/pages/jobs.js", JS, include_bytes!("../ui/js/pages/jobs.js")),
    ("js/pages/sagas.js", JS, include_bytes!("../ui/js/pages/sagas.js")),
    ("js/pages/events.js", JS, include_bytes!("../ui/js/pages/events.js")),
    ("js/pages/trace.js", JS, include_bytes!("../ui/js/pages/trace.js")),
    ("js/pages/alerts.js", JS, include_bytes!("../ui/js/pages/alerts.js")),
];

/// Only this server's own files and API: no CDN, no inline script, nothing from elsewhere.
const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                      connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

pub fn routes() -> Router<AppState> {
    Router::new().route("/ui", get(index)).route("/ui/", get(index)).route("/ui/{*path}", get(asset))
}

#[derive(OpenApi)]
#[openapi(paths(index), tags((name = "dashboard", description = "The web dashboard, served from the binary")))]
pub struct UiDoc;

fn serve(path: &str) -> Option<Response> {
    let (_, content_type, bytes) = ASSETS.iter().find(|(name, _, _)| *name == path)?;
    // `no-cache`: revalidated at every load, so that a new binary's dashboard shows at once.
    let headers = [
        (CONTENT_TYPE, *content_type),
        (CACHE_CONTROL, "no-cache"),
        (CONTENT_SECURITY_POLICY, POLICY),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    Some((StatusCode::OK, headers, *bytes).into_response())
}

#[utoipa::path(
    get, path = "/ui", tag = "dashboard",
    responses((status = 200, description = "The dashboard (HTML); its files are under `/ui/`", content_type = "text/html", body = String))
)]
pub async fn index() -> Response {
    serve("index.html").unwrap_or_else(|| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

pub async fn asset(Path(path): Path<String>) -> Result<Response, ApiError> {
    serve(&path).ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("the dashboard has no file /ui/{path}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_listed_once_and_loads_only_listed_modules() {
        let mut names: Vec<&str> = ASSETS.iter().map(|(name, _, _)| *name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ASSETS.len(), "an asset is listed twice");
        // Every module a script imports, and every file the page links, is served.
        for (name, _, bytes) in ASSETS {
            let text = std::str::from_utf8(bytes).expect("UTF-8 assets");
            for line in text.lines() {
                let Some(start) = line.find("from '").or_else(|| line.find("import '")) else { continue };
                let quoted = &line[start..];
                let Some(path) = quoted.split('\'').nth(1) else { continue };
                let base = name.rsplit_once('/').map_or("", |(dir, _)| dir);
                let resolved = resolve(base, path);
                assert!(names.contains(&resolved.as_str()), "{name} imports {path} ({resolved}), which is not served");
            }
            // The SVG namespace is a name, not an address anything is fetched from.
            let text = text.replace("http://www.w3.org/2000/svg", "");
            assert!(
                !text.contains("http://") && !text.contains("https://"),
                "{name} names an outside address; the dashboard must work offline"
            );
        }
    }

    fn resolve(base: &str, path: &str) -> String {
        let mut parts: Vec<&str> = if base.is_empty() { Vec::new() } else { base.split('/').collect() };
        for part in path.split('/') {
            match part {
                "." => {}
                ".." => {
                    parts.pop();
                }
                other => parts.push(other),
            }
        }
        parts.join("/")
    }
}
