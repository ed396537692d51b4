//! Go's `time.Duration` text form (`10s`, `1m30s`, `1.5s`, `500ms`), in which
//! Metacontroller's webhook timeouts are written. Hand-written: the format is
//! a dozen lines and no workspace crate parses Go's exact grammar.

use std::time::Duration;

/// Parses a non-negative Go duration. `None` for anything else.
pub fn parse(text: &str) -> Option<Duration> {
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_len);
        if number.is_empty() || number == "." {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let seconds = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * seconds;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_forms_parse() {
        assert_eq!(parse("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(parse("0"), Some(Duration::ZERO));
    }

    #[test]
    fn malformed_is_none() {
        for bad in ["", "10", "s", "-1s", "10x", "1..5s", "ten seconds"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
