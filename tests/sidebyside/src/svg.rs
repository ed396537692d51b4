//! The plot: time to converge vs N, one line per variant, as hand-written SVG
//! (no plotting dependency). Log-scaled N axis, linear seconds axis.

use std::fmt::Write;

/// One line of the plot.
pub struct Series {
    /// Legend label.
    pub label: String,
    /// CSS colour.
    pub color: &'static str,
    /// (N, seconds), any order.
    pub points: Vec<(f64, f64)>,
}

const W: f64 = 640.0;
const H: f64 = 400.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Renders the plot. Points with non-positive N or non-finite values are skipped.
pub fn plot(title: &str, series: &[Series]) -> String {
    let pts = || {
        series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|(n, y)| *n > 0.0 && n.is_finite() && y.is_finite())
    };
    let (mut xmin, mut xmax, mut ymax) = (f64::MAX, f64::MIN, 0.0f64);
    for (n, y) in pts() {
        xmin = xmin.min(n.log10());
        xmax = xmax.max(n.log10());
        ymax = ymax.max(*y);
    }
    if xmin > xmax {
        (xmin, xmax) = (0.0, 1.0);
    }
    if xmax - xmin < 1e-9 {
        xmin -= 0.5;
        xmax += 0.5;
    }
    let ymax = nice_ceiling(ymax.max(1e-3));
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let sx = |n: f64| LEFT + (n.log10() - xmin) / (xmax - xmin) * pw;
    let sy = |y: f64| TOP + ph - y / ymax * ph;

    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        o,
        r#"<rect x="0" y="0" width="{W}" height="{H}" fill="white"/>"#
    );
    let _ = writeln!(
        o,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        LEFT + pw / 2.0,
        esc(title)
    );
    // Axes.
    let _ = writeln!(
        o,
        r#"<path d="M{LEFT},{TOP} V{} H{}" fill="none" stroke="black"/>"#,
        TOP + ph,
        LEFT + pw
    );
    for i in 0..=4 {
        let y = ymax * f64::from(i) / 4.0;
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" x2="{}" y1="{:.1}" y2="{:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + pw,
            sy(y),
            sy(y),
            LEFT - 6.0,
            sy(y) + 4.0,
            trim(y)
        );
    }
    let mut ticks: Vec<f64> = pts().map(|(n, _)| *n).collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    for n in ticks {
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            sx(n),
            TOP + ph + 18.0,
            trim(n)
        );
    }
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">N parents (3 children each, log scale)</text>"#,
        LEFT + pw / 2.0,
        H - 16.0
    );
    let _ = writeln!(
        o,
        r#"<text transform="translate(18,{}) rotate(-90)" text-anchor="middle">seconds to converge</text>"#,
        TOP + ph / 2.0
    );
    // Lines, points, legend.
    for (i, s) in series.iter().enumerate() {
        let mut p: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|(n, y)| *n > 0.0 && n.is_finite() && y.is_finite())
            .collect();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        if p.len() > 1 {
            let d: Vec<String> = p
                .iter()
                .map(|(n, y)| format!("{:.1},{:.1}", sx(*n), sy(*y)))
                .collect();
            let _ = writeln!(
                o,
                r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>"#,
                d.join(" "),
                s.color
            );
        }
        for (n, y) in &p {
            let _ = writeln!(
                o,
                r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{}"><title>{}: N={} {:.2} s</title></circle>"#,
                sx(*n),
                sy(*y),
                s.color,
                esc(&s.label),
                trim(*n),
                y
            );
        }
        let ly = TOP + 10.0 + 20.0 * i as f64;
        let lx = LEFT + pw + 15.0;
        let _ = writeln!(
            o,
            r#"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
            lx + 20.0,
            s.color,
            lx + 26.0,
            ly + 4.0,
            esc(&s.label)
        );
    }
    o.push_str("</svg>\n");
    o
}

fn trim(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{}", x.round() as i64)
    } else {
        format!("{x:.1}")
    }
}

/// Smallest of 1, 2, 2.5, 5 × 10^k that is >= x.
fn nice_ceiling(x: f64) -> f64 {
    let k = x.log10().floor();
    let base = 10f64.powf(k);
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * base)
        .find(|v| *v >= x * 0.999_999)
        .unwrap_or(10.0 * base)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Minimal well-formedness check: every start tag is closed in order,
    /// attributes are quoted, no stray `<`/`&`.
    fn well_formed(xml: &str) -> Result<(), String> {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = xml;
        while let Some(i) = rest.find(['<', '&']) {
            rest = &rest[i..];
            if rest.starts_with('&') {
                let end = rest.find(';').ok_or("unterminated entity")?;
                let ent = &rest[1..end];
                if !["amp", "lt", "gt", "quot", "apos"].contains(&ent) {
                    return Err(format!("unknown entity {ent}"));
                }
                rest = &rest[end + 1..];
                continue;
            }
            let end = rest.find('>').ok_or("unterminated tag")?;
            let tag = &rest[1..end];
            rest = &rest[end + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                match stack.pop() {
                    Some(open) if open == name.trim() => {}
                    other => return Err(format!("</{name}> closes {other:?}")),
                }
            } else {
                let self_closing = tag.ends_with('/');
                let body = tag.trim_end_matches('/');
                let name = body.split_whitespace().next().ok_or("empty tag")?;
                if !body.matches('"').count().is_multiple_of(2) || body.contains('<') {
                    return Err(format!("bad attributes in <{body}>"));
                }
                if !self_closing {
                    stack.push(name.to_string());
                }
            }
        }
        if stack.is_empty() {
            Ok(())
        } else {
            Err(format!("unclosed {stack:?}"))
        }
    }

    #[test]
    fn plot_is_well_formed_with_one_point_per_measurement() {
        let series = vec![
            Series {
                label: "wasm <host>".into(),
                color: "#1f77b4",
                points: vec![(1000.0, 4.9), (10000.0, 47.0)],
            },
            Series {
                label: "native".into(),
                color: "#2ca02c",
                points: vec![(10000.0, 40.0), (1000.0, 4.0)],
            },
            Series {
                label: "webhook & co".into(),
                color: "#d62728",
                points: vec![(1000.0, 9.0), (10000.0, f64::NAN)],
            },
        ];
        let svg = plot("time to converge", &series);
        well_formed(&svg).unwrap();
        assert_eq!(svg.matches("<circle").count(), 5, "NaN point skipped");
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("wasm &lt;host&gt;"));
        assert!(svg.starts_with("<svg"));
    }

    #[test]
    fn checker_rejects_broken_xml() {
        assert!(well_formed("<a><b></a></b>").is_err());
        assert!(well_formed("<a x=\"1></a>").is_err());
        assert!(well_formed("<a>&nope;</a>").is_err());
        assert!(well_formed("<a><b/></a>").is_ok());
    }

    #[test]
    fn axis_ceiling_is_round() {
        assert_eq!(nice_ceiling(47.0), 50.0);
        assert_eq!(nice_ceiling(4.9), 5.0);
        assert_eq!(nice_ceiling(11.0), 20.0);
        assert_eq!(nice_ceiling(100.0), 100.0);
    }
}
