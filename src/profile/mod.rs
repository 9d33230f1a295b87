//! Profiles: the YAML model, the built-in set, loading with `extends`, and
//! composing several into one desired state.

pub mod builtin;
mod de;
mod explain;
pub mod extend;
pub mod gds;
pub mod guard;
pub mod load;
pub mod merge;
pub mod model;
pub mod requires;
mod sections;
pub mod text;
pub mod when;

pub use load::{load, load_exact, parse, spec_names_a_file, Exact};
pub use merge::{compose, Composed};
pub use model::*;

/// Loads and composes profiles (names or files), in order.
pub fn load_profiles(specs: &[String]) -> crate::error::Result<Composed> {
    let loaded = specs
        .iter()
        .map(|s| load(s))
        .collect::<crate::error::Result<Vec<_>>>()?;
    compose(&loaded)
}

/// The JSON schema of the profile format, for editors.
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(ProfileDoc);
    serde_json::to_string_pretty(&schema).unwrap_or_else(|_| "{}".into())
}
