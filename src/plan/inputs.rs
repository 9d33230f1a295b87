//! What planning reads beyond [`Facts`](crate::facts::Facts), gathered once from the
//! host so that planning itself never touches it: GRUB's defaults and
//! entries, the target kernels' module indexes, the sysfs state of the
//! modules a profile unloads, the interfaces it names, its services and
//! template sources.
//!
//! Two kinds of input are only known once planning has run: the current
//! content of the files a plan writes (and gdrprov's backups of them), and
//! the initramfs listings, which cost seconds and are only needed when the
//! block list or module options change. Planning asks for them here; what
//! was not gathered is answered "absent" and recorded in [`Missed`], and the
//! caller (`prepare`) reads it and plans again. A plan is only used once
//! nothing was missed, so it is exactly the plan of the host.

use crate::error::{Error, Result};
use crate::facts::{Facts, OsFamily};
use crate::host::{Host, ReadLimit};
use crate::journal::State;
use crate::profile::Composed;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

pub use crate::facts::net::{Iface, NetFacts};
use kernels::initramfs_modules;
pub use kernels::{module_of, target_kernel_modules};

mod kernels;

/// sysfs and modprobe treat `-` and `_` in module names alike.
fn norm(name: &str) -> String {
    name.replace('-', "_")
}

/// A file read for editing: its text, `None` when absent, or why it cannot
/// be read (not UTF-8, a symlink out of the root, an I/O error).
pub type FileRead = std::result::Result<Option<String>, String>;

#[derive(Debug, Clone, Default)]
pub struct GrubFacts {
    /// `/etc/default/grub` then `grub.d/*.cfg` in C-locale order, as
    /// grub-mkconfig sources them.
    pub defaults: Vec<(String, FileRead)>,
    /// `/boot/grub/grub.cfg`.
    pub cfg: Option<String>,
    /// `/boot/grub/grubenv` (Debian) and `/boot/grub2/grubenv` (BLS).
    pub grubenv: Option<String>,
    pub grubenv_bls: Option<String>,
    /// `/boot/loader/entries/*.conf`: file name and text.
    pub bls_entries: Vec<(String, String)>,
    pub has_update_grub: bool,
    pub has_grub_script_check: bool,
}

/// One target kernel's module index.
#[derive(Debug, Clone, Default)]
pub struct KernelModules {
    pub release: String,
    /// `modules.builtin`, as module names.
    pub builtin: Option<BTreeSet<String>>,
    /// `modules.dep` as module names; `None` when it is absent or empty.
    pub index: Option<BTreeSet<String>>,
    /// With no index: the `.ko` files under `/lib/modules/RELEASE`.
    pub ko_files: BTreeSet<String>,
    /// Whether `/lib/modules/RELEASE/kernel` exists.
    pub has_kernel_dir: bool,
}

/// Who uses a loaded module (`/sys/module/NAME/holders`, `refcnt`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleUse {
    pub holders: Vec<String>,
    pub refcnt: u64,
}

pub const FM_UNIT: &str = "nvidia-fabricmanager.service";
pub const PERSISTENCED_UNIT: &str = "nvidia-persistenced.service";
/// The units `services.fabric-manager` enables, in that order (the persistence daemon first, as
/// NVIDIA's guide has it).
pub const FABRIC_UNITS: [&str; 2] = [PERSISTENCED_UNIT, FM_UNIT];

/// A systemd unit (or SysV script) the profile wants disabled (or, for Fabric Manager, enabled).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnitFacts {
    pub exists: bool,
    pub enabled: bool,
    /// Asked of systemd only where the running system may be changed.
    pub active: bool,
}

/// What `pcie.acs` reads.
#[derive(Debug, Clone, Default)]
pub struct PcieFacts {
    /// Why the root looks like a virtual machine, if it does.
    pub hypervisor: Option<String>,
    /// Where the root has setpci.
    pub setpci: Option<&'static str>,
    /// Whether the ACS unit is enabled (its `.wants/` link exists).
    pub unit_enabled: bool,
    /// Whether the MaxReadReq unit (`pcie.max-read-request`) is enabled.
    pub mrrs_unit_enabled: bool,
}

/// What planning asked for that was not gathered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Missed {
    pub files: BTreeSet<String>,
    pub backups: BTreeSet<String>,
    pub initramfs: BTreeSet<String>,
}

impl Missed {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.backups.is_empty() && self.initramfs.is_empty()
    }
}

#[derive(Debug, Default)]
pub struct PlanFacts {
    /// `None` on the running system; else the root, for messages.
    pub root: Option<String>,
    pub grub: GrubFacts,
    /// The kernels a module must work with: the running one on the live
    /// system, every installed one in an image.
    pub kernels: Vec<KernelModules>,
    /// For the modules the profile wants absent, when loaded.
    pub module_use: BTreeMap<String, ModuleUse>,
    pub net: NetFacts,
    /// By the name the profile gives.
    pub units: BTreeMap<String, UnitFacts>,
    pub pcie: PcieFacts,
    /// Template sources read from disk (built-in ones are in the binary).
    pub templates: BTreeMap<String, std::result::Result<String, String>>,
    /// Current content of files a plan writes.
    pub files: BTreeMap<String, FileRead>,
    /// gdrprov's backups (relative names in the state directory).
    pub backups: BTreeMap<String, std::result::Result<String, String>>,
    /// Module names inside each kernel's initramfs; `None`: no image or no lister.
    pub initramfs: BTreeMap<String, Option<BTreeSet<String>>>,
    /// Where the root has the gdrprov binary (the package's `/usr/bin` first,
    /// then a copied `/usr/local/bin`), for units that run it.
    pub gdrprov_bin: Option<&'static str>,
    /// The modules of the root disk and the boot NIC, when the profile
    /// blocks any module (`plan::modules::guard`).
    pub boot_devices: Option<crate::facts::bootdev::BootDevices>,
    /// `storage` or `network`, for blocked modules that are such drivers,
    /// where the boot devices cannot be told.
    pub driver_classes: BTreeMap<String, &'static str>,
    /// Other files asking to load a blocked module at boot.
    pub load_requests: Vec<crate::facts::loadreq::LoadRequest>,
    /// `files:` paths that lead elsewhere through a symlink: where to.
    pub file_targets: BTreeMap<String, String>,
    /// `files:` paths with a symlink on the way or at the file (the door
    /// never writes through one): the first link and what it names.
    pub file_links: BTreeMap<String, (String, String)>,
    /// Where the root has the alternatives tool (`update-alternatives`, or RHEL's
    /// `alternatives`), when the profile has `gds:` or gdrprov owns its cufile.json copy.
    pub alternatives: Option<String>,
    missed: RefCell<Missed>,
}

impl PlanFacts {
    /// How a path inside the root is shown to people (as `Host::display`).
    pub fn display(&self, path: &str) -> String {
        match &self.root {
            None => path.to_string(),
            Some(r) => format!("{r}{path}"),
        }
    }

    /// A file's current content; a read error becomes the plan's error.
    pub fn file(&self, path: &str) -> Result<Option<&str>> {
        match self.files.get(path) {
            Some(Ok(t)) => Ok(t.as_deref()),
            Some(Err(e)) => Err(Error::Refused(e.clone())),
            None => {
                self.missed.borrow_mut().files.insert(path.to_string());
                Ok(None)
            }
        }
    }

    /// A file's content as a fact: unreadable is absent.
    pub fn file_fact(&self, path: &str) -> Option<&str> {
        self.file(path).ok().flatten()
    }

    pub fn backup(&self, rel: &str) -> Result<String> {
        match self.backups.get(rel) {
            Some(Ok(t)) => Ok(t.clone()),
            Some(Err(e)) => Err(Error::Refused(e.clone())),
            None => {
                self.missed.borrow_mut().backups.insert(rel.to_string());
                Ok(String::new())
            }
        }
    }

    /// Whether the initramfs of `kernel` carries the module.
    pub fn in_initramfs(&self, kernel: &str, module: &str) -> bool {
        match self.initramfs.get(kernel) {
            Some(listing) => listing.as_ref().is_some_and(|l| l.contains(&norm(module))),
            None => {
                self.missed
                    .borrow_mut()
                    .initramfs
                    .insert(kernel.to_string());
                false
            }
        }
    }

    /// What planning asked for and did not find, and forgets it.
    pub fn take_missed(&self) -> Missed {
        std::mem::take(&mut *self.missed.borrow_mut())
    }

    /// Gathers everything but the files, backups and initramfs listings;
    /// `desired` is the profile resolved for this host (`plan::prepare`).
    pub fn gather(
        host: &Host,
        facts: &Facts,
        desired: &Composed,
        state: &State,
        live_changes: bool,
    ) -> PlanFacts {
        let doc = &desired.doc;
        let mut pf = PlanFacts {
            root: (!host.is_live()).then(|| host.display("")),
            grub: grub(host, facts.os.family),
            kernels: target_kernel_modules(host),
            ..PlanFacts::default()
        };
        if doc.verify.first_boot == Some(true) {
            pf.gdrprov_bin = ["/usr/bin/gdrprov", "/usr/local/bin/gdrprov"]
                .into_iter()
                .find(|p| host.exists(p));
        }
        if live_changes {
            pf.module_use = module_use(host, &doc.modules.absent);
        }
        let blocked = crate::profile::guard::blocked_modules(desired);
        if !blocked.is_empty() {
            boot_guard_facts(host, doc, &blocked, &mut pf);
        }
        for f in &doc.files {
            let to = host.resolve(&f.path).ok().map(|r| r.logical);
            if let Some(to) = to.filter(|to| *to != f.path) {
                pf.file_targets.insert(f.path.clone(), to);
            }
            if let Some(link) = host.first_link(&f.path) {
                pf.file_links.insert(f.path.clone(), link);
            }
        }
        if let Some(mtu) = &doc.network.mtu {
            pf.net = crate::facts::net::probe(host, &facts.rdma_devices, &mtu.devices);
        }
        pf.units = units(host, facts, doc, live_changes);
        if doc.gds.mode.is_some()
            || state
                .files
                .contains_key(crate::plan::modules::gds_cufile::COPY)
        {
            pf.alternatives = ["update-alternatives", "alternatives"]
                .into_iter()
                .find_map(|t| host.find_program(t));
        }
        if doc.pcie.acs == Some(crate::profile::AcsMode::Disable)
            || doc.pcie.max_read_request.is_some()
        {
            pf.pcie = pcie_facts(host);
        }
        for f in &doc.files {
            let Some(t) = &f.template else { continue };
            if crate::profile::builtin::template(t).is_some() || pf.templates.contains_key(t) {
                continue;
            }
            let src = crate::host::read_local_text(std::path::Path::new(t), ReadLimit::Template)
                .map_err(|e| e.to_string());
            pf.templates.insert(t.clone(), src);
        }
        // The files planning will certainly ask for.
        let paths: Vec<String> = state
            .files
            .keys()
            .cloned()
            .chain(doc.files.iter().map(|f| f.path.clone()))
            .collect();
        pf.read_files(host, &paths);
        pf
    }

    /// Reads files for editing (those not read yet).
    pub fn read_files(&mut self, host: &Host, paths: &[String]) {
        for p in paths {
            if self.files.contains_key(p) {
                continue;
            }
            // Logged as a fact so that a snapshot keeps the file.
            let _ = host.exists(p);
            let r = host.read_text(p).map_err(|e| e.to_string());
            if matches!(r, Ok(Some(_))) {
                let _ = host.read_fact(p);
            }
            self.files.insert(p.clone(), r);
        }
    }

    pub fn read_backups(&mut self, store: &crate::journal::StateStore, rels: &[String]) {
        for rel in rels {
            if !self.backups.contains_key(rel) {
                let r = store.read_backup(rel).map_err(|e| e.to_string());
                self.backups.insert(rel.clone(), r);
            }
        }
    }

    pub fn list_initramfs(&mut self, host: &Host, family: OsFamily, kernels: &[String]) {
        for k in kernels {
            if !self.initramfs.contains_key(k) {
                let l = initramfs_modules(host, family, k);
                self.initramfs.insert(k.clone(), l);
            }
        }
    }
}

/// The drop-ins grub-mkconfig sources after `/etc/default/grub`, as paths
/// in its order (`gdrprov_boot::grub_defaults::dropin_set`: `*.cfg` of
/// `/bin/sh`, no dotfile, byte order); a name that is not UTF-8 is in the
/// set as an `Err` naming it, so that whoever reads the set refuses it
/// rather than skipping it. Every reader of the GRUB defaults takes this.
pub fn grub_defaults_set(host: &Host) -> Vec<(String, std::result::Result<(), String>)> {
    use gdrprov_boot::grub_defaults::{dropin_set, DROPIN_DIR};
    let names = host.list_dir(DROPIN_DIR);
    match dropin_set(&names) {
        Ok(set) => set
            .into_iter()
            .map(|n| (format!("{DROPIN_DIR}/{n}"), Ok(())))
            .collect(),
        Err(e) => vec![(format!("{DROPIN_DIR}/{}", e.shown), Err(e.to_string()))],
    }
}

/// `/etc/default/grub` and its drop-ins, GRUB's config and environment, the
/// BLS entries (RHEL family), and which GRUB tools the root has.
fn grub(host: &Host, family: OsFamily) -> GrubFacts {
    const DEFAULTS: &str = "/etc/default/grub";
    let read = |p: &str| -> FileRead {
        let r = host.read_text(p).map_err(|e| e.to_string());
        if matches!(r, Ok(Some(_))) {
            let _ = host.read_fact(p);
        }
        r
    };
    let mut defaults = vec![(DEFAULTS.to_string(), read(DEFAULTS))];
    for (path, r) in grub_defaults_set(host) {
        defaults.push((path.clone(), r.and_then(|()| read(&path))));
    }
    let bls = family == OsFamily::Rhel;
    let bls_entries = if bls {
        host.list_dir("/boot/loader/entries")
            .into_iter()
            .filter(|n| n.ends_with(".conf"))
            .filter_map(|n| {
                let t = host.read_fact(&format!("/boot/loader/entries/{n}"))?;
                Some((n, t))
            })
            .collect()
    } else {
        Vec::new()
    };
    GrubFacts {
        defaults,
        cfg: host.read_fact("/boot/grub/grub.cfg"),
        grubenv: (!bls)
            .then(|| host.read_fact("/boot/grub/grubenv"))
            .flatten(),
        grubenv_bls: bls.then(|| host.read_fact("/boot/grub2/grubenv")).flatten(),
        bls_entries,
        has_update_grub: host.exists("/usr/sbin/update-grub") || host.exists("/sbin/update-grub"),
        has_grub_script_check: ["/usr/bin/grub-script-check", "/bin/grub-script-check"]
            .iter()
            .any(|p| host.exists(p)),
    }
}

/// How each module the profile unloads is in use now (its holders and reference count).
fn module_use(host: &Host, absent: &[String]) -> BTreeMap<String, ModuleUse> {
    let mut out = BTreeMap::new();
    for m in absent {
        let n = norm(m);
        out.insert(
            n.clone(),
            ModuleUse {
                holders: host.list_dir(&format!("/sys/module/{n}/holders")),
                refcnt: host
                    .read_fact(&format!("/sys/module/{n}/refcnt"))
                    .and_then(|s| s.trim().parse().ok())
                    .unwrap_or(0),
            },
        );
    }
    out
}

/// The services planning looks at: nvidia_peermem's own unit on an openibd host, those the
/// profile disables, Fabric Manager's when the profile asks for it.
fn units(
    host: &Host,
    facts: &Facts,
    doc: &crate::profile::ProfileDoc,
    live_changes: bool,
) -> BTreeMap<String, UnitFacts> {
    let mut out = BTreeMap::new();
    // nvidia_peermem's own unit on an openibd host (modules/kmod.rs).
    let unit = crate::facts::ofed::PEERMEM_UNIT_NAME;
    if facts.ofed.openibd.is_some()
        && doc
            .modules
            .present
            .iter()
            .any(|m| norm(m) == "nvidia_peermem")
    {
        out.insert(unit.to_string(), unit_facts(host, unit, live_changes));
    }
    for name in &doc.services.disabled {
        out.insert(name.clone(), unit_facts(host, name, live_changes));
    }
    if matches!(
        doc.services.fabric_manager,
        Some(crate::profile::FabricManagerMode::Required | crate::profile::FabricManagerMode::Auto)
    ) {
        for name in FABRIC_UNITS {
            out.insert(name.into(), unit_facts(host, name, live_changes));
        }
    }
    out
}

/// What disabling ACS needs to know: the hypervisor, setpci, whether its unit is enabled.
fn pcie_facts(host: &Host) -> PcieFacts {
    PcieFacts {
        hypervisor: crate::facts::platform::hypervisor(host),
        setpci: [
            "/usr/sbin/setpci",
            "/usr/bin/setpci",
            "/sbin/setpci",
            "/bin/setpci",
        ]
        .into_iter()
        .find(|p| host.exists(p)),
        unit_enabled: host
            .exists("/etc/systemd/system/multi-user.target.wants/gdrprov-acs.service"),
        mrrs_unit_enabled: host.exists(crate::plan::modules::pcie_mrrs::UNIT_WANTS),
    }
}

/// What the guard rails and the load-request check read for a profile that
/// blocks modules: the boot devices' modules (or, where they cannot be told,
/// which blocked modules are storage or network drivers) and other files'
/// requests to load them.
fn boot_guard_facts(
    host: &Host,
    doc: &crate::profile::ProfileDoc,
    blocked: &[(String, String)],
    pf: &mut PlanFacts,
) {
    let b = crate::facts::bootdev::probe(host);
    if b.root_disk.is_err() || b.boot_nic.is_err() {
        for (m, _) in blocked {
            if let Some(class) = crate::facts::bootdev::driver_class(host, m) {
                pf.driver_classes.insert(norm(m), class);
            }
        }
    }
    pf.boot_devices = Some(b);
    pf.load_requests = crate::facts::loadreq::scan(host, &doc.modules.absent);
    let files: Vec<String> = pf
        .load_requests
        .iter()
        .filter(|r| r.editable)
        .map(|r| r.file.clone())
        .collect();
    pf.read_files(host, &files);
}

fn unit_facts(host: &Host, name: &str, live_changes: bool) -> UnitFacts {
    const UNIT_DIRS: &[&str] = &[
        "/etc/systemd/system",
        "/usr/lib/systemd/system",
        "/lib/systemd/system",
    ];
    let unit = if name.contains('.') {
        name.to_string()
    } else {
        format!("{name}.service")
    };
    let exists = UNIT_DIRS
        .iter()
        .any(|d| host.exists(&format!("{d}/{unit}")))
        || host.exists(&format!("/etc/init.d/{name}"));
    if !exists {
        return UnitFacts::default();
    }
    // Enabled = a `*.wants/` link to the unit, or a SysV start link.
    let wants = host
        .list_dir("/etc/systemd/system")
        .into_iter()
        .filter(|d| d.ends_with(".wants") || d.ends_with(".requires"))
        .any(|d| host.exists(&format!("/etc/systemd/system/{d}/{unit}")));
    let sysv = (2..=5).any(|level| {
        host.list_dir(&format!("/etc/rc{level}.d")).iter().any(|l| {
            l.starts_with('S')
                && l.trim_start_matches(|c: char| c == 'S' || c.is_ascii_digit()) == name
        })
    });
    UnitFacts {
        exists,
        enabled: wants || sysv,
        active: live_changes
            && host
                .query(&["systemctl", "is-active", "--quiet", &unit])
                .is_some_and(|o| o.success()),
    }
}
