//! The classic async request-reply web app, over Sluice's jobs: `POST /reports` answers at once
//! with `{job_id, status: "pending"}`, a worker in the same process builds the report, and
//! `GET /reports/{id}` answers `{job_id, status: "completed", report}` once it is done.
//!
//! ```sh
//! sluice serve &                                   # Sluice on 127.0.0.1:9324
//! cargo run -p sluice-client --example reports     # this app on 127.0.0.1:3000
//! curl -s localhost:3000/reports -H 'content-type: application/json' -d '{"month": "2024-05"}'
//! # {"job_id":"0192…","status":"pending"}
//! curl -s localhost:3000/reports/0192…
//! # {"job_id":"0192…","status":"completed","report":{"month":"2024-05","orders":31,"revenue_cents":…}}
//! ```
//!
//! `SLUICE_SERVER` (default `http://127.0.0.1:9324`) and `REPORTS_ADDR` (default
//! `127.0.0.1:3000`) move either end. The app keeps no state of its own: the job is the
//! request's state, and Sluice keeps the result for the job's `result_ttl_ms`.

use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sluice_client::sluice_api::EnqueueJobRequest;
use sluice_client::{Client, JobContext, JobFailure, Worker};

const QUEUE: &str = "reports";
const JOB_TYPE: &str = "monthly_report";

/// What `POST /reports` takes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReportRequest {
    pub month: String,
}

/// What the worker builds (a stand-in for a slow query).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub month: String,
    pub orders: u32,
    pub revenue_cents: u64,
}

/// The app's routes over a Sluice client.
pub fn app(client: Client) -> Router {
    Router::new().route("/reports", post(create)).route("/reports/{id}", get(show)).with_state(client)
}

fn error(status: StatusCode, message: String) -> Response {
    (status, axum::Json(json!({ "error": message }))).into_response()
}

async fn create(State(client): State<Client>, axum::Json(request): axum::Json<ReportRequest>) -> Response {
    let job = EnqueueJobRequest {
        queue: QUEUE.into(),
        job_type: JOB_TYPE.into(),
        payload: json!(request),
        // The same month asked twice within an hour is the same report.
        unique_key: Some(request.month.clone()),
        unique_for_ms: Some(3_600_000),
        ..Default::default()
    };
    match client.enqueue_job(&job).await {
        Ok(enqueued) => (StatusCode::ACCEPTED, axum::Json(json!({ "job_id": enqueued.job.id, "status": "pending" })))
            .into_response(),
        Err(e) => error(StatusCode::BAD_GATEWAY, e.to_string()),
    }
}

async fn show(State(client): State<Client>, Path(id): Path<String>) -> Response {
    let job = match client.get_job(&id, None).await {
        Ok(job) => job,
        Err(e) if e.status() == Some(404) => return error(StatusCode::NOT_FOUND, format!("no report {id}")),
        Err(e) => return error(StatusCode::BAD_GATEWAY, e.to_string()),
    };
    // Queued, running, or failed and about to be retried: still pending for the user.
    let body = match job.status.as_str() {
        "succeeded" => json!({ "job_id": job.id, "status": "completed", "report": job.result }),
        "dead" | "cancelled" => json!({ "job_id": job.id, "status": "failed", "error": job.error }),
        _ => json!({ "job_id": job.id, "status": "pending", "progress": job.progress }),
    };
    axum::Json(body).into_response()
}

/// Builds a report: the slow part, with progress on the way.
async fn build(ctx: JobContext) -> Result<serde_json::Value, JobFailure> {
    let request: ReportRequest = ctx.payload().map_err(|e| JobFailure::permanent(format!("bad payload: {e}")))?;
    let days = 31u32;
    let mut revenue_cents = 0u64;
    for day in 1..=days {
        if ctx.is_cancelled() {
            return Err(JobFailure::retry("cancelled"));
        }
        revenue_cents += u64::from(day) * 1_250;
        ctx.set_progress(json!({ "days_done": day, "days": days }));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(json!(Report { month: request.month, orders: days, revenue_cents }))
}

/// The worker that builds reports.
pub fn worker(client: Client) -> Worker {
    Worker::builder(client).queue(QUEUE).handler(JOB_TYPE, build).concurrency(4).lease(Duration::from_secs(10)).build()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sluice = std::env::var("SLUICE_SERVER").unwrap_or_else(|_| "http://127.0.0.1:9324".into());
    let addr = std::env::var("REPORTS_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let client = Client::new(&sluice)?;
    let worker = worker(client.clone());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let working = tokio::spawn(async move {
        let mut stopped = stopped;
        worker
            .run(async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await
    });
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("reports app on http://{} (Sluice at {sluice})", listener.local_addr()?);
    axum::serve(listener, app(client))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    let _ = stop.send(true);
    let report = working.await?;
    println!("worker stopped: {report:?}");
    Ok(())
}

/// The example end to end: a Sluice server in this process on port 0 (embedded store), the app
/// on port 0 and its worker; a report is asked for, pending at once, then completed.
#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;

    async fn json_of(response: reqwest::Response) -> (u16, serde_json::Value) {
        let status = response.status().as_u16();
        (status, response.json().await.expect("JSON"))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn post_answers_pending_and_get_answers_completed_with_the_report() {
        let dir = tempfile::tempdir().unwrap();
        let config = sluice_embedded::EmbeddedConfig {
            data_dir: dir.path().to_path_buf(),
            durability: sluice_embedded::Durability::Fsync,
        };
        let store = Arc::new(sluice_embedded::EmbeddedStore::open(config).unwrap());
        let sluice = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let sluice_url = format!("http://{}", sluice.local_addr().unwrap());
        let (stop_sluice, sluice_stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(sluice_server::run(sluice, store.clone(), async {
            let _ = sluice_stopped.await;
        }));

        let client = Client::new(&sluice_url).unwrap();
        let worker = worker(client.clone());
        let (stop_worker, worker_stopped) = tokio::sync::oneshot::channel::<()>();
        let working = tokio::spawn(async move {
            worker
                .run(async {
                    let _ = worker_stopped.await;
                })
                .await
        });
        let web = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let web_url = format!("http://{}", web.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(web, app(client)).await });

        let http = reqwest::Client::new();
        let (status, created) =
            json_of(http.post(format!("{web_url}/reports")).json(&json!({ "month": "2024-05" })).send().await.unwrap())
                .await;
        assert_eq!((status, created["status"].clone()), (202, json!("pending")), "{created}");
        let id = created["job_id"].as_str().unwrap().to_string();
        let (_, again) =
            json_of(http.post(format!("{web_url}/reports")).json(&json!({ "month": "2024-05" })).send().await.unwrap())
                .await;
        assert_eq!(again["job_id"], id.as_str(), "the same month is the same job");

        let deadline = Instant::now() + Duration::from_secs(30);
        let report = loop {
            let (status, shown) = json_of(http.get(format!("{web_url}/reports/{id}")).send().await.unwrap()).await;
            assert_eq!(status, 200, "{shown}");
            match shown["status"].as_str() {
                Some("completed") => break shown["report"].clone(),
                Some("pending") => {}
                other => panic!("unexpected status {other:?}: {shown}"),
            }
            assert!(Instant::now() < deadline, "the report was not built: {shown}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let report: Report = serde_json::from_value(report).unwrap();
        assert_eq!(report, Report { month: "2024-05".into(), orders: 31, revenue_cents: 1_250 * 31 * 32 / 2 });
        let (status, _) =
            json_of(http.get(format!("{web_url}/reports/0192f1c3-0000-7000-8000-000000000000")).send().await.unwrap())
                .await;
        assert_eq!(status, 404);

        let _ = stop_worker.send(());
        assert_eq!(working.await.unwrap().completed, 1);
        let _ = stop_sluice.send(());
        server.await.unwrap().unwrap();
        store.close();
    }
}
