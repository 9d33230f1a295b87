//! `profile list | show | validate | schema`: the profiles as gdrprov reads
//! them (src/profile), for the front door to render.

use crate::error::Result;
use crate::profile::{self, LoadedProfile};

/// Every built-in profile: its name and description.
pub fn profile_list() -> Result<Vec<(&'static str, String)>> {
    profile::builtin::names()
        .into_iter()
        .map(|name| {
            Ok((
                name,
                profile::load(name)?.doc.description.unwrap_or_default(),
            ))
        })
        .collect()
}

/// One profile (a built-in name or a file), its `extends` resolved.
pub fn profile_load(spec: &str) -> Result<LoadedProfile> {
    profile::load(spec)
}

/// The JSON schema of a profile file.
pub fn profile_schema() -> String {
    profile::schema_json()
}
