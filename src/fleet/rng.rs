//! The simulation's random numbers: xoshiro256** seeded through splitmix64
//! (Blackman and Vigna, <https://prng.di.unimi.it/>), and normal deviates by
//! Box-Muller. Twenty lines instead of a dependency, and fixed forever: a
//! seed gives the same fleet in every version of gdrprov (rand's `StdRng`
//! promises no such thing across releases). The test vectors below are the
//! reference implementation's.

/// xoshiro256**.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    /// The state filled from SEED by splitmix64, as the authors recommend.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        Rng {
            s: [
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
            ],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) from the top 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in 0..n (n > 0), by Lemire's multiply (bias below 2^-32 for the sizes here).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// A standard normal deviate (Box-Muller, one of the pair).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]: ln is finite
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// K distinct values of 0..n (k <= n), in the order drawn (partial Fisher-Yates).
    pub fn sample(&mut self, n: usize, k: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..n).collect();
        let k = k.min(n);
        for i in 0..k {
            let j = i + self.below(n - i);
            all.swap(i, j);
        }
        all.truncate(k);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_the_reference() {
        // splitmix64 from seed 0: the reference's first outputs.
        let mut x = 0u64;
        assert_eq!(splitmix64(&mut x), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut x), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn xoshiro_matches_the_reference_from_state_1_2_3_4() {
        let mut r = Rng { s: [1, 2, 3, 4] };
        let got: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(got, vec![11520, 0, 1509978240]);
    }

    #[test]
    fn normals_have_mean_0_and_sd_1() {
        let mut r = Rng::new(7);
        let n = 100_000;
        let xs: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.02, "{mean}");
        assert!((var.sqrt() - 1.0).abs() < 0.02, "{var}");
    }

    #[test]
    fn sample_is_distinct_and_in_range() {
        let mut r = Rng::new(1);
        let mut s = r.sample(100, 40);
        assert_eq!(s.len(), 40);
        s.sort_unstable();
        s.dedup();
        assert_eq!(s.len(), 40);
        assert!(s.iter().all(|x| *x < 100));
    }
}
