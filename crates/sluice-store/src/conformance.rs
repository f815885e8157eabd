//! The conformance suite every backend must pass (being written).
