//! What a profile's YAML types cannot check, section by section: one-line
//! text, module names by their grammar (`crate::grammar::ModuleName`, as
//! modprobe compares them), NCCL settings, network device patterns. Called
//! by `load::validate` on every document loaded, a parent's too.

use super::model::*;
use crate::grammar::{ModuleName, ProfileName};

pub type Check = std::result::Result<(), String>;

/// `name:` and `description:`: one line each, of a stated length (a folded
/// YAML block's final newline is dropped).
pub fn check_text(doc: &mut ProfileDoc) -> Check {
    use super::text::{check_line, MAX_DESCRIPTION};
    if let Some(n) = &doc.name {
        ProfileName::parse(n).map_err(|e| format!("name: {e}"))?;
    }
    if let Some(d) = &mut doc.description {
        d.truncate(d.trim_end_matches('\n').len());
        check_line("description", d, MAX_DESCRIPTION).map_err(|e| {
            format!("{e} (a folded block, `description: >-`, makes one line of several)")
        })?;
    }
    Ok(())
}

/// `modules:` and `services:`: names and options. Module names by their
/// grammar ([`ModuleName`]), kept as modprobe compares them (`-` is `_`):
/// one module named both present and absent, or given options twice under
/// two spellings, is refused.
pub fn check_modules(doc: &mut ProfileDoc) -> Check {
    let m = &mut doc.modules;
    for (key, list) in [
        ("modules.present", &mut m.present),
        ("modules.absent", &mut m.absent),
        ("modules.allow-blocking", &mut m.allow_blocking),
    ] {
        let mut seen = Vec::new();
        for name in list.iter() {
            let n = ModuleName::parse(name).map_err(|why| format!("{key}: {why}"))?;
            if !seen.contains(&n) {
                seen.push(n);
            }
        }
        *list = seen.into_iter().map(String::from).collect();
    }
    if let Some(both) = m.present.iter().find(|x| m.absent.contains(x)) {
        return Err(format!(
            "`{both}` is in both modules.present and modules.absent (modprobe reads `-` and `_` alike); keep it in one"
        ));
    }
    let mut options = std::collections::BTreeMap::new();
    for (name, opts) in std::mem::take(&mut m.options) {
        let n = ModuleName::parse(&name).map_err(|why| format!("modules.options: {why}"))?;
        if opts.chars().any(|c| c.is_control() || c == '#') {
            return Err(format!(
                "modules.options.{n}: the value contains a newline, control character or `#`; write `key=value` pairs separated by spaces"
            ));
        }
        if options.insert(n.to_string(), opts).is_some() {
            return Err(format!(
                "modules.options: `{n}` is given twice, spelled with `-` and with `_` (modprobe reads them alike); keep one"
            ));
        }
    }
    m.options = options;
    for s in &doc.services.disabled {
        if s.is_empty()
            || !s
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
        {
            return Err(format!(
                "services.disabled: `{s}` is not a systemd unit name (letters, digits, `-_.@`)"
            ));
        }
    }
    Ok(())
}

/// `nccl:`: keys and single-line values NCCL reads as written.
pub fn check_nccl(doc: &ProfileDoc) -> Check {
    for (k, v) in &doc.nccl {
        // NCCL sets every line of nccl.conf in its environment before it
        // loads its net plugin: libfabric's FI_ settings work there too.
        if !(k.starts_with("NCCL_") || k.starts_with("FI_"))
            || !k
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(format!(
                "nccl: `{k}` is not an NCCL setting (NCCL_ or libfabric's FI_ followed by capitals, digits or `_`)"
            ));
        }
        if let Some(s) = v.as_str() {
            super::text::check_line(&format!("nccl.{k}"), s, super::text::MAX_VALUE)?;
        }
        let ok = matches!(
            v,
            serde_json::Value::String(_)
                | serde_json::Value::Number(_)
                | serde_json::Value::Bool(_)
        );
        if !ok {
            return Err(format!("nccl.{k}: give a single-line string or a number"));
        }
        // nccl.conf has no trailing comments: NCCL skips a line that starts
        // with `#` and takes everything after `=` literally, so a note
        // written after the value becomes part of it.
        if let Some(s) = v.as_str().filter(|s| s.contains('#')) {
            let before = s.split('#').next().unwrap_or("").trim_end();
            return Err(format!(
                "nccl.{k}: the value `{s}` contains `#`; /etc/nccl.conf has no comments after a value, so NCCL would take all of it, `#` included, as the value. Write `{before}` and put the note in a YAML comment on its own line"
            ));
        }
    }
    Ok(())
}

/// `network.lossless:` and `pfc-priority:`: a priority 0..=7, only with a wish for PFC.
fn check_lossless(n: &Network) -> Check {
    let Some(p) = n.pfc_priority else {
        return Ok(());
    };
    if p > 7 {
        return Err(format!(
            "network.pfc-priority: {p} is not a priority; give 0 to 7 (RoCE traffic usually runs on 3)"
        ));
    }
    match n.lossless {
        Some(Lossless::Pfc | Lossless::PfcAndEcn) => Ok(()),
        other => Err(format!(
            "network.pfc-priority: it applies only with `lossless: pfc` or `lossless: pfc-and-ecn` (lossless is {}); set one of them or remove pfc-priority",
            other.map_or("unset", Lossless::word)
        )),
    }
}

/// `network.mtu:`: one match per device entry, valid patterns; `network.lossless:`.
pub fn check_network(doc: &ProfileDoc) -> Check {
    check_lossless(&doc.network)?;
    if let Some(m) = &doc.network.mtu {
        if m.devices.is_empty() {
            return Err(
                "network.mtu.devices: name at least one match, e.g. `{ rdma: \"erdma_*\" }`".into(),
            );
        }
        for (i, d) in m.devices.iter().enumerate() {
            let set: Vec<&String> = [&d.rdma, &d.driver, &d.name]
                .into_iter()
                .flatten()
                .collect();
            if set.len() != 1 {
                return Err(format!(
                    "network.mtu.devices[{i}]: give exactly one of `rdma`, `driver` or `name` ({} given)",
                    set.len()
                ));
            }
            let v = set[0];
            if v.is_empty()
                || v.len() > 64
                || !v
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.:*?@".contains(c))
            {
                return Err(format!(
                    "network.mtu.devices[{i}]: `{v}` is not a device name or pattern (letters, digits, `-_.:@`, wildcards `*` `?`)"
                ));
            }
            if let Err(e) = gdrprov_boot::wildcard::Wildcard::new(v) {
                return Err(format!(
                    "network.mtu.devices[{i}]: `{v}` is not a valid pattern ({}); use `*` and `?` as wildcards",
                    e.kind()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(yaml: &str) -> ProfileDoc {
        super::super::load::parse(yaml, "t").unwrap()
    }

    /// Issue 43: `present: [nvidia-peermem]` beside `absent:
    /// [nvidia_peermem]` wrote both; modprobe reads them as one module.
    #[test]
    fn one_module_under_two_spellings_is_one_module() {
        for (present, absent) in [
            ("nvidia-peermem", "nvidia_peermem"),
            ("nvidia_peermem", "nvidia-peermem"),
            ("ib_core", "ib_core"),
        ] {
            let mut d = doc(&format!(
                "modules: {{ present: [{present}], absent: [{absent}] }}\n"
            ));
            let e = check_modules(&mut d).unwrap_err();
            assert!(e.contains("both modules.present and modules.absent"), "{e}");
        }
        let mut d = doc("modules: { options: { ib-core: \"a=1\", ib_core: \"a=2\" } }\n");
        assert!(check_modules(&mut d).unwrap_err().contains("given twice"));
        let mut d = doc(
            "modules: { present: [nvidia-peermem, nvidia_peermem], absent: [nv-peer-mem], allow-blocking: [nv-peer-mem], options: { ib-core: \"a=1\" } }\n",
        );
        check_modules(&mut d).unwrap();
        assert_eq!(d.modules.present, vec!["nvidia_peermem"]);
        assert_eq!(d.modules.absent, vec!["nv_peer_mem"]);
        assert_eq!(d.modules.allow_blocking, vec!["nv_peer_mem"]);
        assert!(d.modules.options.contains_key("ib_core"));
    }

    #[test]
    fn profile_names_are_safe_file_names() {
        for bad in ["\"\"", "\"..\"", "a/b", "\".\"", "-x", "\"a\\nb\""] {
            let mut d = doc(&format!("name: {bad}\nnccl: {{ NCCL_DEBUG: WARN }}\n"));
            let e = check_text(&mut d).unwrap_err();
            assert!(e.contains("profile name"), "{bad}: {e}");
        }
    }
}
