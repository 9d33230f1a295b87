//! `--all-nics`: one rail per RDMA NIC with an ACTIVE port, in NIC-name order (both ends sort the
//! same way, so rail N is the Nth NIC of each; the client's session for rail N carries N and the
//! count, and the listener refuses a rail that is not the one it serves). Each NIC gets its
//! nearest GPU by PCIe distance (facts::pcie, nvidia-smi topo's PIX < PXB < PHB < NODE < SYS); when two
//! GPUs are equally near one NIC, or two NICs pick the same GPU, the rail says so and gets no GPU
//! (said, not guessed).

use serde::{Deserialize, Serialize};

use crate::facts::pcie::{Distance, PciePath};
use crate::host::Host;

/// One rail of this host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rail {
    pub index: usize,
    pub nic: String,
    /// The nearest GPU's PCI address, when the mapping is unambiguous.
    pub gpu_pci: Option<String>,
    /// Its PCIe distance from the NIC.
    pub distance: Option<Distance>,
    /// Why the rail has no GPU: ambiguous, or no PCIe path.
    pub note: Option<String>,
}

/// What the client tells the listener about the rail of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RailTag {
    pub index: usize,
    pub count: usize,
    /// The client's NIC of this rail (for messages).
    pub nic: String,
}

/// The rails of NICs `nics` (any order) given every GPU <-> NIC path.
pub fn plan(nics: &[String], paths: &[PciePath]) -> Vec<Rail> {
    let mut nics: Vec<&String> = nics.iter().collect();
    nics.sort();
    nics.dedup();
    // First each NIC's nearest GPU(s), then GPUs picked by more than one NIC.
    let nearest: Vec<(Option<Distance>, Vec<&str>)> = nics
        .iter()
        .map(|n| {
            let mine: Vec<&PciePath> = paths.iter().filter(|p| &p.nic == *n).collect();
            let best = mine.iter().map(|p| p.distance).min();
            let mut gpus: Vec<&str> = mine
                .iter()
                .filter(|p| Some(p.distance) == best)
                .map(|p| p.gpu.as_str())
                .collect();
            gpus.sort_unstable();
            gpus.dedup();
            (best, gpus)
        })
        .collect();
    nics.iter()
        .zip(&nearest)
        .enumerate()
        .map(|(index, (nic, (best, gpus)))| {
            let mut rail = Rail {
                index,
                nic: (*nic).clone(),
                gpu_pci: None,
                distance: *best,
                note: None,
            };
            match gpus.as_slice() {
                [] => rail.note = Some(format!("{nic} has no PCIe path to a GPU")),
                [g] => {
                    let sharing: Vec<&str> = nics
                        .iter()
                        .zip(&nearest)
                        .filter(|(_, (_, o))| o.as_slice() == [*g])
                        .map(|(n, _)| n.as_str())
                        .collect();
                    if sharing.len() > 1 {
                        rail.note = Some(format!(
                            "ambiguous: GPU {g} is the nearest GPU of {}; name the pairing with --device and --gpu",
                            sharing.join(" and ")
                        ));
                    } else {
                        rail.gpu_pci = Some((*g).to_string());
                    }
                }
                many => {
                    rail.note = Some(format!(
                        "ambiguous: GPUs {} are all {} from {nic}; name the pairing with --device and --gpu",
                        many.join(", "),
                        best.map(|d| format!("{d:?}")).unwrap_or_default()
                    ))
                }
            }
            rail
        })
        .collect()
}

/// This host's rails: NICs with an ACTIVE port, GPUs and the PCIe paths between them.
pub fn discover(host: &Host) -> Vec<Rail> {
    use crate::facts::{gpu, pci, pcie, rdma};
    let nics: Vec<_> = rdma::probe(host)
        .into_iter()
        .filter(|d| d.ports.iter().any(|p| p.is_active()))
        .collect();
    let gpus = gpu::probe(host, &pci::devices(host));
    let paths = pcie::probe(host, &gpus, &nics);
    let names: Vec<String> = nics.iter().map(|n| n.name.clone()).collect();
    plan(&names, &paths)
}

/// `0000:3b:00.0` of a PCI bus id in any case and domain width (CUDA's `00000000:3B:00.0`).
pub fn pci_key(id: &str) -> String {
    let id = id.trim().to_ascii_lowercase();
    match id.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 => {
            format!("{}:{rest}", &domain[domain.len() - 4..])
        }
        _ => id,
    }
}

/// Whether the listener, serving rail `mine` (None: one NIC, no --all-nics), may serve the
/// session the client tagged `client`; the error names both sides.
pub fn check_tag(client: Option<&RailTag>, mine: Option<&RailTag>) -> Result<(), String> {
    match (client, mine) {
        (None, None) => Ok(()),
        (Some(t), None) => Err(format!(
            "the client runs --all-nics (rail {} of {}, {}) but this listener serves one NIC: start the listener with --all-nics too",
            t.index, t.count, t.nic
        )),
        (None, Some(m)) => Err(format!(
            "this listener serves --all-nics (rail {} of {}, {}) but the client ran without --all-nics: run the client with --all-nics too",
            m.index, m.count, m.nic
        )),
        (Some(t), Some(m)) if t.count != m.count => Err(format!(
            "the client has {} rail(s), this listener {} (NICs with an ACTIVE port): both hosts need the same number of RDMA NICs up for --all-nics",
            t.count, m.count
        )),
        (Some(t), Some(m)) if t.index != m.index => Err(format!(
            "the client is at rail {} ({}) but this listener serves rail {} ({}): start both ends again",
            t.index, t.nic, m.index, m.nic
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[path = "rails_tests.rs"]
mod tests;
