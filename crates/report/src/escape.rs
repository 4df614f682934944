//! Escaping text for HTML and SVG: its own file because the page (`html`) and the figures
//! (`plot`) both write markup, and neither should import the other for it.

/// Text safe inside HTML or SVG elements and attributes.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
