//! Accepting connections and serving HTTP/1.1 on each, with the timeout that `axum::serve`
//! leaves out: a request's head must arrive within [`REQUEST_HEAD_READ_MS_MAX`] of the
//! connection opening or of its previous answer, so a client that never finishes its headers,
//! or a keep-alive connection left idle, does not hold a task and a file descriptor forever.
//! (The body's deadline is the `observe::limit_body` middleware's, so that it can answer 408.)
//!
//! Shutdown works as axum's: stop accepting, ask every connection to finish the request in
//! progress (long polls included) and close, and return once all of them have.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use sluice_core::limits::REQUEST_HEAD_READ_MS_MAX;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::tls::Tls;

/// How long accepting pauses after an error such as running out of file descriptors, so that
/// the loop neither spins nor stalls long once connections close again.
const ACCEPT_ERROR_PAUSE_MS: u64 = 50;

/// Serves `router` on `listener` (over TLS when `tls` is given) until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<Arc<Tls>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    // Dropping `stop` tells every connection to wind down; each holds a `done` receiver until
    // it has closed, so `done_tx.closed()` resolves when the last one is gone.
    let (stop, stop_rx) = watch::channel(());
    let (done_tx, done_rx) = watch::channel(());
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    if !is_connection_error(&e) {
                        tracing::error!(error = %e, "accept failed; pausing before the next accept");
                        tokio::time::sleep(Duration::from_millis(ACCEPT_ERROR_PAUSE_MS)).await;
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = TowerToHyperService::new(router.clone());
        let stop_rx = stop_rx.clone();
        let done_rx = done_rx.clone();
        match &tls {
            None => {
                tokio::spawn(async move {
                    serve_connection(TokioIo::new(stream), service, stop_rx).await;
                    drop(done_rx);
                });
            }
            Some(tls) => {
                let acceptor = tls.acceptor();
                tokio::spawn(async move {
                    // The handshake has the head's deadline, so a client that never finishes it
                    // does not hold the connection either.
                    let deadline = Duration::from_millis(REQUEST_HEAD_READ_MS_MAX);
                    match tokio::time::timeout(deadline, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => serve_connection(TokioIo::new(stream), service, stop_rx).await,
                        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                    drop(done_rx);
                });
            }
        }
    }
    drop(listener);
    drop(stop);
    drop(done_rx);
    done_tx.closed().await;
}

/// Serves HTTP/1.1 on one connection until it closes, or until `stop_rx` says to finish the
/// request in progress and close.
async fn serve_connection<IO>(io: TokioIo<IO>, service: TowerToHyperService<Router>, mut stop_rx: watch::Receiver<()>)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(Duration::from_millis(REQUEST_HEAD_READ_MS_MAX));
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        _ = stop_rx.changed() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(e) = result {
        // A client that went away, sent garbage or was too slow with its headers.
        tracing::trace!(error = %e, "connection ended with an error");
    }
}

/// Errors of one incoming connection rather than of the listener.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}
