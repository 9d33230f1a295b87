//! The bench commands' argument parsers: sizes, `DEV[:PORT]` and the copy floors.

use super::error::BenchError;

/// Parse a size: "65536", "64K", "64KiB", "8M", "8MiB", "1G".
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (examples: 65536, 64K, 8MiB)"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (use K, M or G)")),
    };
    let v = n
        .checked_mul(mult)
        .ok_or_else(|| format!("`{s}` is too large"))?;
    if v == 0 {
        return Err("size must be > 0".into());
    }
    Ok(v)
}

/// Split "DEV[:PORT]".
pub fn parse_dev_port(s: &str) -> Result<(String, Option<u8>), BenchError> {
    match s.rsplit_once(':') {
        Some((dev, port)) if !dev.is_empty() => {
            let p: u8 = port.parse().ok().filter(|&p| p > 0).ok_or_else(|| {
                BenchError::InvalidArgument(format!(
                    "`{s}`: port must be a number from 1 (DEV:PORT)"
                ))
            })?;
            Ok((dev.to_string(), Some(p)))
        }
        _ if s.is_empty() || s.contains(':') => Err(BenchError::InvalidArgument(format!(
            "`{s}` is not DEV[:PORT]"
        ))),
        _ => Ok((s.to_string(), None)),
    }
}

/// `--min-fraction` (0 < x <= 1) and `--min-gbs` (x > 0), each finite when given.
pub fn check_copy_floors(
    min_fraction: Option<f64>,
    min_gbs: Option<f64>,
) -> Result<(), BenchError> {
    for (name, v) in [("--min-fraction", min_fraction), ("--min-gbs", min_gbs)] {
        if let Some(x) = v {
            if !(x.is_finite() && x > 0.0) || (name == "--min-fraction" && x > 1.0) {
                return Err(BenchError::InvalidArgument(format!(
                    "{name} {x} is out of range"
                )));
            }
        }
    }
    Ok(())
}
