//! The SQS API through `app_with(store, config)` with `tower::ServiceExt::oneshot`, over the
//! real embedded store: both protocols, every action, AWS's error shapes and digests. Real
//! AWS clients (boto3, the aws CLI, aws-sdk-rust) are exercised by the binary's tests.

mod support;

mod backpressure;
mod detection;
mod digests;
mod errors;
mod fifo;
mod messages;
mod move_tasks;
mod query_flow;
mod queues;
mod resources;
mod sns;
