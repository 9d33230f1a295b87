//! What planning produces: a change to the host (a file written or removed,
//! a command run) and the part of the desired state one module contributes.
//! Its own module so that `plan` and `modules/*` both use it without
//! importing each other.

use crate::host::CommandSpec;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub module: String,
    pub description: String,
    #[serde(flatten)]
    pub action: Action,
    /// Why this change only takes effect after a reboot, if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reboot: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Action {
    WriteFile {
        path: String,
        #[serde(skip)]
        before: Option<String>,
        #[serde(skip)]
        after: String,
        #[serde(skip)]
        new_mode: u32,
        /// Exact mode and owner to set (rollback); otherwise kept or `new_mode`.
        #[serde(skip)]
        meta: Option<crate::host::FileMeta>,
    },
    RemoveFile {
        path: String,
        #[serde(skip)]
        before: String,
    },
    Run {
        #[serde(flatten)]
        command: CommandSpec,
    },
}

impl Change {
    pub fn path(&self) -> Option<&str> {
        match &self.action {
            Action::WriteFile { path, .. } | Action::RemoveFile { path, .. } => Some(path),
            Action::Run { .. } => None,
        }
    }

    /// Unified diff of a file change, `None` for commands.
    pub fn diff(&self) -> Option<String> {
        let (path, before, after) = match &self.action {
            Action::WriteFile {
                path,
                before,
                after,
                ..
            } => (path, before.as_deref().unwrap_or(""), after.as_str()),
            Action::RemoveFile { path, before } => (path, before.as_str(), ""),
            Action::Run { .. } => return None,
        };
        let old = match &self.action {
            Action::WriteFile { before: None, .. } => "/dev/null".to_string(),
            _ => format!("a{path}"),
        };
        let new = match &self.action {
            Action::RemoveFile { .. } => "/dev/null".to_string(),
            _ => format!("b{path}"),
        };
        Some(
            similar::TextDiff::from_lines(before, after)
                .unified_diff()
                .context_radius(3)
                .header(&old, &new)
                .missing_newline_hint(true)
                .to_string(),
        )
    }
}

impl Change {
    /// A command to run, described by its `why`.
    pub fn run(module: &str, command: CommandSpec, reboot: Option<String>) -> Change {
        Change {
            module: module.into(),
            description: command.why.clone(),
            action: Action::Run { command },
            reboot,
        }
    }

    /// A whole-file write with the current content `before` (`None`: a new file).
    pub fn write(
        module: &str,
        description: String,
        path: &str,
        before: Option<String>,
        after: String,
        new_mode: u32,
        reboot: Option<String>,
    ) -> Change {
        Change {
            module: module.into(),
            description,
            action: Action::WriteFile {
                path: path.into(),
                before,
                after,
                new_mode,
                meta: None,
            },
            reboot,
        }
    }
}

/// A whole file with the content it must have.
#[derive(Debug, Clone)]
pub struct ManagedFile {
    pub path: String,
    pub content: String,
    pub mode: u32,
    /// Which module wants it, for the change description.
    pub module: &'static str,
    pub reboot: Option<String>,
}

/// What one module wants: whole files (owned through the files module),
/// commands, and reboots or warnings that are facts rather than changes.
#[derive(Debug, Default)]
pub struct Part {
    pub files: Vec<ManagedFile>,
    /// Edits of files gdrprov does not own as a whole (GRUB defaults).
    pub edits: Vec<Change>,
    pub commands: Vec<Change>,
    /// Kernel arguments gdrprov owns after the change, when boot is managed.
    pub kernel_args: Option<Vec<String>>,
    pub reboot_pending: Vec<String>,
    pub warnings: Vec<String>,
    /// The trial boot this plan sets up (`apply --trial`); `None` clears one.
    pub trial: Option<crate::journal::Trial>,
    /// Paths whose changes must come after the commands (BLS entries that
    /// grubby would otherwise rewrite), and extra such rewrites.
    pub late_paths: Vec<String>,
    pub late: Vec<Change>,
    /// The keys of /etc/nccl.conf gdrprov owns after the change.
    pub nccl_keys: Option<Vec<String>>,
    /// The boot part on a host whose command line is set outside it.
    pub boot_elsewhere: Option<crate::plan::modules::bootcfg_elsewhere::BootElsewhere>,
    /// What `services.fabric-manager` decided (plan::modules::fabric).
    pub fabric_manager: Option<FabricManagerPlan>,
}

impl Part {
    pub fn absorb(&mut self, other: Part) {
        self.files.extend(other.files);
        self.edits.extend(other.edits);
        if other.kernel_args.is_some() {
            self.kernel_args = other.kernel_args;
        }
        self.commands.extend(other.commands);
        self.reboot_pending.extend(other.reboot_pending);
        self.warnings.extend(other.warnings);
        if other.trial.is_some() {
            self.trial = other.trial;
        }
        self.late_paths.extend(other.late_paths);
        self.late.extend(other.late);
        if other.nccl_keys.is_some() {
            self.nccl_keys = other.nccl_keys;
        }
        if other.boot_elsewhere.is_some() {
            self.boot_elsewhere = other.boot_elsewhere;
        }
        if other.fabric_manager.is_some() {
            self.fabric_manager = other.fabric_manager;
        }
    }
}

/// What the plan decided about Fabric Manager, for the report (`fabric_manager` in JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FabricManagerPlan {
    /// The profile's `services.fabric-manager` (`required` or `auto`).
    pub setting: crate::profile::FabricManagerMode,
    /// `skip` (no NVSwitch board here), `enable` (steps planned), `ready` (enabled, and running
    /// where that is asked), `warn` (`auto`: a problem, in `warnings` too; nothing planned).
    pub action: &'static str,
    /// The NVSwitch PCI functions this root sees.
    pub nvswitches: Vec<String>,
    /// The Fabric Manager package and version (`nvidia-fabricmanager-580 580.159.04-1`).
    pub package: Option<String>,
    /// The NVIDIA driver's version.
    pub driver: Option<String>,
    pub why: String,
}
