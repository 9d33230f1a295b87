//! The cufile.json reader and its one-value editor: any text is either read (the keys gdrprov
//! needs, strictly) or a one-line error; never a panic, never unbounded time or memory (nesting
//! stops at the reader's depth). An edit that succeeds reads back with the value set.
#![no_main]
use gdrprov::facts::cufile_json::{read, set_bool};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = read(text);
    if let Ok(edited) = set_bool(text, &["properties", "use_pci_p2pdma"], true) {
        if let Ok(c) = read(&edited) {
            assert_eq!(c.use_pci_p2pdma, Some(true), "edit not read back");
        }
    }
});
