//! End-to-end tests of the HTTP surface over the real embedded store, without a socket:
//! every request goes through `app(store)` with `tower::ServiceExt::oneshot`.

mod support;

mod alerts;
mod auth;
mod backpressure;
mod dashboard;
mod events;
mod jobs;
mod messages;
mod operations;
mod poisoned;
mod queues;
mod redrive;
mod relays;
mod sagas;
mod schedules;
mod schemas;
mod serve;
mod streams;
mod tenants;
mod tenants_sagas;
mod topics;
mod trace;
