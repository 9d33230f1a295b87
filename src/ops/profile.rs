//! `profile list | show | validate | schema`: the profiles as gdrprov reads
//! them (src/profile), for the front door to render.

use crate::error::{Error, Result};
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

/// `profile validate`: one profile loaded (`extends` resolved, every field checked) and then
/// what `plan` refuses of the profile alone (`verify.first-boot` without the profiles the unit
/// verifies, say), so that "ok" means `plan` accepts the profile as far as the host plays no part.
pub fn profile_validate(spec: &str) -> Result<LoadedProfile> {
    let loaded = profile::load(spec)?;
    let composed = profile::compose(std::slice::from_ref(&loaded))?;
    crate::plan::check_profile(&composed).map_err(|e| match e {
        Error::Refused(msg) => Error::ProfileInvalid {
            file: spec.to_string(),
            msg,
        },
        other => other,
    })?;
    Ok(loaded)
}

/// The JSON schema of a profile file.
pub fn profile_schema() -> String {
    profile::schema_json()
}
