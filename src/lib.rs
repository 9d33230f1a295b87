//! gdrprov library: everything the binary does, testable without a host.

pub mod boot;
