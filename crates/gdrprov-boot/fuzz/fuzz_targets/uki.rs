//! The unified kernel image reader: any bytes give an answer, never a
//! panic, and the sections it finds are text taken from inside the input.
#![no_main]
use gdrprov_boot::uki;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(u) = uki::parse(data) else {
        return;
    };
    for s in [&u.osrel, &u.cmdline, &u.uname].into_iter().flatten() {
        assert!(s.len() <= data.len() * 3, "a section longer than the file");
    }
    let e = uki::entry("x.efi", "/efi/EFI/Linux/x.efi", &u);
    assert_eq!(e.id, "x.efi");
    assert!(!e.title.is_empty());
});
