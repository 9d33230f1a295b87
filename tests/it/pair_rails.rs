//! `bench pair --all-nics` rails from a fixture root: two switches, a GPU and a NIC behind each,
//! a third NIC whose two nearest GPUs are equally near, and a NIC that is down (no rail).

use crate::hostgen;

use gdrprov::bench::pair::rails::discover;
use gdrprov::facts::pcie::Distance;
use gdrprov::host::Host;

#[test]
fn rails_pair_each_active_nic_with_its_nearest_gpu_and_say_ambiguity() {
    let g = hostgen::HostGen::new();
    let sw0 = "pci0000:00/0000:00:01.0/0000:01:00.0";
    let sw1 = "pci0000:80/0000:80:01.0/0000:81:00.0";
    let sw2 = "pci0000:40/0000:40:01.0/0000:41:00.0";
    let up = [("ACTIVE", "InfiniBand", "400 Gb/sec (4X NDR)", "", 0)];
    g.h100(&format!("{sw0}/0000:02:08.0/0000:03:00.0"), 0);
    g.rdma(
        "mlx5_0",
        Some(&format!("{sw0}/0000:02:10.0/0000:04:00.0")),
        0,
        "mlx5_core",
        &up,
    );
    g.h100(&format!("{sw1}/0000:82:08.0/0000:83:00.0"), 1);
    g.rdma(
        "mlx5_1",
        Some(&format!("{sw1}/0000:82:10.0/0000:84:00.0")),
        1,
        "mlx5_core",
        &up,
    );
    // Two GPUs behind the third switch, both PIX from mlx5_2.
    g.h100(&format!("{sw2}/0000:42:08.0/0000:43:00.0"), 0);
    g.h100(&format!("{sw2}/0000:42:0c.0/0000:44:00.0"), 0);
    g.rdma(
        "mlx5_2",
        Some(&format!("{sw2}/0000:42:10.0/0000:45:00.0")),
        0,
        "mlx5_core",
        &up,
    );
    let down = [("DOWN", "InfiniBand", "400 Gb/sec (4X NDR)", "", 0)];
    g.rdma(
        "mlx5_3",
        Some(&format!("{sw2}/0000:42:14.0/0000:46:00.0")),
        0,
        "mlx5_core",
        &down,
    );
    let host = Host::open(g.finish(), true).unwrap();
    let rails = discover(&host);
    let got: Vec<_> = rails
        .iter()
        .map(|r| (r.index, r.nic.as_str(), r.gpu_pci.as_deref(), r.distance))
        .collect();
    assert_eq!(
        got,
        [
            (0, "mlx5_0", Some("0000:03:00.0"), Some(Distance::PIX)),
            (1, "mlx5_1", Some("0000:83:00.0"), Some(Distance::PIX)),
            (2, "mlx5_2", None, Some(Distance::PIX)),
        ]
    );
    let note = rails[2].note.as_deref().unwrap_or("");
    assert!(
        note.contains("ambiguous: GPUs 0000:43:00.0, 0000:44:00.0 are all PIX from mlx5_2"),
        "{note}"
    );
}
