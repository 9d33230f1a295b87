//! Carrying out one step of a plan: a file written or removed through the
//! host layer's door, or a command run with its holds (`hold::run`).

use super::hold;
use crate::error::{Error, Result};
use crate::host::{CommandSpec, Host, WriteOptions};
use crate::plan::{Action, Change};

/// Runs one step; gives the command line it ran, if any.
pub(super) fn run_step(host: &Host, change: &Change) -> Result<Option<CommandSpec>> {
    match &change.action {
        Action::WriteFile {
            path,
            after,
            new_mode,
            meta,
            ..
        } => {
            host.write_atomic(
                path,
                after.as_bytes(),
                WriteOptions {
                    meta: *meta,
                    new_mode: *new_mode,
                },
            )?;
            Ok(None)
        }
        Action::RemoveFile { path, .. } => {
            host.remove(path)?;
            Ok(None)
        }
        Action::Run { command } => {
            let out = hold::run(host, command)?;
            if !out.success() {
                // In an image tree a tool often fails for want of the devices
                // and kernel views a booted system has (grub-probe: "is /dev
                // mounted?"): say how to give them, or to leave it pending.
                let hint = if host.is_live() {
                    String::new()
                } else {
                    format!(
                        " (on an image root commands run chrooted into {}: bind-mount /dev, /proc and /sys into it first, or apply with --no-exec to leave the commands pending for where the image runs)",
                        host.display("/")
                    )
                };
                return Err(Error::Command {
                    command: host.effective_argv(command).join(" "),
                    msg: format!(
                        "exit {}: {}{hint}",
                        out.code
                            .map(|c| c.to_string())
                            .unwrap_or_else(|| "by signal".into()),
                        last_lines(&out.stderr, &out.stdout)
                    ),
                });
            }
            Ok(Some(command.clone()))
        }
    }
}

pub(super) fn last_lines(stderr: &str, stdout: &str) -> String {
    let text = if stderr.trim().is_empty() {
        stdout
    } else {
        stderr
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}
