//! Conformance cases as data.
