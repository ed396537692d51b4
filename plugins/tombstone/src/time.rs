//! Parsing of RFC 3339 UTC timestamps as Kubernetes writes them
//! (`2026-11-30T09:00:00Z`, optionally with fractional seconds or `+00:00`).
//! Hand-written because that is all the plugin needs, and a date-time crate
//! would add tens of KiB to a component that must fit in a ConfigMap.

/// Seconds since the Unix epoch, or None if `s` is not such a timestamp.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = &frac[digits..];
    }
    if !matches!(rest, "Z" | "z" | "+00:00" | "-00:00") {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_instants() {
        // Values from `date -u -d ... +%s`.
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2000-03-01T00:00:00Z"), Some(951_868_800));
        assert_eq!(
            parse_rfc3339("2026-11-30T09:00:00.123Z"),
            Some(1_796_029_200)
        );
        assert_eq!(
            parse_rfc3339("2026-11-30T09:00:00+00:00"),
            Some(1_796_029_200)
        );
    }

    #[test]
    fn rejects_other_forms() {
        assert_eq!(parse_rfc3339("2026-11-30 09:00:00Z"), None);
        assert_eq!(parse_rfc3339("2026-11-30T09:00:00+01:00"), None);
        assert_eq!(parse_rfc3339("2026-13-30T09:00:00Z"), None);
        assert_eq!(parse_rfc3339("yesterday"), None);
    }
}
