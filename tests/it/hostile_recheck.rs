//! `recheck` finds the profiles of the last apply the way apply recorded
//! them (issue 37): a file profile named like a built-in is never judged
//! as the built-in, a built-in never as a file of the same name in the
//! working directory, and a name that is a path never opens a file of the
//! machine running gdrprov: a file profile is read only as
//! `/etc/gdrprov/NAME.yaml` inside `--root`. Each refusal names the
//! problem and the fix, exit 1; under `--format json` one JSON document.

use crate::common::*;
use crate::util::Root;
use std::path::Path;

/// A site profile: rdma-dmabuf plus an NCCL setting the built-in lacks.
fn site(name: &str) -> String {
    format!("name: {name:?}\nextends: [rdma-dmabuf]\nnccl: {{ NCCL_SOCKET_IFNAME: site0 }}\n")
}

/// `recheck` on ROOT from DIR (the working directory); (exit, stdout, stderr).
fn recheck(root: &Root, cwd: &Path, json: bool) -> (Option<i32>, String, String) {
    let mut cmd = gdrprov();
    cmd.current_dir(cwd).args([
        "recheck",
        "--root",
        root.arg(),
        "--marker-dir",
        root.join("run/gdrprov").to_str().unwrap(),
    ]);
    if json {
        cmd.args(["--format", "json"]);
    }
    let out = cmd.output().unwrap();
    (out.status.code(), stdout_of(&out), stderr_of(&out))
}

fn apply(root: &Root, spec: &str) {
    let out = gdrprov()
        .args(["apply", spec, "--yes", "--no-exec", "--root", root.arg()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

/// Whether a recheck's JSON judged the host against the profile that was
/// not applied: the built-in against the site's `/etc/nccl.conf` (or the
/// site against the built-in's) finds NCCL_SOCKET_IFNAME to change.
fn judged_wrong(doc: &serde_json::Value) -> bool {
    doc.to_string().contains("NCCL_SOCKET_IFNAME")
}

#[test]
fn a_file_named_like_a_built_in_is_the_file_or_refused() {
    let t = tempfile::tempdir().unwrap();
    let root = Root::example("ubuntu-22.04-h100");
    let file = t.path().join("site.yaml");
    std::fs::write(&file, site("rdma-dmabuf")).unwrap();
    apply(&root, file.to_str().unwrap());
    // Not copied into the root: refused (before: judged against the built-in).
    let (code, out, err) = recheck(&root, t.path(), false);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains("the last apply used profile `rdma-dmabuf` from a file")
            && err.contains("etc/gdrprov/rdma-dmabuf.yaml")
            && err.contains("copy the profile there"),
        "{err}"
    );
    let (code, out, _) = recheck(&root, t.path(), true);
    assert_eq!(code, Some(1));
    let doc: serde_json::Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(doc["command"], "recheck");
    assert!(doc["error"]["message"]
        .as_str()
        .unwrap()
        .contains("from a file"));
    // Copied where recheck looks: judged against the file, not the built-in.
    std::fs::create_dir_all(root.join("etc/gdrprov")).unwrap();
    std::fs::copy(&file, root.join("etc/gdrprov/rdma-dmabuf.yaml")).unwrap();
    let (code, out, err) = recheck(&root, t.path(), true);
    assert!(matches!(code, Some(0 | 3)), "{err}");
    assert!(!judged_wrong(&serde_json::from_str(&out).unwrap()), "{out}");
    // Another profile's file there: refused, naming both.
    std::fs::write(root.join("etc/gdrprov/rdma-dmabuf.yaml"), site("other")).unwrap();
    let (code, _, err) = recheck(&root, t.path(), false);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("is profile `other`, not `rdma-dmabuf`"),
        "{err}"
    );
}

#[test]
fn a_built_in_is_never_a_file_of_its_name() {
    let t = tempfile::tempdir().unwrap();
    let root = Root::example("ubuntu-22.04-h100");
    apply(&root, "rdma-dmabuf");
    // A file of the built-in's name in the working directory and in the root.
    std::fs::write(t.path().join("rdma-dmabuf"), site("rdma-dmabuf")).unwrap();
    std::fs::create_dir_all(root.join("etc/gdrprov")).unwrap();
    std::fs::write(
        root.join("etc/gdrprov/rdma-dmabuf.yaml"),
        site("rdma-dmabuf"),
    )
    .unwrap();
    let (code, out, err) = recheck(&root, t.path(), true);
    assert!(matches!(code, Some(0 | 3)), "{err}");
    assert!(!judged_wrong(&serde_json::from_str(&out).unwrap()), "{out}");
    // A state of an older gdrprov (no sources): both there, refused.
    let state = root.join("var/lib/gdrprov/state.json");
    let mut s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(s["profile_sources"], serde_json::json!(["built-in"]));
    s.as_object_mut().unwrap().remove("profile_sources");
    std::fs::write(&state, s.to_string()).unwrap();
    let (code, _, err) = recheck(&root, t.path(), false);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("does not say whether") && err.contains("apply again"),
        "{err}"
    );
}

#[test]
fn a_profile_name_that_is_a_path_never_leaves_the_root() {
    let t = tempfile::tempdir().unwrap();
    let root = Root::example("ubuntu-22.04-h100");
    // `name:` an absolute path, and a profile there on this machine.
    let outside = t.path().join("evil");
    std::fs::write(t.path().join("evil.yaml"), site(outside.to_str().unwrap())).unwrap();
    let file = t.path().join("site.yaml");
    // Issue 43: such a name is not a profile name (one grammar,
    // src/grammar.rs): apply refuses it, so no state records it.
    for name in [outside.to_str().unwrap(), "../../../evil"] {
        std::fs::write(&file, site(name)).unwrap();
        let out = gdrprov()
            .args([
                "apply",
                file.to_str().unwrap(),
                "--yes",
                "--no-exec",
                "--root",
                root.arg(),
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains("not a profile name"),
            "{}",
            stderr_of(&out)
        );
    }
    // A profile of the root that extends a file outside it: refused.
    let root = Root::example("ubuntu-22.04-h100");
    std::fs::write(&file, site("site")).unwrap();
    apply(&root, file.to_str().unwrap());
    std::fs::create_dir_all(root.join("etc/gdrprov")).unwrap();
    std::fs::write(
        root.join("etc/gdrprov/site.yaml"),
        format!(
            "name: site\nextends: [{}]\n",
            t.path().join("evil.yaml").display()
        ),
    )
    .unwrap();
    let (code, _, err) = recheck(&root, t.path(), false);
    assert_eq!(code, Some(1));
    assert!(err.contains("outside the root"), "{err}");
    // Its template beside it, a symlink to a file outside the root: refused.
    std::fs::write(t.path().join("secret.txt"), "outside\n").unwrap();
    std::os::unix::fs::symlink(t.path().join("secret.txt"), root.join("etc/gdrprov/t.txt"))
        .unwrap();
    std::fs::write(
        root.join("etc/gdrprov/site.yaml"),
        "name: site\nextends: [rdma-dmabuf]\nfiles:\n  - path: /etc/x.conf\n    template: t.txt\n",
    )
    .unwrap();
    let (code, _, err) = recheck(&root, t.path(), false);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("template") && err.contains("outside the root"),
        "{err}"
    );
}

/// Everything a profile of the root names stays inside the root: the
/// templates of its `when:` parts (its own and its parent's in the root) and
/// the files its `vars` name for recheck to write (`gdrprov-textfile`,
/// `gdrprov-nfd-file`), which are files of the host the root is. Before: a
/// profile of an image naming `vars: { gdrprov-textfile: /x/y.prom }` made
/// `recheck --root IMAGE` write /x/y.prom on the machine running gdrprov.
#[test]
fn every_path_a_root_profile_names_stays_inside_the_root() {
    let t = tempfile::tempdir().unwrap();
    let root = Root::example("ubuntu-22.04-h100");
    let file = t.path().join("site.yaml");
    std::fs::write(&file, site("site")).unwrap();
    apply(&root, file.to_str().unwrap());
    let etc = root.join("etc/gdrprov");
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::write(t.path().join("secret.txt"), "outside\n").unwrap();
    std::os::unix::fs::symlink(t.path().join("secret.txt"), etc.join("t.txt")).unwrap();
    let when_file =
        "files:\n  - path: /etc/x.conf\n    template: t.txt\n    when: { arch: x86_64 }\n";
    // A `when:` file's template, a symlink out of the root: refused.
    std::fs::write(
        etc.join("site.yaml"),
        format!("name: site\nextends: [rdma-dmabuf]\n{when_file}"),
    )
    .unwrap();
    let (code, _, err) = recheck(&root, t.path(), false);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("template") && err.contains("outside the root"),
        "{err}"
    );
    // The same in a parent of the root that the profile extends.
    std::fs::write(
        etc.join("base.yaml"),
        format!("name: base\nextends: [rdma-dmabuf]\n{when_file}"),
    )
    .unwrap();
    std::fs::write(etc.join("site.yaml"), "name: site\nextends: [base]\n").unwrap();
    let (code, _, err) = recheck(&root, t.path(), false);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("outside the root"), "{err}");
    // vars: the textfile and NFD file are written inside the root, at the
    // path they name there, never through a link in the root (issue 43: a
    // link there is refused, naming it and its target; before, it was
    // resolved in the root and written where it led).
    let outside = t.path().join("out");
    std::fs::create_dir_all(&outside).unwrap();
    let prom = outside.join("gdrprov.prom");
    let nfd = outside.join("nfd");
    std::fs::create_dir_all(root.join("var/lib")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("var/lib/exporter")).unwrap();
    let vars = |nfd_at: &str| {
        format!(
            "name: site\nextends: [rdma-dmabuf]\nnccl: {{ NCCL_SOCKET_IFNAME: site0 }}\nvars: {{ gdrprov-textfile: {}, gdrprov-nfd-file: {nfd_at} }}\n",
            prom.display()
        )
    };
    std::fs::write(etc.join("site.yaml"), vars("/var/lib/exporter/nfd")).unwrap();
    let (code, out, err) = recheck(&root, t.path(), false);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains(&format!(
            "var/lib/exporter is a symlink to {}",
            outside.display()
        )),
        "{err}"
    );
    assert!(!nfd.exists(), "written outside the root");
    std::fs::write(etc.join("site.yaml"), vars(&nfd.display().to_string())).unwrap();
    let (code, out, err) = recheck(&root, t.path(), false);
    assert!(matches!(code, Some(0 | 3)), "{out}{err}");
    assert!(!prom.exists() && !nfd.exists(), "written outside the root");
    let inside = root.join(prom.strip_prefix("/").unwrap());
    assert!(
        std::fs::read_to_string(&inside)
            .unwrap()
            .contains("gdrprov_recheck"),
        "{}",
        inside.display()
    );
    assert!(root
        .join(outside.strip_prefix("/").unwrap())
        .join("nfd")
        .exists());
    // A path that is not plain: refused, naming the key and the fix; under
    // --format json one document.
    std::fs::write(
        etc.join("site.yaml"),
        "name: site\nextends: [rdma-dmabuf]\nvars: { gdrprov-textfile: ../../x.prom }\n",
    )
    .unwrap();
    let (code, out, err) = recheck(&root, t.path(), true);
    assert_eq!(code, Some(1), "{out}{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("one JSON document");
    let msg = doc["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("vars.gdrprov-textfile") && msg.contains("--textfile"),
        "{msg}"
    );
    assert!(!t.path().join("x.prom").exists());
}
