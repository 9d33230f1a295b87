//! The one command runner. On the running system a command runs as is; on an
//! image root it runs chrooted into that root, so the builder's own kernel and
//! tools are never touched. `--no-exec` runs nothing: apply lists the command
//! as pending instead.

use super::Host;
use crate::error::{Error, Result};

/// A command gdrprov wants to run, with the reason shown to people.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommandSpec {
    pub argv: Vec<String>,
    pub why: String,
    /// Regenerates something from files gdrprov edits (update-grub,
    /// update-initramfs): run again after those files are restored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub regenerate: bool,
}

impl CommandSpec {
    pub fn new(argv: &[&str], why: impl Into<String>) -> Self {
        CommandSpec {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            why: why.into(),
            regenerate: false,
        }
    }

    pub fn regenerating(mut self) -> Self {
        self.regenerate = true;
        self
    }

    pub fn shell_line(&self) -> String {
        self.argv
            .iter()
            .map(|a| shell_quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[derive(Debug, Clone)]
pub struct CommandOutput {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CommandOutput {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

impl Host {
    /// The argv that actually runs: chrooted unless the root is `/`.
    pub fn effective_argv(&self, spec: &CommandSpec) -> Vec<String> {
        if self.is_live() {
            spec.argv.clone()
        } else {
            let mut v = vec!["chroot".to_string(), self.root().display().to_string()];
            v.extend(spec.argv.iter().cloned());
            v
        }
    }

    /// Runs a command that changes the host. The caller has checked
    /// `no_exec()`; this refuses to run anything when it is set.
    pub fn run(&self, spec: &CommandSpec) -> Result<CommandOutput> {
        if self.no_exec() {
            return Err(Error::Refused(format!(
                "internal: `{}` asked to run under --no-exec",
                spec.shell_line()
            )));
        }
        self.spawn(spec)
    }

    /// Runs a read-only probe command (e.g. `modinfo`). Gives `None` when
    /// nothing may run (`--no-exec`) or the tool is missing: a fact is then
    /// "absent", never an error.
    /// On a snapshot root the recorded output is returned and nothing runs.
    pub fn query(&self, argv: &[&str]) -> Option<CommandOutput> {
        if let Some(answer) = self.replayed(argv) {
            return answer;
        }
        if self.no_exec() {
            return None;
        }
        let out = self.spawn(&CommandSpec::new(argv, "probe")).ok();
        // chroot's own failures (125: could not chroot, 126/127: the tool is
        // not in the image or not runnable) read as absent.
        let out = out.filter(|o| self.is_live() || !matches!(o.code, Some(125..=127)));
        self.log_command(argv, out.as_ref());
        out
    }

    fn spawn(&self, spec: &CommandSpec) -> Result<CommandOutput> {
        let argv = self.effective_argv(spec);
        let Some((prog, args)) = argv.split_first() else {
            return Err(Error::Usage("empty command".into()));
        };
        let out = duct::cmd(prog, args)
            .env("LC_ALL", "C")
            .stdin_null()
            .stdout_capture()
            .stderr_capture()
            .unchecked()
            .run()
            .map_err(|e| Error::Command {
                command: spec.shell_line(),
                msg: if e.kind() == std::io::ErrorKind::NotFound {
                    format!("`{prog}` was not found; install it, or use --no-exec to list the command instead of running it")
                } else {
                    e.to_string()
                },
            })?;
        Ok(CommandOutput {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// Quotes an argument for display so a person can paste it into a shell.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
