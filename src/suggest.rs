//! Every command gdrprov prints for a user to run (a next step, a fix, a
//! remedy, a Slurm reason), built one way (issue 45): [`Suggest`] holds the
//! command it suggests (its words as in `names`, the profiles, the
//! arguments), [`Given`] the options the user gave that it must keep
//! (`--root DIR`, `--format json`), and [`Suggest::line`] writes it,
//! each word quoted for the shell, so that it runs as printed. A stage that
//! does not know the user's options writes its suggestion with
//! [`Suggest::shown`] (between backticks, as every message shows a command);
//! the output door then adds them with [`keep_given`], through the same
//! [`Given::tail`]. `tests/it/suggested.rs` parses every suggestion gdrprov
//! prints with the real command-line parser. It imports only `names` (which
//! imports nothing) and the host layer's shell quoting (the one every printed
//! command uses), so every layer may use it.

use crate::host::shell_quote as quote;
use std::path::Path;

/// The word that stands for profiles a suggestion cannot name (a fleet node
/// whose own report names none). It parses, and the user sees what to fill.
pub const PROFILE_PLACEHOLDER: &str = "PROFILE";

/// The command groups that take no `--root`, for a line `names` does not
/// know (the words of a command it does know are looked up there).
const ROOTLESS: &[&str] = &["bench", "fleet"];

/// The profiles a journal records (each by its `name:`) as a suggestion can
/// name them: all of them when each is a built-in (BUILTIN), else none (the
/// command then shows [`PROFILE_PLACEHOLDER`]) and a note saying what to put
/// there, since a profile file must be given by its path.
pub fn recorded_profiles(recorded: &[String], builtin: &[&str]) -> (Vec<String>, String) {
    if recorded.iter().all(|p| builtin.contains(&p.as_str())) {
        (recorded.to_vec(), String::new())
    } else {
        (
            Vec::new(),
            format!(
                " ({PROFILE_PLACEHOLDER}: {}, each profile file by its path)",
                recorded.join(" ")
            ),
        )
    }
}

/// A command to suggest: `gdrprov WORDS...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suggest {
    words: Vec<String>,
}

impl Suggest {
    /// The command COMMAND (its words as `names` spells them: `boot once`).
    pub fn new(command: &str) -> Suggest {
        Suggest {
            words: command.split(' ').map(str::to_string).collect(),
        }
    }

    /// One more argument, as it is (quoted when written).
    pub fn arg(mut self, arg: impl Into<String>) -> Suggest {
        self.words.push(arg.into());
        self
    }

    /// The profiles, as the user named them (built-in names or files);
    /// [`PROFILE_PLACEHOLDER`] when there are none to name.
    pub fn profiles<S: AsRef<str>>(mut self, profiles: &[S]) -> Suggest {
        if profiles.is_empty() {
            self.words.push(PROFILE_PLACEHOLDER.to_string());
        }
        self.words
            .extend(profiles.iter().map(|p| p.as_ref().to_string()));
        self
    }

    /// The command line to run: `gdrprov WORDS... [--root DIR] [--format json]`.
    pub fn line(&self, given: &Given) -> String {
        let mut out = String::from("gdrprov");
        for w in &self.words {
            out.push(' ');
            out.push_str(&quote(w));
        }
        out.push_str(&given.tail(&out));
        out
    }

    /// The command between backticks, as a message shows it, with the
    /// options GIVEN (a stage that does not know them passes
    /// [`Given::none`]; [`keep_given`] adds them at the output door).
    pub fn shown(&self, given: &Given) -> String {
        format!("`{}`", self.line(given))
    }
}

/// The options the user gave that every suggestion keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Given {
    /// `--root DIR` as the user wrote it; none for `/`.
    pub root: Option<String>,
    /// `--format json`.
    pub json: bool,
}

impl Given {
    /// Nothing to keep: the running system, text (a fleet node's remedy, an
    /// alert, or a stage that leaves the options to the output door).
    pub fn none() -> Given {
        Given::default()
    }

    /// The user's ROOT (`/` is the default, kept out) and format.
    pub fn new(root: &Path, json: bool) -> Given {
        Given {
            root: (root != Path::new("/")).then(|| root.display().to_string()),
            json,
        }
    }

    /// What to append to the command LINE: the options it does not give
    /// itself and takes ([`crate::names::takes`]), each with a leading
    /// space. The commands that act on no root (`bench`: this machine's
    /// devices; `fleet`: other hosts' results; `profile`, ...) never get
    /// `--root`, nor a command that writes no JSON `--format json`.
    pub fn tail(&self, line: &str) -> String {
        let mut out = String::new();
        let words = line.strip_prefix("gdrprov ").unwrap_or(line);
        let takes = crate::names::command_of(words).and_then(crate::names::takes);
        let rootless = match takes {
            Some(t) => t.root == crate::names::RootUse::None,
            None => line
                .split(' ')
                .nth(1)
                .is_some_and(|group| ROOTLESS.contains(&group)),
        };
        let json = takes.is_none_or(|t| t.formats.contains(&"json"));
        if let Some(root) = &self.root {
            if !line.contains("--root") && !rootless {
                out.push_str(" --root ");
                out.push_str(&quote(root));
            }
        }
        if self.json && json && !line.contains("--format") {
            out.push_str(" --format json");
        }
        out
    }
}

/// TEXT with every suggested command in it (a `gdrprov ...` between
/// backticks) given the options GIVEN ([`Given::tail`]).
pub fn keep_given(text: &str, given: &Given) -> String {
    if given == &Given::none() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 32);
    for (i, part) in text.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        out.push_str(part);
        if i % 2 == 1 && part.starts_with("gdrprov ") {
            out.push_str(&given.tail(part));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    /// A journal names a profile file by its `name:`, which no command takes:
    /// such profiles become PROFILE with a note; built-ins stay as they are.
    #[test]
    fn recorded_file_profiles_become_the_placeholder() {
        let builtin = ["rdma-dmabuf", "efa"];
        let (named, note) = recorded_profiles(&["rdma-dmabuf".to_string()], &builtin);
        assert_eq!(
            (named, note),
            (vec!["rdma-dmabuf".to_string()], String::new())
        );
        let (named, note) =
            recorded_profiles(&["rdma-dmabuf".into(), "site-rdma".into()], &builtin);
        assert!(named.is_empty());
        assert_eq!(
            note,
            " (PROFILE: rdma-dmabuf site-rdma, each profile file by its path)"
        );
        let line = Suggest::new("apply").profiles(&named).line(&Given::none());
        assert_eq!(line, "gdrprov apply PROFILE");
    }

    use super::*;

    #[test]
    fn a_suggestion_names_its_profiles_and_keeps_the_options_given() {
        let given = Given::new(Path::new("img dir"), true);
        let s = Suggest::new("apply").profiles(&["rdma-dmabuf", "./my site.yaml"]);
        assert_eq!(
            s.line(&given),
            "gdrprov apply rdma-dmabuf './my site.yaml' --root 'img dir' --format json"
        );
        assert_eq!(
            Suggest::new("boot once")
                .arg("gdrprov-trial")
                .line(&Given::none()),
            "gdrprov boot once gdrprov-trial"
        );
        assert_eq!(
            Suggest::new("apply")
                .profiles::<&str>(&[])
                .line(&Given::none()),
            "gdrprov apply PROFILE"
        );
    }

    #[test]
    fn the_root_is_kept_unless_the_command_names_its_own() {
        let given = Given::new(Path::new("/srv/img"), false);
        assert_eq!(
            keep_given(
                "run `gdrprov verify x` or `gdrprov recover --root /o`; `ls`",
                &given
            ),
            "run `gdrprov verify x --root /srv/img` or `gdrprov recover --root /o`; `ls`"
        );
        assert_eq!(Given::new(Path::new("/"), false), Given::none());
        assert_eq!(
            keep_given(
                "`gdrprov bench` `gdrprov bench copy` `gdrprov fleet sweep plan --retest R`",
                &given
            ),
            "`gdrprov bench` `gdrprov bench copy` `gdrprov fleet sweep plan --retest R`"
        );
    }
}
