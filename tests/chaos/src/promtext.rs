//! A small reader of the host's `/metrics` (Prometheus / OpenMetrics text):
//! samples, sums over label filters, and histogram quantiles computed the way
//! PromQL's `histogram_quantile` does (linear within a bucket).

use std::collections::BTreeMap;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses the exposition text; comment and malformed lines are skipped.
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (name, labels, rest) = match line.find('{') {
        Some(i) => {
            let close = line.rfind('}')?;
            (
                &line[..i],
                parse_labels(&line[i + 1..close]),
                &line[close + 1..],
            )
        }
        None => {
            let (n, r) = line.split_once(' ')?;
            (n, BTreeMap::new(), r)
        }
    };
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

fn parse_labels(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s;
    while let Some(eq) = rest.find("=\"") {
        let key = rest[..eq].trim_start_matches(',').trim().to_string();
        let after = &rest[eq + 2..];
        let mut val = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        val.push(match n {
                            'n' => '\n',
                            other => other,
                        });
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                other => val.push(other),
            }
        }
        out.insert(key, val);
        rest = &after[end.min(after.len())..];
    }
    out
}

/// True when every `(key, value)` of `filter` is among the sample's labels.
fn matches(s: &Sample, filter: &[(&str, &str)]) -> bool {
    filter
        .iter()
        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
}

/// Sum of the samples named `name` whose labels include `filter`.
pub fn sum(samples: &[Sample], name: &str, filter: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name && matches(s, filter))
        .map(|s| s.value)
        .sum()
}

/// Sum per value of label `by`.
pub fn sum_by(
    samples: &[Sample],
    name: &str,
    filter: &[(&str, &str)],
    by: &str,
) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for s in samples
        .iter()
        .filter(|s| s.name == name && matches(s, filter))
    {
        let k = s.labels.get(by).cloned().unwrap_or_default();
        *out.entry(k).or_insert(0.0) += s.value;
    }
    out
}

/// Cumulative bucket counts of histogram `name` (`name_bucket` samples)
/// summed over every series matching `filter`, sorted by upper bound.
pub fn buckets(samples: &[Sample], name: &str, filter: &[(&str, &str)]) -> Vec<(f64, f64)> {
    let bucket = format!("{name}_bucket");
    let mut by_le: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for s in samples
        .iter()
        .filter(|s| s.name == bucket && matches(s, filter))
    {
        let le = match s.labels.get("le").map(String::as_str) {
            Some("+Inf") => f64::INFINITY,
            Some(v) => match v.parse::<f64>() {
                Ok(x) => x,
                Err(_) => continue,
            },
            None => continue,
        };
        // f64 bits order like the values for non-negative numbers.
        let e = by_le.entry(le.to_bits()).or_insert((le, 0.0));
        e.1 += s.value;
    }
    by_le.into_values().collect()
}

/// The `q` quantile of cumulative `buckets`; None without observations.
pub fn quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut prev = (0.0, 0.0);
    for &(le, cum) in buckets {
        if cum >= rank {
            if le.is_infinite() {
                return Some(prev.0);
            }
            let in_bucket = cum - prev.1;
            let frac = if in_bucket > 0.0 {
                (rank - prev.1) / in_bucket
            } else {
                1.0
            };
            return Some(prev.0 + (le - prev.0) * frac);
        }
        prev = (le, cum);
    }
    Some(prev.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP wasm_reconciler_reconciles_total Reconciles.
# TYPE wasm_reconciler_reconciles_total counter
wasm_reconciler_reconciles_total{controller="chaos",result="success"} 90
wasm_reconciler_reconciles_total{controller="chaos",result="transient_error"} 10
wasm_reconciler_reconciles_total{controller="hostile",result="plugin_fault"} 5
wasm_reconciler_d_bucket{controller="chaos",result="success",le="0.1"} 50
wasm_reconciler_d_bucket{controller="chaos",result="success",le="0.2"} 100
wasm_reconciler_d_bucket{controller="chaos",result="success",le="+Inf"} 100
wasm_reconciler_leader 1
# EOF
"#;

    #[test]
    fn sums_and_quantiles() {
        let s = parse(TEXT);
        assert_eq!(s.len(), 7);
        assert_eq!(
            sum(
                &s,
                "wasm_reconciler_reconciles_total",
                &[("controller", "chaos")]
            ),
            100.0
        );
        assert_eq!(sum(&s, "wasm_reconciler_leader", &[]), 1.0);
        let by = sum_by(&s, "wasm_reconciler_reconciles_total", &[], "controller");
        assert_eq!(by["hostile"], 5.0);
        let b = buckets(&s, "wasm_reconciler_d", &[("controller", "chaos")]);
        assert_eq!(b.len(), 3);
        let p50 = quantile(0.5, &b).unwrap();
        assert!((p50 - 0.1).abs() < 1e-9, "{p50}");
        let p99 = quantile(0.99, &b).unwrap();
        assert!((p99 - 0.198).abs() < 1e-9, "{p99}");
        assert_eq!(quantile(0.5, &[]), None);
    }

    #[test]
    fn escaped_label_values() {
        let s = parse(r#"m{a="x\"y,z",b="2"} 3"#);
        assert_eq!(s[0].labels["a"], "x\"y,z");
        assert_eq!(s[0].labels["b"], "2");
    }
}
