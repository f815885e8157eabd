//! The SQS API: its actions (`actions/`, one file per group), SQS's limits, its queue
//! attributes in SQS's names and units, queue URLs and ARNs, MD5 digests of bodies and
//! attributes, and its errors. Actions translate to the same `Store` calls the native API makes;
//! SQS semantics that differ from Sluice's are mapped here, and the state only SQS has (the
//! 60-second purge and delete rules, receive attempts) lives in the services
//! (`sluice_services::sqs`).

pub mod actions;
pub mod errors;
pub mod limits;
pub mod md5;
pub mod queue_attributes;
pub mod urls;

pub use errors::receipt_error;
