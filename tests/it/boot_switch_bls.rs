//! The boot switch last on the RHEL family (issue 37): BLS entries read by
//! grub2's blscfg, the initramfs rebuilt in place by `dracut -f --kver K`, the
//! kernel arguments changed by `grubby --update-kernel=ALL`. On a Rocky 9
//! root (a chroot with a real /bin/sh), `rdma-dmabuf` (`iommu=pt`, and
//! nvidia_peermem blocked inside the initramfs) is applied and rolled back,
//! killed after every step, and recovered: at every instant the entry's
//! options and the initramfs it loads are of one side, no held copy is left,
//! and recover gives the exact original tree (the rescue entry too, whose
//! options grubby changes without a rebuild).
//!
//! Stand-ins (Debian packages neither RHEL's dracut nor grubby), shell
//! scripts: `dracut` writes `blocked` into the image when gdrprov's modprobe.d
//! file is there, `plain` when not (the real one copies /etc/modprobe.d into
//! it); `grubby` does what grubby-bls's `update_args` does to each entry's
//! `options` line (each removed argument goes, each added one's key goes,
//! then the added ones are appended; it leaves `/etc/default/grub` alone, which
//! gdrprov edits itself); `lsinitrd` lists nvidia-peermem in the image.

use crate::boot_shapes::put;
use crate::boot_switch::{gd, held_left, kill_after, ok, planned, runs};
use crate::common::*;
use crate::reliability::{install_with_libs, is_root, write_script};
use std::path::{Path, PathBuf};

const K: &str = "5.14.0-427.13.1.el9_4.x86_64";
const ENTRY: &str =
    "/boot/loader/entries/3c1d9f0e2b7a4e5c8d6f1a2b3c4d5e6f-5.14.0-427.13.1.el9_4.x86_64.conf";
const RESCUE: &str = "/boot/loader/entries/3c1d9f0e2b7a4e5c8d6f1a2b3c4d5e6f-0-rescue.conf";
const PROFILE: [&str; 4] = ["apply", "rdma-dmabuf", "-y", "--force"];

const DRACUT: &str = "#!/bin/sh
# Stand-in for RHEL's dracut (see the test module).
[ \"$1\" = -f ] && [ \"$2\" = --kver ] || { echo \"dracut stand-in: $*\" >&2; exit 64; }
if [ -f /etc/modprobe.d/gdrprov-blacklist.conf ]; then echo blocked; else echo plain; fi > /boot/initramfs-$3.img
for f in /boot/loader/entries/*.conf; do while IFS= read -r l; do echo \"$l\"; done < $f; done > /run/boot-file-during-rebuild
exit 0
";

const GRUBBY: &str = "#!/bin/sh
# Stand-in for RHEL's grubby --update-kernel=ALL (see the test module): the
# entries' options lines, and grubenv's kernelopts as grubby-bls edits it.
add= rm=
for a in \"$@\"; do
  case $a in
    --update-kernel=ALL) ;;
    --args=*) add=${a#--args=} ;;
    --remove-args=*) rm=${a#--remove-args=} ;;
    *) echo \"grubby stand-in: unknown argument $a\" >&2; exit 64 ;;
  esac
done
# newopts OPTIONS: each removed argument goes, each added one's key goes,
# then the added ones are appended.
newopts() {
  set -f
  new=
  for t in $1; do
    keep=y
    for r in $rm; do
      case $r in
        *=*) [ \"$t\" = \"$r\" ] && keep=n ;;
        *) case $t in \"$r\"|\"$r\"=*) keep=n ;; esac ;;
      esac
    done
    for a in $add; do
      k=${a%%=*}
      case $t in \"$k\"|\"$k\"=*) keep=n ;; esac
    done
    [ $keep = y ] && new=\"$new $t\"
  done
  for a in $add; do new=\"$new $a\"; done
  set +f
  echo \"${new# }\"
}
: > /run/entries-before-grubby
for f in /boot/loader/entries/*.conf; do
  out=
  while IFS= read -r l; do
    echo \"$l\" >> /run/entries-before-grubby
    case $l in
      *'$kernelopts'*) ;;
      options\\ *) l=\"options $(newopts \"${l#options }\")\" ;;
    esac
    out=\"$out$l
\"
  done < \"$f\"
  printf '%s' \"$out\" > \"$f\"
done
env=/boot/grub2/grubenv
if [ -f $env ]; then
  out=
  while IFS= read -r l; do
    case $l in
      kernelopts=*) l=\"kernelopts=$(newopts \"${l#kernelopts=}\")\" ;;
    esac
    out=\"$out$l
\"
  done < $env
  printf '%s' \"$out\" > $env
fi
exit 0
";

/// Stand-in for `grub2-editenv - set KEY=VALUE`: that line replaced, the
/// others kept.
const EDITENV: &str = "#!/bin/sh
[ \"$1\" = - ] && [ \"$2\" = set ] || { echo \"grub2-editenv stand-in: $*\" >&2; exit 64; }
key=${3%%=*} env=/boot/grub2/grubenv out=
while IFS= read -r l; do
  case $l in \"$key\"=*) l=$3 ;; esac
  out=\"$out$l
\"
done < $env
printf '%s' \"$out\" > $env
";

/// grubenv as RHEL keeps it (a real one is padded with `#` to 1024 bytes).
const GRUBENV: &str = "# GRUB Environment Block\nsaved_entry=3c1d-old\nkernelopts=root=/dev/mapper/rl-root ro rhgb quiet\nboot_success=0\n";

/// Rocky 9.4 (the example host) with its kernel's initramfs, made a chroot.
fn rocky_root() -> (tempfile::TempDir, PathBuf) {
    let (t, root) = example_root("rocky-9-a100");
    install_with_libs(&root, "/bin/dash", "/bin/sh");
    for d in ["run", "usr/sbin", "etc/modprobe.d"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    put(&root, &format!("/boot/initramfs-{K}.img"), "plain\n");
    // The rescue entry: grubby changes its options too, no rebuild.
    put(&root, RESCUE, "title Rocky Linux (0-rescue-3c1d9f0e) 9.4\nversion 0-rescue-3c1d9f0e\nlinux /vmlinuz-0-rescue-3c1d9f0e\ninitrd /initramfs-0-rescue-3c1d9f0e.img\noptions root=/dev/mapper/rl-root ro rhgb quiet\ngrub_class rocky\n");
    put(&root, "/boot/initramfs-0-rescue-3c1d9f0e.img", "rescue\n");
    write_script(&root, "/usr/sbin/dracut", DRACUT);
    write_script(&root, "/usr/sbin/grubby", GRUBBY);
    write_script(&root, "/usr/sbin/grub2-editenv", EDITENV);
    // grubby edits grubenv's kernelopts too; rollback and recover set it back.
    put(&root, "/boot/grub2/grubenv", GRUBENV);
    write_script(
        &root,
        "/usr/sbin/lsinitrd",
        &format!("#!/bin/sh\necho usr/lib/modules/{K}/extra/nvidia-peermem.ko.xz\n"),
    );
    (t, root)
}

/// The tree as the test compares it: no journal, no scratch notes.
fn tree(root: &Path) -> Snap {
    let mut s = without_state(snapshot(root));
    s.retain(|k, _| !k.starts_with("run"));
    s
}

type Snap = std::collections::BTreeMap<String, (Vec<u8>, u32)>;

/// RHEL 8's shape of the same root: the entry's line is `$kernelopts`, the
/// value in grubenv.
fn rocky8_root() -> (tempfile::TempDir, PathBuf) {
    let (t, root) = rocky_root();
    let entry = std::fs::read_to_string(root.join(&ENTRY[1..])).unwrap();
    let options = entry
        .lines()
        .find_map(|l| l.strip_prefix("options "))
        .unwrap()
        .to_string();
    put(
        &root,
        ENTRY,
        &entry.replace(&format!("options {options}"), "options $kernelopts"),
    );
    let env = GRUBENV.replace(
        "kernelopts=root=/dev/mapper/rl-root ro rhgb quiet",
        &format!("kernelopts={options}"),
    );
    put(&root, "/boot/grub2/grubenv", &env);
    (t, root)
}

/// What the entry boots: whether its options are the new ones (`iommu=pt`;
/// `$kernelopts` read from grubenv, as GRUB does), whether the initramfs it
/// loads is the new one (`blocked`), and its path.
fn side(root: &Path) -> (bool, bool, String) {
    let text = std::fs::read_to_string(root.join(&ENTRY[1..])).unwrap();
    let env = std::fs::read_to_string(root.join("boot/grub2/grubenv")).unwrap_or_default();
    let kernelopts = env
        .lines()
        .find_map(|l| l.strip_prefix("kernelopts="))
        .unwrap_or_default();
    let line_new = text
        .lines()
        .filter(|l| l.starts_with("options"))
        .map(|l| l.replace("$kernelopts", kernelopts))
        .any(|l| l.split_whitespace().any(|a| a == "iommu=pt"));
    // The entry's paths are on the /boot filesystem.
    let initrd = text
        .lines()
        .find_map(|l| l.strip_prefix("initrd "))
        .and_then(|l| l.split_whitespace().next())
        .map(|p| format!("/boot{p}"))
        .unwrap_or_default();
    let content = std::fs::read_to_string(root.join(initrd.trim_start_matches('/')))
        .unwrap_or_else(|e| panic!("the entry loads {initrd}, which cannot be read: {e}"));
    (line_new, content == "blocked\n", initrd)
}

#[track_caller]
fn same_side(root: &Path, when: &str) -> bool {
    let (line_new, initrd_new, initrd) = side(root);
    assert_eq!(
        line_new,
        initrd_new,
        "{when}: the entry would boot the {} options with the {} initramfs ({initrd})",
        if line_new { "new" } else { "old" },
        if initrd_new { "new" } else { "old" }
    );
    line_new
}

/// The plan: dracut holds the entry; the entry's write (the switch) follows
/// it and comes before grubby. Gives the number of steps.
fn plan_order(root: &Path) -> usize {
    let v = planned(root);
    let changes = v["changes"].as_array().unwrap_or_else(|| panic!("{v:#}"));
    let at = |f: &dyn Fn(&serde_json::Value) -> bool| changes.iter().position(f);
    let rebuild = at(&|c| runs(c, "dracut")).expect("dracut");
    let hold = &changes[rebuild]["command"]["hold"];
    assert_eq!(hold[0]["reader"], ENTRY, "{v:#}");
    assert_eq!(hold[0]["file"], format!("/boot/initramfs-{K}.img"), "{v:#}");
    let switch = at(&|c| c["path"] == ENTRY).expect("the entry's write");
    let grubby = at(&|c| runs(c, "grubby")).expect("grubby");
    assert!(rebuild < switch && switch < grubby, "{v:#}");
    for (i, c) in changes.iter().enumerate() {
        let etc = c["path"].as_str().is_some_and(|p| p.starts_with("/etc/"));
        assert!(
            !etc || i < rebuild,
            "{} after the rebuild: {v:#}",
            c["path"]
        );
    }
    changes.len()
}

#[test]
fn apply_holds_the_bls_entry_during_dracut_and_switches_it_before_grubby() {
    if !is_root() {
        eprintln!("SKIPPED: a chroot root needs root (CI runs as root)");
        return;
    }
    let (_t, root) = rocky_root();
    let was = tree(&root);
    plan_order(&root);
    assert!(!same_side(&root, "before"));
    ok(&gd(&root, &PROFILE), "apply");
    let during = std::fs::read_to_string(root.join("run/boot-file-during-rebuild")).unwrap();
    assert!(
        during.contains(&format!(
            "initrd /initramfs-{K}.img.gdrprov-held $tuned_initrd"
        )) && !during.contains("iommu=pt"),
        "during dracut the entry read:\n{during}"
    );
    // grubby found the entries switched already, and wrote the same text
    // (it notes them in glob order: the rescue entry first).
    let entry = std::fs::read_to_string(root.join(&ENTRY[1..])).unwrap();
    let rescue = std::fs::read_to_string(root.join(&RESCUE[1..])).unwrap();
    let before_grubby = std::fs::read_to_string(root.join("run/entries-before-grubby")).unwrap();
    assert_eq!(before_grubby, format!("{rescue}{entry}"));
    assert!(entry.contains("\noptions root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rl-swap rd.lvm.lv=rl/root rd.lvm.lv=rl/swap rhgb quiet iommu=pt\n"), "{entry}");
    assert!(same_side(&root, "after apply"));
    let rescue = std::fs::read_to_string(root.join(&RESCUE[1..])).unwrap();
    assert!(
        rescue.contains("\noptions root=/dev/mapper/rl-root ro rhgb quiet iommu=pt\n"),
        "{rescue}"
    );
    assert_eq!(side(&root).2, format!("/boot/initramfs-{K}.img"));
    assert!(held_left(&root).is_empty(), "{:?}", held_left(&root));
    // Rollback: dracut first, holding the entry on the apply's initramfs,
    // then the entry put back; the original tree.
    ok(&gd(&root, &["rollback", "-y"]), "rollback");
    let during = std::fs::read_to_string(root.join("run/boot-file-during-rebuild")).unwrap();
    assert!(
        during.contains(".gdrprov-held") && during.contains("iommu=pt"),
        "during the rollback's dracut the entry read:\n{during}"
    );
    assert!(!same_side(&root, "after rollback"));
    // Every entry grubby changed is back (grubby has no undo: the journal's
    // copies are put back), the rescue entry included.
    assert_eq!(tree(&root), was, "rollback did not give the original tree");
}

/// Killed after every step of apply, then of rollback: the entry and its
/// initramfs are of one side, and `recover` gives the original tree. RHEL 9
/// (options written out) and RHEL 8 (`$kernelopts`, from grubenv).
#[test]
fn a_kill_after_any_step_and_its_recovery_boot_one_side_on_bls() {
    if !is_root() {
        eprintln!("SKIPPED: a chroot root needs root (CI runs as root)");
        return;
    }
    let nine = kills_each_one_side(rocky_root);
    let eight = kills_each_one_side(rocky8_root);
    eprintln!("RHEL BLS: {nine} kills on RHEL 9, {eight} on RHEL 8, each one side and recovered to the original tree");
}

/// [`a_kill_after_any_step_and_its_recovery_boot_one_side_on_bls`] on the
/// roots `make` gives: the number of kills.
fn kills_each_one_side(make: fn() -> (tempfile::TempDir, PathBuf)) -> usize {
    let rocky_root = make;
    let (_t, root) = rocky_root();
    let was = tree(&root);
    let steps = plan_order(&root);
    let mut kills = 0;
    for n in 1..=steps {
        let (_t, root) = rocky_root();
        assert!(
            kill_after(&root, n, &PROFILE),
            "apply had fewer than {n} steps"
        );
        same_side(&root, &format!("apply killed after step {n}"));
        ok(&gd(&root, &["recover", "-y"]), "recover");
        assert!(!same_side(&root, &format!("recovered from apply step {n}")));
        assert!(held_left(&root).is_empty(), "{:?}", held_left(&root));
        assert_eq!(tree(&root), was, "recover of apply step {n}");
        kills += 1;
    }
    for n in 1..=20 {
        let (_t, root) = rocky_root();
        ok(&gd(&root, &PROFILE), "apply");
        if !kill_after(&root, n, &["rollback", "-y"]) {
            assert!(n > 2, "the rollback had only {} steps", n - 1);
            // It ran whole: the original tree, grubenv included.
            assert!(!same_side(&root, "after a whole rollback"));
            assert_eq!(tree(&root), was, "a whole rollback");
            break;
        }
        same_side(&root, &format!("rollback killed after step {n}"));
        ok(&gd(&root, &["recover", "-y"]), "recover");
        assert!(!same_side(
            &root,
            &format!("recovered from rollback step {n}")
        ));
        assert!(held_left(&root).is_empty(), "{:?}", held_left(&root));
        assert_eq!(tree(&root), was, "recover of rollback step {n}");
        kills += 1;
    }
    assert!(kills >= 8, "{kills}");
    kills
}

/// grubby fails after the switch (the entries are on the new side): the
/// failed apply puts everything back, the entries after the rebuild, and the
/// tree is the original one.
#[test]
fn a_failing_grubby_puts_the_entries_back_after_the_rebuild() {
    if !is_root() {
        eprintln!("SKIPPED: a chroot root needs root (CI runs as root)");
        return;
    }
    let (_t, root) = rocky_root();
    write_script(
        &root,
        "/usr/sbin/grubby",
        "#!/bin/sh\necho 'grubby: error: stand-in failure' >&2\nexit 1\n",
    );
    let was = tree(&root);
    let out = gd(&root, &PROFILE);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("put back"), "{}", stderr_of(&out));
    // The revert's dracut ran with the entry held on the apply's initramfs.
    let during = std::fs::read_to_string(root.join("run/boot-file-during-rebuild")).unwrap();
    assert!(
        during.contains(".gdrprov-held") && during.contains("iommu=pt"),
        "during the revert's dracut the entry read:\n{during}"
    );
    assert!(!same_side(&root, "after the failed apply"));
    assert!(held_left(&root).is_empty(), "{:?}", held_left(&root));
    assert_eq!(tree(&root), was);
}

/// grubenv's `kernelopts` (the command line of RHEL 8's `options
/// $kernelopts` entries): grubby edits it, and no file gdrprov writes keeps
/// it. Before, a rollback left it with the applied arguments for good; now
/// rollback sets that key back, and only it: a `saved_entry` changed since
/// (a kernel update's `grubby --set-default`) stays.
#[test]
fn rollback_sets_grubenv_kernelopts_back_and_only_it() {
    if !is_root() {
        eprintln!("SKIPPED: a chroot root needs root (CI runs as root)");
        return;
    }
    let (_t, root) = rocky_root();
    let env = GRUBENV;
    ok(&gd(&root, &PROFILE), "apply");
    let applied = std::fs::read_to_string(root.join("boot/grub2/grubenv")).unwrap();
    let line = applied
        .lines()
        .find(|l| l.starts_with("kernelopts="))
        .unwrap_or_default();
    assert!(line.contains(" iommu=pt"), "{applied}");
    // A kernel update meanwhile makes its entry the default.
    let updated = applied.replace("saved_entry=3c1d-old", "saved_entry=3c1d-new");
    std::fs::write(root.join("boot/grub2/grubenv"), &updated).unwrap();
    ok(&gd(&root, &["rollback", "-y"]), "rollback");
    let rolled = std::fs::read_to_string(root.join("boot/grub2/grubenv")).unwrap();
    assert_eq!(
        rolled,
        env.replace("saved_entry=3c1d-old", "saved_entry=3c1d-new")
    );
}
