//! How every command of kiln and its worker prints a quantity: four
//! significant digits; times in s, ms, µs or ns; memory in GiB, MiB, KiB or
//! bytes (powers of 1024, as the kernel counts pages); counts with k, M, G or
//! T past a thousand, and a whole count below it as it is.

/// A count or ratio: `1.023 M`, `12.35 k`, `354.5`, `0.9731`, `9`; `-` where
/// there is none (not finite).
pub fn count(v: f64) -> String {
    const PREFIXES: [(f64, &str); 4] = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    if !v.is_finite() {
        return "-".into();
    }
    match PREFIXES.iter().find(|(scale, _)| v.abs() >= *scale) {
        Some((scale, prefix)) => format!("{} {prefix}", digits(v / scale)),
        None if v.fract() == 0.0 => format!("{v:.0}"),
        None => digits(v),
    }
}

/// A measured figure in a metric's unit (`ns`, `bytes`, `count`, NVML's `mJ`,
/// `mW` and `MHz`, or another printed after the figure), scaled to read:
/// `12.41 ms`, `5.902 MiB`, `1.023 M`, `260.4 J`, `99.50 %`; `-` where there
/// is none.
pub fn measure(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    const KIB: f64 = 1024.0;
    let scaled = |steps: &[(f64, &str)]| {
        let (scale, name) = steps
            .iter()
            .find(|(scale, _)| v.abs() >= *scale)
            .copied()
            .unwrap_or(*steps.last().expect("a step"));
        match scale == 1.0 && v.fract() == 0.0 {
            true => format!("{v:.0} {name}"),
            false => format!("{} {name}", digits(v / scale)),
        }
    };
    match unit {
        "ns" => scaled(&[(1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns")]),
        "bytes" => scaled(&[
            (KIB * KIB * KIB, "GiB"),
            (KIB * KIB, "MiB"),
            (KIB, "KiB"),
            (1.0, "B"),
        ]),
        "count" => count(v),
        // NVML's units, scaled to the unit a reader expects: `260.4 J`, not `260.4 k mJ`.
        "mJ" => scaled(&[(1e6, "kJ"), (1e3, "J"), (1.0, "mJ")]),
        "mW" => scaled(&[(1e6, "kW"), (1e3, "W"), (1.0, "mW")]),
        "MHz" => scaled(&[(1e3, "GHz"), (1.0, "MHz")]),
        // A share or a temperature takes no prefix: `1600 %` on 16 cores, not `1.600 k %`.
        other => scaled(&[(1.0, other)]),
    }
}

/// `n` and a noun, plural where `n` is not one: `1 step`, `3 steps`.
pub fn plural(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        _ => format!("{n} {noun}s"),
    }
}

/// Four significant digits (more before the point where the figure has them).
fn digits(x: f64) -> String {
    let magnitude = if x == 0.0 {
        0
    } else {
        x.abs().log10().floor() as i32
    };
    let decimals = (3 - magnitude).max(0) as usize;
    format!("{x:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_with_four_significant_digits() {
        assert_eq!(count(1_023_456.0), "1.023 M");
        assert_eq!(count(12_345.0), "12.35 k");
        assert_eq!(count(354.5), "354.5");
        assert_eq!(count(9.0), "9");
        assert_eq!(count(0.97312), "0.9731");
        assert_eq!(count(0.000_424_780_7), "0.0004248");
        assert_eq!(count(f64::NAN), "-");
        assert_eq!(measure(12_410_000.0, "ns"), "12.41 ms");
        assert_eq!(measure(1_670_000.0, "ns"), "1.670 ms");
        assert_eq!(measure(6_141_000.0, "ns"), "6.141 ms");
        assert_eq!(measure(3.0 * 1_048_576.0, "bytes"), "3.000 MiB");
        assert_eq!(measure(11_160_000.0, "bytes"), "10.64 MiB");
        assert_eq!(measure(512.0, "bytes"), "512 B");
        assert_eq!(measure(1234.0, "count"), "1.234 k");
        assert_eq!(measure(99.5, "%"), "99.50 %");
        assert_eq!(measure(1600.0, "%"), "1600 %");
        assert_eq!(measure(36.0, "C"), "36 C");
        assert_eq!(measure(260_417.0, "mJ"), "260.4 J");
        assert_eq!(measure(3_086_100_000.0, "mJ"), "3086 kJ");
        assert_eq!(measure(512.0, "mJ"), "512 mJ");
        assert_eq!(measure(117_200.0, "mW"), "117.2 W");
        assert_eq!(measure(1980.0, "MHz"), "1.980 GHz");
        assert_eq!(measure(1768.846, "MHz"), "1.769 GHz");
        assert_eq!(measure(705.0, "MHz"), "705 MHz");
        assert_eq!(plural(1, "step"), "1 step");
        assert_eq!(plural(0, "decision"), "0 decisions");
    }
}
