use super::*;
use crate::facts::pcie::{Distance, PciePath};

fn path(gpu: &str, nic: &str, d: Distance) -> PciePath {
    PciePath {
        gpu: gpu.into(),
        nic: nic.into(),
        nic_pci: String::new(),
        gpu_numa: Some(0),
        nic_numa: Some(0),
        common_bridge: None,
        distance: d,
        bridges: Vec::new(),
    }
}

fn names(n: &[&str]) -> Vec<String> {
    n.iter().map(|s| s.to_string()).collect()
}

#[test]
fn each_nic_gets_its_nearest_gpu_in_name_order() {
    use Distance::*;
    let paths = [
        path("0000:1b:00.0", "mlx5_0", PIX),
        path("0000:1b:00.0", "mlx5_1", SYS),
        path("0000:9b:00.0", "mlx5_0", SYS),
        path("0000:9b:00.0", "mlx5_1", PXB),
    ];
    let rails = plan(&names(&["mlx5_1", "mlx5_0"]), &paths);
    assert_eq!(rails.len(), 2);
    assert_eq!((rails[0].index, rails[0].nic.as_str()), (0, "mlx5_0"));
    assert_eq!(rails[0].gpu_pci.as_deref(), Some("0000:1b:00.0"));
    assert_eq!(rails[0].distance, Some(PIX));
    assert_eq!(rails[1].gpu_pci.as_deref(), Some("0000:9b:00.0"));
    assert_eq!(rails[1].distance, Some(PXB));
    assert!(rails.iter().all(|r| r.note.is_none()));
}

#[test]
fn two_gpus_equally_near_are_said_not_guessed() {
    use Distance::*;
    let paths = [
        path("0000:1b:00.0", "mlx5_0", PXB),
        path("0000:1c:00.0", "mlx5_0", PXB),
    ];
    let rails = plan(&names(&["mlx5_0"]), &paths);
    assert_eq!(rails[0].gpu_pci, None);
    let note = rails[0].note.as_deref().unwrap_or("");
    assert!(note.contains("ambiguous") && note.contains("0000:1b:00.0, 0000:1c:00.0"));
    assert!(note.contains("PXB from mlx5_0"), "{note}");
}

#[test]
fn one_gpu_nearest_to_two_nics_is_said_for_both() {
    use Distance::*;
    let paths = [
        path("0000:1b:00.0", "mlx5_0", PIX),
        path("0000:1b:00.0", "mlx5_1", PIX),
    ];
    let rails = plan(&names(&["mlx5_0", "mlx5_1"]), &paths);
    for r in &rails {
        assert_eq!(r.gpu_pci, None);
        let note = r.note.as_deref().unwrap_or("");
        assert!(note.contains("GPU 0000:1b:00.0 is the nearest GPU of mlx5_0 and mlx5_1"));
    }
}

#[test]
fn a_nic_without_a_path_has_no_gpu() {
    let rails = plan(&names(&["rxe0"]), &[]);
    assert_eq!(rails[0].gpu_pci, None);
    assert!(rails[0]
        .note
        .as_deref()
        .unwrap_or("")
        .contains("no PCIe path"));
}

#[test]
fn pci_keys_match_cuda_and_sysfs() {
    assert_eq!(pci_key("00000000:3B:00.0"), "0000:3b:00.0");
    assert_eq!(pci_key("0000:3b:00.0"), "0000:3b:00.0");
}

#[test]
fn the_listener_refuses_a_rail_that_is_not_its_own() {
    let tag = |index, count, nic: &str| RailTag {
        index,
        count,
        nic: nic.into(),
    };
    let mine = tag(1, 2, "mlx5_1");
    assert!(check_tag(Some(&tag(1, 2, "mlx5_3")), Some(&mine)).is_ok());
    assert!(check_tag(None, None).is_ok());
    assert!(check_tag(None, Some(&mine))
        .unwrap_err()
        .contains("without --all-nics"));
    assert!(check_tag(Some(&mine), None)
        .unwrap_err()
        .contains("this listener serves one NIC"));
    assert!(check_tag(Some(&tag(1, 4, "mlx5_3")), Some(&mine))
        .unwrap_err()
        .contains("the client has 4 rail(s), this listener 2"));
    assert!(check_tag(Some(&tag(0, 2, "mlx5_3")), Some(&mine))
        .unwrap_err()
        .contains("rail 0 (mlx5_3) but this listener serves rail 1 (mlx5_1)"));
}

/// An empty root: no NIC, no rail (tests/pair_rails.rs builds a two-rail fixture root).
#[test]
fn discover_on_an_empty_root_has_no_rail() {
    let dir = tempfile::tempdir().unwrap();
    let host = Host::open(dir.path(), true).unwrap();
    assert!(discover(&host).is_empty());
}

#[test]
fn each_rail_session_gets_its_nic_gpu_and_tag() {
    use crate::bench::pair::allnics::{describe, run_rails};
    use crate::bench::pair::PairOptions;
    // `bench pair h --all-nics` (src/commands/bench.rs tests the parsing).
    let opts = PairOptions {
        all_nics: true,
        ..PairOptions::client("h")
    };
    let rail = Rail {
        index: 1,
        nic: "mlx5_1".into(),
        gpu_pci: Some("0000:9b:00.0".into()),
        distance: Some(Distance::PIX),
        note: None,
    };
    let o = super::super::allnics::rail_options_for_test(&opts, &rail, 2);
    assert_eq!(o.device.as_deref(), Some("mlx5_1"));
    assert_eq!(o.gpu_pci.as_deref(), Some("0000:9b:00.0"));
    assert_eq!(o.rail.as_ref().map(|t| (t.index, t.count)), Some((1, 2)));
    assert!(!o.all_nics);
    assert_eq!(
        describe(&rail, 2),
        "rail 1 of 2: mlx5_1 <-> GPU 0000:9b:00.0 (PIX)"
    );
    let e = run_rails(&opts, Vec::new(), &|_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("no RDMA NIC with an ACTIVE port"), "{e}");
}

/// Issue 37: `--all-nics --listen` makes its secret only once a rail's
/// listener is bound (before, it wrote the token file first, and a listener
/// that could bind no rail left it behind, told of but never used).
#[test]
fn all_nics_listener_that_binds_no_rail_leaves_no_token_file() {
    use crate::bench::pair::allnics::run_rails;
    use crate::bench::pair::PairOptions;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("new.token");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let opts = PairOptions {
        all_nics: true,
        listen: Some("127.0.0.1".into()),
        port: taken.local_addr().unwrap().port(),
        token_file: Some(token.clone()),
        timeout: std::time::Duration::from_secs(5),
        ..PairOptions::client("")
    };
    let rail = Rail {
        index: 0,
        nic: "mlx5_0".into(),
        gpu_pci: None,
        distance: None,
        note: None,
    };
    let said = std::cell::RefCell::new(Vec::<String>::new());
    let notes = |s: &str| said.borrow_mut().push(s.to_string());
    let out = run_rails(&opts, vec![rail], &notes).unwrap();
    assert!(!out.passed);
    let error = out.rails[0].error.as_deref().unwrap_or("");
    assert!(error.contains("cannot listen"), "{error}");
    assert!(
        !crate::host::local_exists(&token),
        "left {}",
        token.display()
    );
    assert!(
        !said.borrow().iter().any(|s| s.contains("new one is in")),
        "{:?}",
        said.borrow()
    );
}
