//! One self-contained HTML page from a [`RunRecord`] (`xsched report RUN.json -o report.html`):
//! the latency CDFs of every configuration's queues in one figure, per configuration a
//! timeline of its queues' states, as inline SVG, and the accounting of every queue in one
//! table. Nothing is fetched: no network, no fonts,
//! no script libraries. The page's one small script lets a click on a column sort the table,
//! and marks the page `data-ready` (or lists the script errors in `data-errors`), which the
//! headless-browser test reads.

use crate::ReportError;
use crate::escape::escape;
use crate::plot::{Figure, Kind, Series};
use crate::run::{QueueStateKind, RunRecord};
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// The page for `record`. Fails only if a figure cannot be drawn.
pub fn render(record: &RunRecord) -> Result<String, ReportError> {
    let mut page = String::new();
    let title = escape(&record.title);
    let _ = write!(
        page,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{title}</title>\n<style>{STYLE}</style>\n\
         <script>window.addEventListener('error', e => {{ const b = document.body; \
         b.dataset.errors = (b.dataset.errors || '') + e.message + ';'; }});</script>\n\
         </head><body>\n<h1>{title}</h1>\n<p class=\"machine\">{}</p>\n",
        escape(&record.machine)
    );
    let series: Vec<Series> = record
        .groups
        .iter()
        .flat_map(|g| {
            g.queues
                .iter()
                .filter(|q| !q.latency_cdf_us.is_empty())
                .map(move |q| Series {
                    name: format!("{} {}", g.name, q.name),
                    values: q.latency_cdf_us.clone(),
                })
        })
        .collect();
    if !series.is_empty() {
        let cdf = Figure {
            file: String::new(),
            title: "latency CDF per configuration and queue".into(),
            axes: ("latency (us)".into(), "fraction of requests".into()),
            kind: Kind::Lines,
            series,
        };
        let _ = write!(
            page,
            "<h2>Latency</h2>\n<figure class=\"cdf\">{}</figure>\n",
            strip_prolog(&cdf.svg()?)
        );
    }
    page.push_str("<h2>Queue states</h2>\n");
    for group in &record.groups {
        let _ = write!(
            page,
            "<section class=\"group\"><h3>{}</h3>\n{}</section>\n",
            escape(&group.name),
            timeline(group)
        );
    }
    page.push_str(&account_table(record));
    page.push_str(&format!("<script>{SCRIPT}</script>\n</body></html>\n"));
    Ok(page)
}

/// The XML prolog plotters writes is not allowed inside HTML.
fn strip_prolog(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1000px}\
    table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ccc;padding:3px 6px;\
    text-align:right}th{cursor:pointer;background:#f4f4f4}td:first-child,td:nth-child(2){text-align:left}\
    .machine{color:#555}.wide{overflow-x:auto}figure{margin:0}svg{max-width:100%;height:auto}\
    .legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px}";

/// Sorts the accounting table by a clicked column, then says the page is ready.
const SCRIPT: &str = "document.querySelectorAll('table.account th').forEach((th, col) => {\
    th.addEventListener('click', () => { const body = th.closest('table').tBodies[0];\
    const rows = Array.from(body.rows); const key = r => { const t = r.cells[col].textContent;\
    const n = parseFloat(t); return isNaN(n) ? t : n; };\
    rows.sort((a, b) => (key(a) > key(b)) - (key(a) < key(b))); rows.forEach(r => body.appendChild(r)); });\
    }); document.body.dataset.ready = 'yes';";

/// Colours of the states, in the legend's order.
const STATES: [(QueueStateKind, &str); 3] = [
    (QueueStateKind::Running, "#2ca02c"),
    (QueueStateKind::Suspended, "#d62728"),
    (QueueStateKind::Idle, "#dddddd"),
];

/// One row of spans per queue, over the group's time span.
fn timeline(group: &crate::run::RunGroup) -> String {
    let end = group
        .queues
        .iter()
        .flat_map(|q| q.states.iter().map(|s| s.to_ms))
        .fold(0.0f64, f64::max);
    if end <= 0.0 {
        return String::new();
    }
    let (left, width, row) = (110.0, 760.0, 28.0);
    let height = row * group.queues.len() as f64 + 30.0;
    let mut svg = format!(
        "<figure class=\"timeline\"><svg xmlns=\"http://www.w3.org/2000/svg\" \
         viewBox=\"0 0 900 {height}\" width=\"900\" height=\"{height}\">\n"
    );
    for (i, q) in group.queues.iter().enumerate() {
        let y = i as f64 * row;
        let _ = writeln!(
            svg,
            "<text x=\"0\" y=\"{:.1}\" font-size=\"13\">{}</text>",
            y + 18.0,
            escape(&q.name)
        );
        for s in &q.states {
            let colour = STATES
                .iter()
                .find(|(k, _)| *k == s.state)
                .map_or("#000", |(_, c)| c);
            let x = left + width * s.from_ms / end;
            let w = (width * (s.to_ms - s.from_ms) / end).max(0.3);
            let _ = writeln!(
                svg,
                "<rect x=\"{x:.2}\" y=\"{:.1}\" width=\"{w:.2}\" height=\"{:.1}\" fill=\"{colour}\">\
                 <title>{} {:.1}-{:.1} ms</title></rect>",
                y + 4.0,
                row - 8.0,
                s.state.name(),
                s.from_ms,
                s.to_ms
            );
        }
    }
    let _ = writeln!(
        svg,
        "<text x=\"{left}\" y=\"{:.1}\" font-size=\"12\">0 ms</text>\
         <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\">{end:.0} ms</text>",
        height - 6.0,
        left + width,
        height - 6.0
    );
    svg.push_str("</svg><figcaption class=\"legend\">queue states:");
    for (state, colour) in STATES {
        let _ = write!(
            svg,
            "<span style=\"background:{colour}\"></span>{}",
            state.name()
        );
    }
    svg.push_str("</figcaption></figure>\n");
    svg
}

/// Every queue of every group, one row each, with every figure any of them has.
fn account_table(record: &RunRecord) -> String {
    let mut keys: Vec<&String> = Vec::new();
    let mut seen = BTreeSet::new();
    for q in record.groups.iter().flat_map(|g| &g.queues) {
        for k in q.account.keys() {
            if seen.insert(k) {
                keys.push(k);
            }
        }
    }
    let mut t = String::from(
        "<h2>Accounting</h2>\n<div class=\"wide\"><table class=\"account\"><thead><tr><th>configuration</th><th>queue</th>",
    );
    for k in &keys {
        let _ = write!(t, "<th>{}</th>", escape(k));
    }
    t.push_str("</tr></thead><tbody>\n");
    for g in &record.groups {
        for q in &g.queues {
            let _ = write!(
                t,
                "<tr><td>{}</td><td>{}</td>",
                escape(&g.name),
                escape(&q.name)
            );
            for k in &keys {
                let cell = match q.account.get(k.as_str()) {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(s)) => escape(s),
                    Some(v) => escape(&v.to_string()),
                };
                let _ = write!(t, "<td>{cell}</td>");
            }
            t.push_str("</tr>\n");
        }
    }
    t.push_str("</tbody></table></div>\n");
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{QueueRecord, RunGroup, StateSpan};
    use serde_json::json;

    pub(crate) fn sample() -> RunRecord {
        let queue = |name: &str, misses: u64| QueueRecord {
            name: name.into(),
            latency_cdf_us: vec![(100.0, 0.5), (300.0, 1.0)],
            states: vec![
                StateSpan {
                    from_ms: 0.0,
                    to_ms: 5.0,
                    state: QueueStateKind::Running,
                },
                StateSpan {
                    from_ms: 5.0,
                    to_ms: 8.0,
                    state: QueueStateKind::Suspended,
                },
            ],
            account: json!({"completed": 10, "slo_misses": misses, "device_time": "measured"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        };
        RunRecord {
            title: "a <test> run".into(),
            machine: "2 cores".into(),
            groups: vec![RunGroup {
                name: "observe".into(),
                queues: vec![queue("foreground", 2), queue("background", 0)],
            }],
        }
    }

    #[test]
    fn the_page_has_its_figures_and_table_and_escapes_names() {
        let page = render(&sample()).expect("renders");
        assert!(page.starts_with("<!doctype html>"));
        assert_eq!(page.matches("<svg").count(), 2, "the CDFs and one timeline");
        assert!(
            page.contains("observe foreground"),
            "a series per group and queue"
        );
        assert!(!page.contains("<?xml"), "no prolog inside the page");
        assert!(page.contains("a &lt;test&gt; run"));
        assert_eq!(page.matches("<tr><td>observe</td>").count(), 2);
        assert!(page.contains("<th>slo_misses</th>"));
        assert!(
            !page.contains(" src=") && !page.contains(" href="),
            "nothing is fetched"
        );
    }
}
