//! Every command's name as the JSON envelope, the Ansible module, the
//! journal and the messages spell it (`boot list`, `fleet sweep plan`): the
//! command words, spelled once. clap derives the words from the variants in
//! src/commands/cli/; a test there walks clap's tree and checks that every
//! command it has is in [`ALL`], and that `Command::name` says the same.
//! Nothing here imports anything, so every layer may use it.

pub const PLAN: &str = "plan";
pub const APPLY: &str = "apply";
pub const ROLLBACK: &str = "rollback";
pub const RECOVER: &str = "recover";
pub const VERIFY: &str = "verify";
pub const HISTORY: &str = "history";
pub const JOURNAL_CHECK: &str = "journal check";
pub const PROFILE_LIST: &str = "profile list";
pub const PROFILE_SHOW: &str = "profile show";
pub const PROFILE_VALIDATE: &str = "profile validate";
pub const PROFILE_SCHEMA: &str = "profile schema";
pub const BENCH: &str = "bench";
pub const BENCH_LOOPBACK: &str = "bench loopback";
pub const BENCH_PROBE: &str = "bench probe";
pub const BENCH_COPY: &str = "bench copy";
pub const BENCH_PAIR: &str = "bench pair";
pub const BENCH_P2P: &str = "bench p2p";
pub const BENCH_NCCL: &str = "bench nccl";
pub const FLEET_SWEEP_PLAN: &str = "fleet sweep plan";
pub const FLEET_SWEEP_REPORT: &str = "fleet sweep report";
pub const FLEET_SWEEP_SIMULATE: &str = "fleet sweep simulate";
pub const INVENTORY: &str = "inventory";
pub const DOCTOR: &str = "doctor";
pub const BOOT_LIST: &str = "boot list";
pub const BOOT_SET_DEFAULT: &str = "boot set-default";
pub const BOOT_ONCE: &str = "boot once";
pub const COMMIT: &str = "commit";
pub const ANSIBLE_MODULE: &str = "ansible-module";
pub const COMPLETIONS: &str = "completions";
pub const MAN: &str = "man";
pub const RECHECK: &str = "recheck";

/// Every command, as its words (the groups `bench`, `boot`, ... are the
/// first word of several).
pub const ALL: &[&str] = &[
    PLAN,
    APPLY,
    ROLLBACK,
    RECOVER,
    VERIFY,
    HISTORY,
    JOURNAL_CHECK,
    PROFILE_LIST,
    PROFILE_SHOW,
    PROFILE_VALIDATE,
    PROFILE_SCHEMA,
    BENCH_LOOPBACK,
    BENCH_PROBE,
    BENCH_COPY,
    BENCH_PAIR,
    BENCH_P2P,
    BENCH_NCCL,
    FLEET_SWEEP_PLAN,
    FLEET_SWEEP_REPORT,
    FLEET_SWEEP_SIMULATE,
    INVENTORY,
    DOCTOR,
    BOOT_LIST,
    BOOT_SET_DEFAULT,
    BOOT_ONCE,
    COMMIT,
    ANSIBLE_MODULE,
    COMPLETIONS,
    MAN,
    RECHECK,
];

/// Whether WORD is a group of commands (`boot` of `boot list`).
pub fn is_group(word: &str) -> bool {
    ALL.iter().any(|n| {
        n.strip_prefix(word)
            .is_some_and(|rest| rest.starts_with(' '))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_first_words() {
        for g in ["profile", "boot", BENCH, "fleet", "journal"] {
            assert!(is_group(g), "{g}");
        }
        for w in ["plan", "bo", "sweep", "boot list", ""] {
            assert!(!is_group(w), "{w}");
        }
    }
}
