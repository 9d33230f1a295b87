//! The NVIDIA kernel driver's parameters: every line of `/proc/driver/nvidia/params`
//! (`EnablePCIERelaxedOrderingMode: 0`, `EnableResizableBar: 0`, ...), its
//! `RegistryDwords` split into `key=value` settings, beside the module options that set
//! them (`options nvidia NVreg_...=` in modprobe.d, `nvidia.NVreg_...=` on the kernel
//! command line). The one home of these facts (issue 46); the storage checks read them
//! here too.

use super::kmod::MODPROBE_DIRS;
use crate::host::Host;
use serde::Serialize;

/// Where the driver shows its parameters while it is loaded.
pub const PARAMS: &str = "/proc/driver/nvidia/params";

/// One module option that sets a driver parameter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleOption {
    /// The parameter, without its `NVreg_` prefix (`EnableResizableBar`).
    pub name: String,
    pub value: String,
    /// The file that sets it (`/etc/modprobe.d/nvidia.conf`), or `/proc/cmdline`.
    pub file: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct NvidiaParams {
    /// `/proc/driver/nvidia/params` when it was read; `None`: the driver is not loaded
    /// (or the root is an image), and `params` is empty.
    pub source: Option<String>,
    /// Every parameter in the file's order, the value as written (quotes removed).
    pub params: Vec<(String, String)>,
    /// `RegistryDwords` split at `;` into its `key=value` settings.
    pub registry_dwords: Vec<(String, String)>,
    /// The `NVreg_` options of modprobe.d and the kernel command line, in the order read.
    pub module_options: Vec<ModuleOption>,
}

impl NvidiaParams {
    /// A parameter's value as the driver reports it (`EnableResizableBar` → `0`).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A numeric parameter as on (non-zero) or off; `None` when absent or not a number.
    pub fn flag(&self, name: &str) -> Option<bool> {
        self.get(name)?.parse::<u64>().ok().map(|v| v != 0)
    }

    /// A `RegistryDwords` setting.
    pub fn registry(&self, key: &str) -> Option<&str> {
        self.registry_dwords
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The module option that sets this parameter (the last one read wins, as modprobe).
    pub fn option_for(&self, name: &str) -> Option<&ModuleOption> {
        self.module_options.iter().rev().find(|o| o.name == name)
    }
}

/// Parses `/proc/driver/nvidia/params` (`Name: value` lines; strings in quotes).
pub fn parse_params(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let k = k.trim();
            if k.is_empty() || k.contains(char::is_whitespace) {
                return None;
            }
            Some((k.to_string(), unquote(v.trim()).to_string()))
        })
        .collect()
}

fn unquote(v: &str) -> &str {
    v.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(v)
}

/// Splits a `RegistryDwords` value (`RMForceStaticBar1=1;RmEnableFoo=0x2`) into its settings.
pub fn split_registry_dwords(v: &str) -> Vec<(String, String)> {
    v.split(';')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (k.to_string(), v.trim().to_string()))
        })
        .collect()
}

/// The `NVreg_` options of `options nvidia ...` lines.
pub fn parse_options(text: &str, file: &str, out: &mut Vec<ModuleOption>) {
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut w = line.split_whitespace();
        if w.next() != Some("options") || w.next() != Some("nvidia") {
            continue;
        }
        out.extend(w.filter_map(|kv| nvreg(kv, file)));
    }
}

fn nvreg(kv: &str, file: &str) -> Option<ModuleOption> {
    let (k, v) = kv.split_once('=')?;
    let name = k.strip_prefix("NVreg_")?;
    Some(ModuleOption {
        name: name.to_string(),
        value: unquote(v).to_string(),
        file: file.to_string(),
    })
}

pub fn probe(host: &Host, cmdline: Option<&str>) -> NvidiaParams {
    let text = host.read_fact(PARAMS);
    let params = text.as_deref().map(parse_params).unwrap_or_default();
    let registry_dwords = params
        .iter()
        .find(|(k, _)| k == "RegistryDwords")
        .map(|(_, v)| split_registry_dwords(v))
        .unwrap_or_default();
    let mut module_options = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for dir in MODPROBE_DIRS {
        let Some(real) = host.canonical(dir) else {
            continue;
        };
        if seen.contains(&real) {
            continue;
        }
        seen.push(real);
        for f in host.list_dir(dir).iter().filter(|f| f.ends_with(".conf")) {
            let path = format!("{dir}/{f}");
            if let Some(t) = host.read_fact(&path) {
                parse_options(&t, &path, &mut module_options);
            }
        }
    }
    for arg in cmdline.unwrap_or("").split_whitespace() {
        if let Some(kv) = arg.strip_prefix("nvidia.") {
            module_options.extend(nvreg(kv, "/proc/cmdline"));
        }
    }
    NvidiaParams {
        source: text.map(|_| PARAMS.to_string()),
        params,
        registry_dwords,
        module_options,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines of the lent H200 machine's file (driver 580 open).
    const H200: &str = "EnableMSI: 1\nEnablePCIERelaxedOrderingMode: 0\nEnableResizableBar: 0\n\
        DmaRemapPeerMmio: 1\nCoherentGPUMemoryMode: \"\"\n\
        RegistryDwords: \"RMForceStaticBar1=1;RmFoo = 0x2\"\nRmMsg: \"\"\n";

    #[test]
    fn params_and_registry_dwords_are_split() {
        let p = parse_params(H200);
        assert_eq!(p.len(), 7);
        let n = NvidiaParams {
            source: Some(PARAMS.into()),
            registry_dwords: split_registry_dwords(
                p.iter()
                    .find(|(k, _)| k == "RegistryDwords")
                    .map_or("", |(_, v)| v),
            ),
            params: p,
            module_options: Vec::new(),
        };
        assert_eq!(n.flag("EnablePCIERelaxedOrderingMode"), Some(false));
        assert_eq!(n.flag("DmaRemapPeerMmio"), Some(true));
        assert_eq!(n.get("CoherentGPUMemoryMode"), Some(""));
        assert_eq!(n.registry("RMForceStaticBar1"), Some("1"));
        assert_eq!(n.registry("RmFoo"), Some("0x2"));
        assert_eq!(n.flag("Absent"), None);
    }

    #[test]
    fn module_options_name_their_file() {
        let mut o = Vec::new();
        parse_options(
            "# x\noptions nvidia NVreg_EnableResizableBar=1 NVreg_RegistryDwords=\"A=1;B=2\"\noptions nvidia_uvm x=1\n",
            "/etc/modprobe.d/nv.conf",
            &mut o,
        );
        assert_eq!(o.len(), 2);
        assert_eq!(o[0].name, "EnableResizableBar");
        assert_eq!(o[1].value, "A=1;B=2");
        let n = NvidiaParams {
            module_options: o,
            ..NvidiaParams::default()
        };
        assert_eq!(
            n.option_for("EnableResizableBar").map(|o| o.value.as_str()),
            Some("1")
        );
    }
}
