//! End-to-end tests of the HTTP surface over the real embedded store, without a socket:
//! every request goes through `app(store)` with `tower::ServiceExt::oneshot`.

mod support;

mod jobs;
mod messages;
mod operations;
mod poisoned;
mod queues;
mod redrive;
mod serve;
mod topics;
