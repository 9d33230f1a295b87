//! The one command runner. On the running system a command runs as is; on an
//! image root it runs chrooted into that root, so the builder's own kernel and
//! tools are never touched. `--no-exec` runs nothing: apply lists the command
//! as pending instead.

use super::Host;
use crate::error::{Error, Result};
use std::os::unix::fs::PermissionsExt;

/// The search path when `$PATH` is unset (as execvp and the shells use).
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The search path every command gdrprov runs is found in and gets: the
/// absolute directories of `$PATH`, in order. An empty entry or `.` (or any
/// relative one) would make a file of the working directory the program a
/// root-run gdrprov starts (issue 43): they are dropped. Nothing left: the
/// default path.
pub fn search_path() -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    let kept: Vec<&str> = path.split(':').filter(|d| d.starts_with('/')).collect();
    if kept.is_empty() {
        DEFAULT_PATH.to_string()
    } else {
        kept.join(":")
    }
}

/// A command gdrprov wants to run, with the reason shown to people.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommandSpec {
    pub argv: Vec<String>,
    pub why: String,
    /// Regenerates something from files gdrprov edits (update-grub,
    /// update-initramfs): run again after those files are restored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub regenerate: bool,
    /// Variables set for the command (`KERNEL_INSTALL_BYPASS=1`), beside
    /// the `LC_ALL=C` every command gets.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
    /// Files the command makes that gdrprov then copies where a boot loader
    /// reads them, each whole or not at all ([`Host::copy_atomic`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub place: Vec<Placement>,
    /// The command that undoes this one (`systemctl disable` for an `enable` gdrprov ran):
    /// the journal keeps it, and rollback runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo: Option<Vec<String>>,
    /// Boot files held on the initramfs they load while the command rebuilds
    /// it in place ([`Hold`]): the switch to the rebuilt one comes later.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hold: Vec<Hold>,
    /// Boot files that load the rebuilt initramfs but that this plan does
    /// not switch (an `apply --trial` leaves the default entry as it is), so
    /// not held by it. A later rollback that puts such a file back (a
    /// commit switched it meanwhile) holds it while it runs the command
    /// again (`plan::rollback`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub may_hold: Vec<Hold>,
    /// The command rebuilds initramfs images (update-initramfs, dracut), as
    /// the plan module that made it says: such commands run before the ones
    /// that switch the boot to a new command line (update-grub), in apply,
    /// rollback and recover alike (issue 37, "the boot switch last"). Not
    /// written out (plan JSON and journals are as they were): a command read
    /// back from a journal or state.json gets it again from
    /// `plan::modules::kmod::as_planned`.
    #[serde(skip)]
    pub rebuilds_initramfs: bool,
}

/// A boot file (`reader`: grub.cfg, a type #1 entry) that loads `file` (the
/// initramfs, as a path inside the root) and must keep loading what it
/// loads now while a command rebuilds `file`. Data for `apply::hold`, which
/// names the held copy and writes the held text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Hold {
    pub reader: String,
    pub file: String,
    /// RHEL 8: grubenv's `kernelopts` when the plan was made, written out
    /// into the held entry in place of `$kernelopts` (grubby changes grubenv
    /// while the entry is held; see `plan::modules::bls_switch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernelopts: Option<String>,
}

/// A file a command made (`from`) and where gdrprov puts a copy (`to`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Placement {
    pub from: String,
    pub to: String,
}

impl CommandSpec {
    pub fn new(argv: &[&str], why: impl Into<String>) -> Self {
        CommandSpec {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            why: why.into(),
            regenerate: false,
            env: Default::default(),
            place: Vec::new(),
            undo: None,
            hold: Vec::new(),
            may_hold: Vec::new(),
            rebuilds_initramfs: false,
        }
    }

    /// This command, with `argv` as the command that undoes it.
    pub fn undone_by(mut self, argv: &[&str]) -> Self {
        self.undo = Some(argv.iter().map(|s| s.to_string()).collect());
        self
    }

    /// This command, marked as one that rebuilds initramfs images.
    pub fn rebuilding_initramfs(mut self) -> Self {
        self.rebuilds_initramfs = true;
        self
    }

    /// Whether the command rebuilds initramfs images, as its plan marked it.
    pub fn rebuilds_initramfs(&self) -> bool {
        self.rebuilds_initramfs
    }

    pub fn regenerating(mut self) -> Self {
        self.regenerate = true;
        self
    }

    /// The command as a shell line, its variables first (`K=V cmd ...`).
    pub fn shell_line(&self) -> String {
        self.env
            .iter()
            .map(|(k, v)| format!("{k}={}", shell_quote(v)))
            .chain(self.argv.iter().map(|a| shell_quote(a)))
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

    /// Runs a command that changes the host, then copies what it made where
    /// `spec.place` says. Its holds are the caller's (`apply::hold::run`
    /// holds the readers before and makes the rebuilt files durable after).
    /// The caller has checked `no_exec()`; this refuses to run anything when
    /// it is set.
    pub fn run(&self, spec: &CommandSpec) -> Result<CommandOutput> {
        if self.no_exec() {
            return Err(Error::Refused(format!(
                "internal: `{}` asked to run under --no-exec",
                spec.shell_line()
            )));
        }
        let out = self.spawn(spec)?;
        if out.success() {
            for p in &spec.place {
                self.place(&p.from, &p.to)?;
            }
        }
        Ok(out)
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
        // A tool the root does not have is absent: no process is started
        // to learn that (a plan on an image root would otherwise run a dozen
        // `chroot ROOT tool` that all fail).
        if self.find_program(argv.first()?).is_none() {
            self.log_command(argv, None);
            return None;
        }
        let out = self.spawn(&CommandSpec::new(argv, "probe")).ok();
        // chroot's own failures (125: could not chroot, 126/127: the tool is
        // not in the image or not runnable) read as absent.
        let out = out.filter(|o| self.is_live() || !matches!(o.code, Some(125..=127)));
        self.log_command(argv, out.as_ref());
        out
    }

    /// Where `prog` lies inside the root, found as `chroot ROOT prog` (or
    /// the shell, on `/`) would find it: a name with a slash as written, a
    /// bare name in each directory of `$PATH`. `None` when there is no
    /// executable file by that name.
    /// A script counts only when its interpreter (`#!/bin/sh`) is there too:
    /// an image root without a shell cannot run it.
    pub fn find_program(&self, prog: &str) -> Option<String> {
        let is_exec = |path: &str| {
            self.resolve(path).ok().is_some_and(|r| {
                executable(&r.real) && interpreter(&r.real).is_none_or(|i| self.runnable(&i))
            })
        };
        if prog.contains('/') {
            return (prog.starts_with('/') && is_exec(prog)).then(|| prog.to_string());
        }
        if prog.is_empty() {
            return None;
        }
        search_path()
            .split(':')
            .map(|dir| format!("{}/{prog}", dir.trim_end_matches('/')))
            .find(|p| is_exec(p))
    }

    fn runnable(&self, path: &str) -> bool {
        path.starts_with('/') && self.resolve(path).is_ok_and(|r| executable(&r.real))
    }

    fn spawn(&self, spec: &CommandSpec) -> Result<CommandOutput> {
        let argv = self.effective_argv(spec);
        let Some((prog, args)) = argv.split_first() else {
            return Err(Error::Usage("empty command".into()));
        };
        self.log(|r| r.spawned.push(argv.clone()));
        let cmd = spec.env.iter().fold(
            duct::cmd(prog, args).env("PATH", search_path()),
            |c, (k, v)| c.env(k, v),
        );
        let out = cmd
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

fn executable(real: &std::path::Path) -> bool {
    std::fs::metadata(real).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The interpreter a script names on its `#!` line.
fn interpreter(real: &std::path::Path) -> Option<String> {
    // Through the door: a regular file, opened without blocking (a FIFO
    // swapped in after the check above must not block the open).
    let head = super::read::read_head(real, 256)?;
    let line = head.strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let text = String::from_utf8_lossy(line);
    text.split_whitespace().next().map(String::from)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::path::Path;

    fn file(root: &Path, path: &str, mode: u32, content: &[u8]) {
        let p = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn tool(root: &Path, path: &str, mode: u32) {
        file(root, path, mode, b"\x7fELF");
    }

    #[test]
    fn programs_are_looked_up_inside_the_root() {
        let t = tempfile::tempdir().unwrap();
        tool(t.path(), "/usr/bin/ib_write_bw", 0o755);
        tool(t.path(), "/usr/bin/not-executable", 0o644);
        // Merged /usr: /sbin is a link to usr/bin, found through it.
        symlink("usr/bin", t.path().join("sbin")).unwrap();
        let h = Host::open(t.path(), false).unwrap();
        // /usr/bin or /sbin, whichever $PATH names first.
        let found = h.find_program("ib_write_bw").unwrap();
        assert!(found.ends_with("bin/ib_write_bw"), "{found}");
        assert_eq!(
            h.find_program("/sbin/ib_write_bw").as_deref(),
            Some("/sbin/ib_write_bw")
        );
        assert_eq!(h.find_program("not-executable"), None);
        assert_eq!(h.find_program("/usr/local/cuda/bin/nvcc"), None);
        assert_eq!(h.find_program("nvcc"), None);
        assert_eq!(h.find_program("bin/ib_write_bw"), None);
    }

    #[test]
    fn scripts_need_their_interpreter_in_the_root() {
        let t = tempfile::tempdir().unwrap();
        // A script for /bin/sh, and the root has no /bin/sh.
        file(
            t.path(),
            "/usr/bin/ofed_info",
            0o755,
            b"#!/bin/sh\necho x\n",
        );
        let h = Host::open(t.path(), false).unwrap();
        assert_eq!(h.find_program("ofed_info"), None);
        tool(t.path(), "/bin/sh", 0o755);
        assert!(h.find_program("ofed_info").is_some());
    }

    #[test]
    fn absent_tools_start_no_process() {
        let t = tempfile::tempdir().unwrap();
        let h = Host::open(t.path(), false).unwrap().recording();
        for argv in [
            &["ib_write_bw", "--version"][..],
            &["rpm", "-q", "perftest"],
        ] {
            assert!(h.query(argv).is_none());
        }
        let rec = h.recorded().unwrap();
        assert!(rec.spawned.is_empty(), "{:?}", rec.spawned);
        // A snapshot of this root still says the tools were absent.
        assert_eq!(rec.commands.len(), 2);
        assert!(rec.commands.iter().all(|c| !c.ran));
    }

    #[test]
    fn present_tools_still_run() {
        // On the running system `true` is in $PATH: the probe runs it.
        let h = Host::open(Path::new("/"), false).unwrap().recording();
        let out = h.query(&["true"]).expect("`true` runs");
        assert!(out.success());
        assert_eq!(h.recorded().unwrap().spawned, [["true"]]);
    }
}
