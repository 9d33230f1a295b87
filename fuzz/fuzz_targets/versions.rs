//! The version comparator: `compare` is a total order (reflexive,
//! antisymmetric, transitive), `compare_prefix` agrees with it on equal
//! versions, and constraint parsing and matching never panic.
//!
//! Input: up to three versions and a constraint, one per line.
#![no_main]
use gdrprov::versions;
use libfuzzer_sys::fuzz_target;
use std::cmp::Ordering;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let a = lines.next().unwrap_or("");
    let b = lines.next().unwrap_or("");
    let c = lines.next().unwrap_or("");
    let spec = lines.next().unwrap_or("");
    for x in [a, b, c] {
        assert_eq!(versions::compare(x, x), Ordering::Equal, "{x:?}");
        assert_eq!(versions::compare_prefix(x, x), Ordering::Equal, "{x:?}");
    }
    for (x, y) in [(a, b), (b, c), (a, c)] {
        let o = versions::compare(x, y);
        assert_eq!(versions::compare(y, x), o.reverse(), "{x:?} {y:?}");
        if o == Ordering::Equal {
            assert_eq!(
                versions::compare_prefix(x, y),
                Ordering::Equal,
                "{x:?} {y:?}"
            );
        }
        // A version compared over the parts of a shorter one it extends.
        if versions::compare_prefix(x, y) == Ordering::Less {
            assert_ne!(o, Ordering::Greater, "{x:?} {y:?}");
        }
    }
    let (ab, bc, ac) = (
        versions::compare(a, b),
        versions::compare(b, c),
        versions::compare(a, c),
    );
    if ab != Ordering::Greater && bc != Ordering::Greater {
        assert_ne!(ac, Ordering::Greater, "not transitive: {a:?} {b:?} {c:?}");
    }
    if let Ok(cs) = versions::parse(spec) {
        assert!(!cs.is_empty());
        let all = cs.iter().all(|k| k.matches(a));
        assert_eq!(versions::satisfies(a, spec), Ok(all));
    } else {
        assert!(versions::satisfies(a, spec).is_err());
    }
});
