//! The data-check pattern and its comparison, shared by the loopback and the pair bench.

/// The check pattern: a splitmix64 stream seeded per QP, so a stale or misplaced buffer never matches.
pub fn fill_pattern(buf: &mut [u8], seed: u64) {
    let mut state = seed;
    for chunk in buf.chunks_mut(8) {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let bytes = z.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

/// Compare: (number of differing bytes, first differing offset).
pub fn compare(expected: &[u8], actual: &[u8]) -> (u64, Option<u64>) {
    let mut count = 0u64;
    let mut first = None;
    for (i, (a, b)) in expected.iter().zip(actual.iter()).enumerate() {
        if a != b {
            count += 1;
            first.get_or_insert(i as u64);
        }
    }
    let extra = expected.len().abs_diff(actual.len()) as u64;
    if extra > 0 && first.is_none() {
        first = Some(expected.len().min(actual.len()) as u64);
    }
    (count + extra, first)
}
