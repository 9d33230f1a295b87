//! Checks of a host against a profile: the profile's requirements (before
//! planning), `verify` (after apply and reboot), the health checks operators
//! run on one node, and `doctor`'s findings.

pub mod doctor;
pub mod health;
pub mod requirements;
pub mod verify;
