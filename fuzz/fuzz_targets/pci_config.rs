//! The PCI config-space parser (issue 46): any bytes give facts, never a panic and
//! never an endless walk (a capability list that loops, points past the end or
//! hides an ID stops the walk); what it reports stays in range.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let f = gdrprov::facts::pcicfg::parse(data);
    assert!(gdrprov::facts::pcicfg::capabilities(data).len() <= 48);
    if let Some(p) = &f.pcie {
        for size in [p.max_payload, p.max_read_request, p.max_payload_supported] {
            assert!((128..=16384).contains(&size) && size.is_power_of_two());
        }
        assert!(usize::from(p.offset) + 10 <= data.len());
    }
    if let Some(a) = &f.ats {
        assert!(usize::from(a.offset) >= 0x100);
    }
    for r in &f.resizable_bars {
        assert!(r.bar < 8 && r.current_mib.is_power_of_two());
    }
});
