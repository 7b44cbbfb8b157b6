//! A tiny XML element builder and the byte-range splicer behind `libvirt::patch_domain`.
//!
//! The splicer never re-serializes what it does not own: it walks the children of an existing
//! element (parsed by `roxmltree`, which keeps byte ranges), copies every byte it keeps
//! verbatim (gaps, comments, foreign elements, attribute quoting), and writes only the
//! elements the plan owns. See [`merge`] for the rules.

use std::fmt::Write as _;

/// An element we write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct El {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub text: Option<String>,
    pub kids: Vec<Kid>,
    /// When the element already exists: merge children (true) or replace it whole (false).
    pub merge: bool,
    /// When merging: keep the existing start tag (its attributes) instead of ours.
    pub keep_start: bool,
    /// Only insert this element when absent; an existing one is left as it is.
    pub soft: bool,
    /// When merging: keys of existing children to remove even if we write none of them.
    pub drops: Vec<String>,
    /// When merging: canonical order of child keys, to place children we insert.
    pub order: &'static [&'static str],
    /// When merging: kept children with a `vcpus` attribute (`<vcpusched>`, `<cachetune>`…)
    /// are clipped to vCPUs `0..n`, and removed when none is left, so the domain still
    /// defines after the vCPU count shrank.
    pub clip_vcpus: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kid {
    El(El),
    Comment(String),
}

impl El {
    pub fn new(name: &str) -> Self {
        El {
            name: name.to_string(),
            attrs: Vec::new(),
            text: None,
            kids: Vec::new(),
            merge: false,
            keep_start: false,
            soft: false,
            drops: Vec::new(),
            order: &[],
            clip_vcpus: None,
        }
    }

    pub fn attr(mut self, k: &str, v: impl ToString) -> Self {
        self.attrs.push((k.to_string(), v.to_string()));
        self
    }

    pub fn text(mut self, t: impl ToString) -> Self {
        self.text = Some(t.to_string());
        self
    }

    pub fn kid(mut self, k: El) -> Self {
        self.kids.push(Kid::El(k));
        self
    }

    pub fn push(&mut self, k: El) {
        self.kids.push(Kid::El(k));
    }

    pub fn comment(&mut self, c: impl Into<String>) {
        self.kids.push(Kid::Comment(c.into()));
    }

    pub fn merged(mut self) -> Self {
        self.merge = true;
        self
    }

    pub fn keep_start(mut self) -> Self {
        self.keep_start = true;
        self
    }

    pub fn soft(mut self) -> Self {
        self.soft = true;
        self
    }

    pub fn drops(mut self, keys: &[&str]) -> Self {
        self.drops.extend(keys.iter().map(|s| s.to_string()));
        self
    }

    pub fn attr_value(&self, k: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }

    /// Identity of a child for merging: the element name, plus the `name` attribute for the
    /// list-like children `<timer name=…>` and `<feature name=…>`.
    pub fn key(&self) -> String {
        key_of(&self.name, self.attr_value("name"))
    }

    fn start(&self, st: &Style) -> String {
        let mut s = format!("<{}", self.name);
        for (k, v) in &self.attrs {
            let _ = write!(s, " {k}={q}{}{q}", escape(v), q = st.quote);
        }
        s
    }

    /// Render a fresh element at `depth` (its own line's indentation is the caller's).
    pub fn render(&self, st: &Style, depth: usize) -> String {
        let mut s = self.start(st);
        if let Some(t) = &self.text {
            let _ = write!(s, ">{}</{}>", escape(t), self.name);
        } else if self.kids.is_empty() {
            s.push_str("/>");
        } else {
            s.push('>');
            for k in &self.kids {
                s.push_str(&st.sep(depth + 1));
                s.push_str(&k.render(st, depth + 1));
            }
            s.push_str(&st.sep(depth));
            let _ = write!(s, "</{}>", self.name);
        }
        s
    }
}

impl Kid {
    fn render(&self, st: &Style, depth: usize) -> String {
        match self {
            Kid::El(e) => e.render(st, depth),
            Kid::Comment(c) => format!("<!-- {} -->", c.replace("--", "- -")),
        }
    }

    fn key(&self) -> Option<String> {
        match self {
            Kid::El(e) => Some(e.key()),
            Kid::Comment(_) => None,
        }
    }
}

pub(crate) fn key_of(name: &str, name_attr: Option<&str>) -> String {
    match (name, name_attr) {
        ("timer" | "feature", Some(n)) => format!("{name}[{n}]"),
        _ => name.to_string(),
    }
}

fn node_key(n: &roxmltree::Node) -> Option<String> {
    n.is_element()
        .then(|| key_of(n.tag_name().name(), n.attribute("name")))
}

/// Escape text or a single-quoted attribute value.
pub(crate) fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '\'' => o.push_str("&apos;"),
            '"' => o.push_str("&quot;"),
            c => o.push(c),
        }
    }
    o
}

/// Line ending and indentation unit of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Style {
    pub nl: String,
    pub unit: String,
    /// Attribute quote: `'` as libvirt writes, or `"` when the document uses those.
    pub quote: char,
}

impl Default for Style {
    fn default() -> Self {
        Style {
            nl: "\n".into(),
            unit: "  ".into(),
            quote: '\'',
        }
    }
}

impl Style {
    /// Separator before a line at `depth`.
    pub fn sep(&self, depth: usize) -> String {
        format!("{}{}", self.nl, self.unit.repeat(depth))
    }

    /// Learn the style of the children of `root` (depth 1): the whitespace before the first
    /// child element. No newline there means a one-line document: we write compactly.
    pub fn detect(src: &str, root: &roxmltree::Node) -> Style {
        let start = start_tag_end(src, root.range().start).0;
        // the quote of the first attribute in the document's elements
        let quote = root
            .descendants()
            .filter(|n| n.is_element())
            .find_map(|n| n.attributes().next().map(|a| a.range_value().start))
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| src.as_bytes().get(i))
            .map(|&b| if b == b'"' { '"' } else { '\'' })
            .unwrap_or('\'');
        let Some(first) = root.children().find(|c| c.is_element() || c.is_comment()) else {
            return Style {
                quote,
                ..Style::default()
            };
        };
        let gap = src.get(start..first.range().start).unwrap_or("");
        match gap.rfind('\n') {
            Some(i) => {
                let nl = if gap[..i].ends_with('\r') {
                    "\r\n"
                } else {
                    "\n"
                };
                let unit: String = gap[i + 1..]
                    .chars()
                    .take_while(|c| *c == ' ' || *c == '\t')
                    .collect();
                Style {
                    nl: nl.into(),
                    unit,
                    quote,
                }
            }
            None => Style {
                nl: String::new(),
                unit: String::new(),
                quote,
            },
        }
    }
}

/// End of the start tag that begins at `start` (index after its `>`), and whether it is
/// self-closing. Quoted attribute values may contain `>`.
pub(crate) fn start_tag_end(src: &str, start: usize) -> (usize, bool) {
    let bytes = src.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = start;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if b == b'>' => {
                let self_closing = i > start && bytes[i - 1] == b'/';
                return (i + 1, self_closing);
            }
            None => {}
        }
        i += 1;
    }
    (bytes.len(), false)
}

fn is_blank(s: &str) -> bool {
    s.chars().all(char::is_whitespace)
}

/// Merge `ours` into the existing element `node` and return the new text for
/// `node.range()`.
///
/// Rules, per existing child (in document order, with the whitespace/text gap before it):
/// - a child whose key we write is replaced *in place* by our group of children with that
///   key (all `<vcpupin>`s at the position of the first old one), recursing when our element
///   is itself `merge`; later children with the same key are removed with their gap;
/// - a child whose key is in `drops` is removed with its gap;
/// - anything else (foreign elements, comments, processing instructions) is copied verbatim;
/// - our groups with no existing counterpart are inserted before the first existing child that
///   comes later in `order`, or appended after the last child, indented like it.
/// - a `soft` child of ours is inserted only when no child with its key exists.
pub(crate) fn merge(
    src: &str,
    node: &roxmltree::Node,
    ours: &El,
    st: &Style,
    depth: usize,
) -> String {
    let range = node.range();
    let (start_end, self_closing) = start_tag_end(src, range.start);
    let start_tag = if ours.keep_start {
        let t = src.get(range.start..start_end).unwrap_or("");
        if self_closing {
            format!(
                "{}>",
                t.trim_end_matches('>').trim_end_matches('/').trim_end()
            )
        } else {
            t.to_string()
        }
    } else {
        format!("{}>", ours.start(st))
    };

    // Group our children by key, in our order.
    let mut groups: Vec<(Option<String>, Vec<&Kid>)> = Vec::new();
    for k in &ours.kids {
        let key = k.key();
        match groups.iter_mut().find(|(g, _)| key.is_some() && *g == key) {
            Some((_, v)) => v.push(k),
            None => groups.push((key, vec![k])),
        }
    }
    let children: Vec<roxmltree::Node> = node.children().filter(|c| !c.is_text()).collect();
    let existing: Vec<Option<String>> = children.iter().map(node_key).collect();
    let exists = |k: &Option<String>| k.is_some() && existing.contains(k);
    // Soft groups that exist are left alone (emitted = true, not owned).
    let mut emitted: Vec<bool> = groups
        .iter()
        .map(|(k, v)| {
            let soft = v.iter().all(|kid| matches!(kid, Kid::El(e) if e.soft));
            soft && exists(k)
        })
        .collect();
    let owned = |k: &str| {
        groups.iter().any(|(g, v)| {
            g.as_deref() == Some(k) && !v.iter().all(|kid| matches!(kid, Kid::El(e) if e.soft))
        }) || ours.drops.iter().any(|d| d == k)
    };
    let order_of = |k: &Option<String>| {
        k.as_deref()
            .and_then(|k| ours.order.iter().position(|o| *o == k))
    };

    let render_group = |kids: &[&Kid], existing: Option<&roxmltree::Node>, sep: &str| -> String {
        let mut s = String::new();
        for (i, kid) in kids.iter().enumerate() {
            if i > 0 {
                s.push_str(sep);
            }
            match (kid, existing) {
                (Kid::El(e), Some(ex)) if i == 0 && e.merge => {
                    s.push_str(&merge(src, ex, e, st, depth + 1))
                }
                _ => s.push_str(&kid.render(st, depth + 1)),
            }
        }
        s
    };
    let skip_empty = |kids: &[&Kid]| {
        kids.iter()
            .all(|k| matches!(k, Kid::El(e) if e.merge && e.kids.is_empty() && e.text.is_none()))
    };

    if self_closing {
        let pending: Vec<usize> = (0..groups.len())
            .filter(|&i| !emitted[i] && !skip_empty(&groups[i].1))
            .collect();
        if pending.is_empty() {
            return src.get(range.clone()).unwrap_or("").to_string();
        }
        let mut out = start_tag;
        for i in pending {
            out.push_str(&st.sep(depth + 1));
            out.push_str(&render_group(&groups[i].1, None, &st.sep(depth + 1)));
        }
        out.push_str(&st.sep(depth));
        let _ = write!(out, "</{}>", ours.name);
        return out;
    }

    let end_tag_start = src
        .get(range.clone())
        .and_then(|t| t.rfind("</"))
        .map(|i| range.start + i)
        .unwrap_or(range.end)
        .max(start_end);
    let mut out = start_tag;
    let mut prev = start_end;
    let mut sep_seen: Option<String> = None;
    for (ci, child) in children.iter().enumerate() {
        let cr = child.range();
        let gap = src.get(prev..cr.start).unwrap_or("");
        prev = cr.end;
        let key = &existing[ci];
        let sep = if is_blank(gap) && !gap.is_empty() {
            gap.to_string()
        } else {
            st.sep(depth + 1)
        };
        if is_blank(gap) && !gap.is_empty() {
            sep_seen = Some(gap.to_string());
        }
        // Insert absent groups that come before this child in canonical order.
        if let Some(here) = order_of(key) {
            for gi in 0..groups.len() {
                let (gk, kids) = &groups[gi];
                if emitted[gi] || exists(gk) || skip_empty(kids) {
                    continue;
                }
                if order_of(gk).is_some_and(|o| o < here) {
                    out.push_str(gap);
                    out.push_str(&render_group(kids, None, &sep));
                    emitted[gi] = true;
                }
            }
        }
        match key {
            Some(k) if owned(k) => {
                let gi = groups
                    .iter()
                    .position(|(g, _)| g.as_deref() == Some(k.as_str()));
                match gi {
                    Some(gi) if !emitted[gi] => {
                        out.push_str(gap);
                        out.push_str(&render_group(&groups[gi].1, Some(child), &sep));
                        emitted[gi] = true;
                    }
                    _ => {
                        // removed; keep a gap that carries text rather than whitespace
                        if !is_blank(gap) {
                            out.push_str(gap);
                        }
                    }
                }
            }
            _ => match ours.clip_vcpus.and_then(|n| clip_vcpus(src, child, n)) {
                Some(None) => {
                    if !is_blank(gap) {
                        out.push_str(gap);
                    }
                }
                Some(Some(text)) => {
                    out.push_str(gap);
                    out.push_str(&text);
                }
                None => {
                    out.push_str(gap);
                    out.push_str(src.get(cr).unwrap_or(""));
                }
            },
        }
    }
    let final_gap = src.get(prev..end_tag_start).unwrap_or("");
    let sep = sep_seen.unwrap_or_else(|| st.sep(depth + 1));
    let mut appended = false;
    for gi in 0..groups.len() {
        if emitted[gi] || skip_empty(&groups[gi].1) {
            continue;
        }
        out.push_str(&sep);
        out.push_str(&render_group(&groups[gi].1, None, &sep));
        appended = true;
    }
    if appended && children.is_empty() && is_blank(final_gap) {
        out.push_str(&st.sep(depth));
    } else {
        out.push_str(final_gap);
    }
    out.push_str(src.get(end_tag_start..range.end).unwrap_or(""));
    out
}

/// `None`: keep the child as it is; `Some(None)`: remove it; `Some(Some(t))`: its new text.
fn clip_vcpus(src: &str, child: &roxmltree::Node, n: u32) -> Option<Option<String>> {
    let attr = child.attributes().find(|a| a.name() == "vcpus")?;
    let set = crate::values::parse_libvirt_cpuset(attr.value()).ok()?;
    let keep = set.intersection(&topo::CpuSet::range(0, n));
    if keep == set {
        return None;
    }
    if keep.is_empty() {
        return Some(None);
    }
    let (r, v) = (child.range(), attr.range_value());
    let text = format!(
        "{}{}{}",
        src.get(r.start..v.start)?,
        keep.to_list_string(),
        src.get(v.end..r.end)?
    );
    Some(Some(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(src: &str, ours: &El) -> String {
        let doc = roxmltree::Document::parse(src).unwrap();
        let root = doc.root_element();
        let st = Style::detect(src, &root);
        let r = root.range();
        format!(
            "{}{}{}",
            &src[..r.start],
            merge(src, &root, ours, &st, 0),
            &src[r.end..]
        )
    }

    #[test]
    fn start_tag_end_skips_quoted_gt() {
        let s = "<a b='x>y' c=\"z>\"/>rest";
        assert_eq!(start_tag_end(s, 0), (s.find("rest").unwrap(), true));
        assert_eq!(start_tag_end("<a>", 0), (3, false));
        assert_eq!(start_tag_end("<a", 0), (2, false));
    }

    #[test]
    fn replaces_in_place_and_keeps_the_rest() {
        let src = "<r>\n  <!-- keep -->\n  <x a='1'/>\n  <y/>\n  <x a='2'/>\n</r>";
        let ours = El::new("r")
            .merged()
            .keep_start()
            .kid(El::new("x").attr("a", "9"))
            .kid(El::new("x").attr("a", "8"));
        assert_eq!(
            run(src, &ours),
            "<r>\n  <!-- keep -->\n  <x a='9'/>\n  <x a='8'/>\n  <y/>\n</r>"
        );
    }

    #[test]
    fn inserts_by_order_and_appends() {
        let src = "<r>\n\t<a/>\n\t<c/>\n</r>";
        let mut ours = El::new("r").merged().keep_start();
        ours.order = &["a", "b", "c"];
        ours.push(El::new("b"));
        ours.push(El::new("z").kid(El::new("w")));
        assert_eq!(
            run(src, &ours),
            "<r>\n\t<a/>\n\t<b/>\n\t<c/>\n\t<z>\n\t\t<w/>\n\t</z>\n</r>"
        );
    }

    #[test]
    fn self_closing_and_empty_elements_open_up() {
        let ours = El::new("r").merged().keep_start().kid(El::new("k"));
        // nothing to learn the style from: two spaces, libvirt's
        assert_eq!(run("<r x=\"1\"/>", &ours), "<r x=\"1\">\n  <k/>\n</r>");
        assert_eq!(run("<r>\n</r>", &ours), "<r>\n  <k/>\n</r>");
        assert_eq!(
            run(
                "<q>\n  <r></r>\n</q>",
                &El::new("q").merged().keep_start().kid(ours.clone())
            ),
            "<q>\n  <r>\n    <k/>\n  </r>\n</q>"
        );
    }

    #[test]
    fn soft_children_stay_and_drops_go() {
        let src = "<r>\n  <acpi x='y'/>\n  <old/>\n  <keep/>\n</r>";
        let ours = El::new("r")
            .merged()
            .keep_start()
            .drops(&["old"])
            .kid(El::new("acpi").soft())
            .kid(El::new("apic").soft());
        assert_eq!(
            run(src, &ours),
            "<r>\n  <acpi x='y'/>\n  <keep/>\n  <apic/>\n</r>"
        );
    }

    #[test]
    fn escapes_attribute_values_and_comments() {
        let mut e = El::new("a").attr("v", "x'<&\"");
        e.comment("a -- b");
        assert_eq!(
            e.render(&Style::default(), 0),
            "<a v='x&apos;&lt;&amp;&quot;'>\n  <!-- a - - b -->\n</a>"
        );
    }
}
