//! Why gdrprov will not read or edit the GRUB defaults.

use super::*;

/// Why gdrprov will not read or edit the GRUB defaults.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GrubError {
    /// The caller passed no files.
    #[error("no GRUB defaults file given: expected /etc/default/grub first")]
    NoFiles,
    /// The same file name was given twice.
    #[error("{file} was given twice")]
    DuplicateFile {
        /// File name as given.
        file: String,
    },
    /// The variable name is not a shell name.
    #[error("{var:?} is not a shell variable name")]
    BadVariable {
        /// The name given.
        var: String,
    },
    /// The file is not shell gdrprov can lex.
    #[error("{file}:{line}: {what}; gdrprov will not edit this file: fix it by hand so that `sh -n {file}` passes")]
    Syntax {
        /// File name as given.
        file: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        what: String,
    },
    /// A line that sets or uses the variable in a way gdrprov does not understand.
    #[error(
        "{file}:{line}: gdrprov will not edit {var} here: {reason}. Simplify that line by hand to a \
         plain {var}=\"...\" assignment and run gdrprov again"
    )]
    Unsupported {
        /// File name as given.
        file: String,
        /// 1-based line.
        line: usize,
        /// The variable.
        var: String,
        /// What gdrprov does not understand.
        reason: String,
    },
    /// A command that could change any variable invisibly (`eval`, `.`,
    /// `source`) or skip the rest of the file (`return`, `exit`, `exec`).
    #[error(
        "{file}:{line}: `{command}` could set or skip {var} in a way gdrprov cannot see, so gdrprov \
         will not edit the GRUB defaults: replace that line by plain assignments by hand"
    )]
    Opaque {
        /// File name as given.
        file: String,
        /// 1-based line.
        line: usize,
        /// The command word.
        command: String,
        /// The variable.
        var: String,
    },
    /// An argument to add is not safe to write.
    #[error("cannot add to the kernel command line: {0}")]
    BadArgument(#[from] ArgError),
    /// The same argument is both to be added and removed.
    #[error("kernel argument {arg:?} is both to be added and removed")]
    Contradiction {
        /// The argument.
        arg: String,
    },
    /// An argument to remove is not written in one place of one assignment.
    #[error(
        "{file}:{line}: kernel argument {arg:?} of {var} is assembled from several pieces; gdrprov \
         will not edit it: write it as one word by hand"
    )]
    NotOneWord {
        /// File name as given.
        file: String,
        /// 1-based line.
        line: usize,
        /// The variable.
        var: String,
        /// The argument.
        arg: String,
    },
    /// The planned edit failed its own re-check; nothing must be written.
    #[error(
        "internal check failed: after the edit {var} would be {got:?} instead of {want:?}; gdrprov \
         changed nothing (please report this with the GRUB defaults files)"
    )]
    VerifyFailed {
        /// The variable.
        var: String,
        /// What the edit was meant to produce.
        want: Vec<String>,
        /// What re-reading the edited files gives.
        got: Vec<String>,
    },
}

pub(super) fn lex_error(name: &str, text: &str, e: LexError) -> GrubError {
    let (what, offset) = match e {
        LexError::Unterminated { what, offset } => (format!("unterminated {what}"), offset),
        LexError::HereDoc { offset } => ("a here-document".to_owned(), offset),
        LexError::Bashism { what, offset } => (what.to_owned(), offset),
    };
    GrubError::Syntax {
        file: name.to_owned(),
        line: shell::line_of(text, offset),
        what,
    }
}
