//! Where `recheck` finds what to check: the profiles the last apply
//! recorded (a built-in as the built-in, a file only inside the root), and
//! the files a profile names in its `vars`.

use crate::error::{Error, Result};
use crate::host::textfile::Dest;
use crate::host::Host;
use crate::journal::{ProfileSource, StateStore};
use crate::ops::Target;
use crate::profile::{Composed, Exact, LoadedProfile};
use std::path::{Path, PathBuf};

/// Where a profile that is not built in is looked for (relative to the root).
const PROFILE_DIR: &str = "etc/gdrprov";

/// The profiles to check, named and loaded: those given, else the last
/// apply's, found as it recorded them (`None`: nothing applied).
pub(super) fn profiles(
    target: &Target,
    given: &[String],
) -> Result<Option<(Vec<String>, Composed)>> {
    if !given.is_empty() {
        return Ok(Some((
            given.to_vec(),
            crate::profile::load_profiles(given)?,
        )));
    }
    let host = target.open()?;
    let state = StateStore::new(&host).load_state()?;
    if state.generation == 0 || state.profiles.is_empty() {
        return Ok(None);
    }
    let loaded = state
        .profiles
        .iter()
        .enumerate()
        .map(|(i, name)| recorded(&host, name, state.profile_sources.get(i).copied()))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some((
        state.profiles.clone(),
        crate::profile::compose(&loaded)?,
    )))
}

/// The fix every refusal below ends with.
const NAME_THEM: &str =
    "or name the profiles to re-check in its configuration (/etc/default/gdrprov)";

/// One profile of `state.json`, found the way apply recorded it: a built-in
/// as the built-in (never a file of that name), a file only as
/// `/etc/gdrprov/NAME.yaml` inside the root, whose own name is NAME. A
/// state of an older gdrprov records no source: a name that is both is
/// refused, never guessed.
fn recorded(host: &Host, name: &str, source: Option<ProfileSource>) -> Result<LoadedProfile> {
    let builtin = crate::profile::builtin::profile(name).is_some();
    let shown = format!("{}/{name}.yaml", host.display(&format!("/{PROFILE_DIR}")));
    let file = in_root_file(host, name)?;
    let exact = match (source, builtin, &file) {
        (Some(ProfileSource::BuiltIn), true, _) | (None, true, None) => Exact::Builtin(name),
        (Some(ProfileSource::File), _, Some(f)) | (None, false, Some(f)) => {
            Exact::FileWithin(f.clone(), host.root())
        }
        (Some(ProfileSource::BuiltIn), false, _) => {
            return Err(Error::Refused(format!(
                "the last apply used the built-in profile `{name}`, which this gdrprov does not have (another version?); install the gdrprov that applied it, {NAME_THEM}"
            )))
        }
        (None, true, Some(_)) => {
            return Err(Error::Refused(format!(
                "state.json (written by an older gdrprov) does not say whether the last apply used the built-in profile `{name}` or the file {shown}; apply again to record it, {NAME_THEM}"
            )))
        }
        (_, _, None) => {
            return Err(Error::Refused(format!(
                "the last apply used profile `{name}` from a file, which is not at {shown}; copy the profile there, {NAME_THEM}"
            )))
        }
    };
    let loaded = crate::profile::load_exact(exact)?;
    if loaded.name != name {
        return Err(Error::Refused(format!(
            "{shown} is profile `{}`, not `{name}`, the profile the last apply used; put `{name}` there, {NAME_THEM}",
            loaded.name
        )));
    }
    Ok(loaded)
}

/// `/etc/gdrprov/NAME.yaml` of the root as a real path inside it (every
/// symlink resolved in the root), when NAME is a plain file name and a
/// regular file is there; `None` otherwise.
fn in_root_file(host: &Host, name: &str) -> Result<Option<PathBuf>> {
    // A profile name by its grammar (src/grammar.rs), and no hidden file.
    let plain = crate::grammar::ProfileName::parse(name).is_ok()
        && !name.starts_with('.')
        && !name.contains('\\');
    if !plain {
        return Ok(None);
    }
    let Some(logical) = host.canonical(&format!("/{PROFILE_DIR}/{name}.yaml")) else {
        return Ok(None);
    };
    let real = host.root().join(logical.trim_start_matches('/'));
    Ok(crate::host::is_local_file(&real).then_some(real))
}

/// A file the profile names in `vars` (`gdrprov-textfile`,
/// `gdrprov-nfd-file`) is a file of the host the root is, as the first-boot
/// unit writes it there: a plain absolute path resolved inside the root
/// (symlinks too), never a file of the machine running gdrprov (issue 37).
/// `None` when the profile names none; a value that is not text is not a
/// path and is left alone, as before.
pub(super) fn var_path(
    root: &Path,
    composed: &Composed,
    key: &str,
    option: &str,
) -> Result<Option<Dest>> {
    let Some(value) = composed.doc.vars.get(key).and_then(|v| v.as_str()) else {
        return Ok(None);
    };
    let refuse = |why: String| {
        Error::Refused(format!(
            "the profile's vars.{key} `{value}`: {why}; name a plain absolute path of the host (e.g. /var/lib/node_exporter/gdrprov.prom), or give {option}"
        ))
    };
    let why = |e: Error| match e {
        Error::BadPath { why, .. } => refuse(why),
        other => refuse(other.to_string()),
    };
    crate::host::check_profile_path(value).map_err(why)?;
    // Written through the door inside the root: never through a link there.
    Ok(Some(Dest::InRoot {
        root: root.to_path_buf(),
        path: value.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_applied_means_nothing_to_check() {
        let t = tempfile::tempdir().unwrap();
        let target = Target::read_only(t.path().to_path_buf(), None);
        assert!(profiles(&target, &[]).unwrap().is_none());
        let given = vec!["rdma-dmabuf".to_string()];
        let (names, composed) = profiles(&target, &given).unwrap().unwrap();
        assert_eq!((names, composed.builtin), (given, vec![true]));
    }
}
