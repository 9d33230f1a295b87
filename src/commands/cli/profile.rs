//! `gdrprov profile ...`

use crate::names;
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// The built-in profiles.
    List,
    /// A profile after `extends` is resolved, as YAML.
    Show {
        /// A built-in profile name or a profile file.
        #[arg(value_name = "PROFILE")]
        name: String,
    },
    /// Check profile files; every error is reported as file:line:col.
    Validate {
        /// The profile files to check.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<String>,
    },
    /// The JSON schema of the profile format, for editors.
    Schema,
}

impl ProfileCommand {
    pub fn name(&self) -> &'static str {
        match self {
            ProfileCommand::List => names::PROFILE_LIST,
            ProfileCommand::Show { .. } => names::PROFILE_SHOW,
            ProfileCommand::Validate { .. } => names::PROFILE_VALIDATE,
            ProfileCommand::Schema => names::PROFILE_SCHEMA,
        }
    }
}
