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
    /// When an existing element with our key is replaced: keep its start tag and the
    /// attributes we do not set (a `<timer>`'s `track`, a `<cell>`'s `memAccess`), putting
    /// our values in place and adding our other attributes.
    pub keep_attrs: bool,
    /// With `keep_attrs`, when we have no children: keep the existing element's content
    /// (a `<timer>`'s `<catchup>`, a `<cell>`'s `<distances>`) instead of dropping it.
    pub keep_content: bool,
    /// With `keep_attrs`: attributes set only where the existing element has them.
    pub overrides: Vec<(String, String)>,
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
            keep_attrs: false,
            keep_content: false,
            overrides: Vec::new(),
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

    pub fn keep_attrs(mut self, keep_content: bool) -> Self {
        self.keep_attrs = true;
        self.keep_content = keep_content;
        self
    }

    /// With `keep_attrs`: set `k` to `v` only where the existing element has `k`.
    pub fn override_attr(mut self, k: &str, v: impl ToString) -> Self {
        self.overrides.push((k.to_string(), v.to_string()));
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
    /// list-like children `<timer name=…>` and `<feature name=…>`, and the `id` of a NUMA
    /// `<cell id=…>`.
    pub fn key(&self) -> String {
        key_of(&self.name, self.attr_value("name"), self.attr_value("id"))
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

pub(crate) fn key_of(name: &str, name_attr: Option<&str>, id_attr: Option<&str>) -> String {
    match (name, name_attr, id_attr) {
        ("timer" | "feature", Some(n), _) => format!("{name}[{}]", n.trim()),
        ("cell", _, Some(id)) => format!("{name}[{}]", id.trim()),
        _ => name.to_string(),
    }
}

/// The element name of a key (`timer[rtc]` → `timer`).
fn key_name(key: &str) -> &str {
    key.split('[').next().unwrap_or(key)
}

fn node_key(n: &roxmltree::Node) -> Option<String> {
    n.is_element()
        .then(|| key_of(n.tag_name().name(), n.attribute("name"), n.attribute("id")))
}

/// Whether the existing element `n` says exactly what `e` says: the same name, the same
/// attributes with the same values (in any order and quoting), the same text, and the same
/// child elements in the same order, recursively (whitespace and comments aside). Such an
/// element keeps its bytes.
fn same(n: &roxmltree::Node, e: &El) -> bool {
    if !n.is_element() || n.tag_name().name() != e.name || n.tag_name().namespace().is_some() {
        return false;
    }
    if n.attributes().len() != e.attrs.len()
        || !e
            .attrs
            .iter()
            .all(|(k, v)| n.attribute(k.as_str()) == Some(v.as_str()))
    {
        return false;
    }
    let text: String = n
        .children()
        .filter(|c| c.is_text())
        .filter_map(|c| c.text())
        .collect();
    if text.trim() != e.text.as_deref().unwrap_or("") {
        return false;
    }
    let kids: Vec<roxmltree::Node> = n.children().filter(|c| c.is_element()).collect();
    if kids.len() != e.kids.len() {
        return false;
    }
    kids.iter().zip(&e.kids).all(|(a, b)| match b {
        Kid::El(b) => same(a, b),
        Kid::Comment(_) => false,
    })
}

/// Escape an attribute value for the quote it is written in.
fn escape_attr(v: &str, q: char) -> String {
    let e = escape(v);
    if q == '"' {
        e.replace("&apos;", "'")
    } else {
        e.replace("&quot;", "\"")
    }
}

/// `e` written over the existing element `n` ([`El::keep_attrs`]): the existing start tag
/// with `e`'s values in place (in their existing quotes), `e`'s other attributes appended in
/// the document's quote, the rest of the existing attributes kept; the existing content kept
/// with `keep_content`, else the element closes itself.
fn splice_attrs(src: &str, n: &roxmltree::Node, e: &El, st: &Style, depth: usize) -> String {
    if !e.kids.is_empty() || e.text.is_some() {
        return e.render(st, depth);
    }
    let r = n.range();
    let (start_end, self_closing) = start_tag_end(src, r.start);
    let bytes = src.as_bytes();
    let mut out = String::new();
    let mut pos = r.start;
    // after the element's name: where attributes go when it has none
    let mut insert_at = src
        .get(r.start + 1..start_end)
        .and_then(|t| t.find(|c: char| c.is_whitespace() || c == '/' || c == '>'))
        .map_or(start_end, |i| r.start + 1 + i);
    for a in n.attributes() {
        let v = a.range_value();
        insert_at = v.end + 1;
        if a.namespace().is_some() {
            continue;
        }
        let ours = e.attr_value(a.name()).or_else(|| {
            e.overrides
                .iter()
                .find(|(k, _)| k == a.name())
                .map(|(_, v)| v.as_str())
        });
        if let Some(ours) = ours {
            let q = v
                .start
                .checked_sub(1)
                .and_then(|i| bytes.get(i))
                .map_or('\'', |&b| b as char);
            out.push_str(src.get(pos..v.start).unwrap_or(""));
            out.push_str(&escape_attr(ours, q));
            pos = v.end;
        }
    }
    out.push_str(src.get(pos..insert_at).unwrap_or(""));
    for (k, v) in &e.attrs {
        if n.attributes()
            .any(|a| a.namespace().is_none() && a.name() == k)
        {
            continue;
        }
        let _ = write!(out, " {k}={q}{}{q}", escape_attr(v, st.quote), q = st.quote);
    }
    let tail = src.get(insert_at..start_end).unwrap_or("");
    if self_closing || e.keep_content {
        out.push_str(tail);
        out.push_str(src.get(start_end..r.end).unwrap_or(""));
    } else {
        out.push_str(tail.trim_end_matches('>').trim_end());
        out.push_str("/>");
    }
    out
}

/// One byte-range replacement in a document's text (the splices that keep every other byte).
pub(crate) struct Edit {
    pub at: std::ops::Range<usize>,
    pub text: String,
}

/// `src` with `edits` made (non-overlapping ranges of `src`, in any order).
pub(crate) fn apply_edits(src: &str, mut edits: Vec<Edit>) -> String {
    edits.sort_by_key(|e| std::cmp::Reverse(e.at.start));
    let mut out = src.to_string();
    for e in edits {
        out.replace_range(e.at, &e.text);
    }
    out
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

/// Line ending and indentation of a document, or of the inside of one element of it
/// ([`Style::inside`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Style {
    pub nl: String,
    /// One level deeper: the file's unit, or the step an element's own children take.
    pub unit: String,
    /// Attribute quote: `'` as libvirt writes, or `"` when most of the document uses those.
    pub quote: char,
    /// Indentation of depth 0 (the element being merged; empty for the document's root).
    pub base: String,
    /// Indentation of depth 1 where the element's children already have one; else
    /// `base` + `unit`.
    pub first: Option<String>,
}

impl Default for Style {
    fn default() -> Self {
        Style {
            nl: "\n".into(),
            unit: "  ".into(),
            quote: '\'',
            base: String::new(),
            first: None,
        }
    }
}

impl Style {
    /// Separator before a line at `depth`.
    pub fn sep(&self, depth: usize) -> String {
        format!("{}{}", self.nl, self.indent(depth))
    }

    /// Indentation of a line at `depth`.
    fn indent(&self, depth: usize) -> String {
        match (depth, &self.first) {
            (0, _) => self.base.clone(),
            (d, Some(first)) => format!("{first}{}", self.unit.repeat(d - 1)),
            (d, None) => format!("{}{}", self.base, self.unit.repeat(d)),
        }
    }

    /// The style inside `node`, which sits at `depth` of `self`: its own line's indentation
    /// (when it starts a line) at depth 0, the indentation most of its children that start a
    /// line have at depth 1, and, below that, the step from its line to its children's (when
    /// they are deeper), else `self`'s unit. So what is added inside a block pasted with tabs
    /// into a file indented with spaces (or the other way round) is indented like the block.
    pub fn inside(&self, src: &str, node: &roxmltree::Node, depth: usize) -> Style {
        let own = line_indent(src, node.range().start).unwrap_or_else(|| self.indent(depth));
        let first = most_common(child_indents(src, node).into_iter().map(|(_, i)| i));
        let tabs = |s: &str| s.contains('\t');
        let unit = match &first {
            Some(f) if f.len() > own.len() && f.starts_with(own.as_str()) => f[own.len()..].into(),
            // children in the other kind of whitespace than the file's: theirs
            Some(f) if tabs(f) && !tabs(&self.unit) => "\t".into(),
            Some(f) if !f.is_empty() && !tabs(f) && tabs(&self.unit) => f.clone(),
            _ => self.unit.clone(),
        };
        Style {
            nl: self.nl.clone(),
            unit,
            quote: self.quote,
            base: own,
            first,
        }
    }

    /// Learn the document's style: the quote most of its attributes use (ties: the first
    /// attribute's), and the line ending and indentation unit most of `root`'s child
    /// elements are written with (depth 1). A comment or element at column 0 among indented
    /// ones does not decide; no newline before any child means a one-line document, written
    /// compactly.
    pub fn detect(src: &str, root: &roxmltree::Node) -> Style {
        let bytes = src.as_bytes();
        let quotes: Vec<u8> = root
            .descendants()
            .filter(|n| n.is_element())
            .flat_map(|n| n.attributes().map(|a| a.range_value().start))
            .filter_map(|i| i.checked_sub(1).and_then(|i| bytes.get(i)).copied())
            .collect();
        let doubles = quotes.iter().filter(|&&b| b == b'"').count();
        let singles = quotes.len() - doubles;
        let quote = match doubles.cmp(&singles) {
            std::cmp::Ordering::Greater => '"',
            std::cmp::Ordering::Less => '\'',
            std::cmp::Ordering::Equal if quotes.first() == Some(&b'"') => '"',
            std::cmp::Ordering::Equal => '\'',
        };
        let any = root.children().any(|c| c.is_element() || c.is_comment());
        let one_line = !line_starts(src, root).any(|(c, _)| c.is_comment() || c.is_element());
        if any && one_line {
            return Style {
                nl: String::new(),
                unit: String::new(),
                quote,
                ..Style::default()
            };
        }
        match most_common(child_indents(src, root)) {
            Some((nl, unit)) => Style {
                nl,
                unit,
                quote,
                ..Style::default()
            },
            None => Style {
                quote,
                ..Style::default()
            },
        }
    }
}

/// The children (elements and comments) of `node` that start a line, each with the gap
/// before it from its last line break on.
fn line_starts<'a, 'i>(
    src: &'a str,
    node: &roxmltree::Node<'a, 'i>,
) -> impl Iterator<Item = (roxmltree::Node<'a, 'i>, &'a str)> {
    let mut prev = start_tag_end(src, node.range().start).0;
    node.children()
        .filter(|c| c.is_element() || c.is_comment())
        .filter_map(move |c| {
            let gap = src.get(prev..c.range().start).unwrap_or("");
            prev = c.range().end;
            gap.rfind('\n').map(|i| (c, &gap[i..]))
        })
}

/// (line ending, indentation) of each child element of `node` that starts a line. A comment
/// (often at column 0 among indented elements) does not count.
fn child_indents(src: &str, node: &roxmltree::Node) -> Vec<(String, String)> {
    line_starts(src, node)
        .filter(|(c, _)| c.is_element())
        .map(|(c, tail)| {
            let before = src.get(..c.range().start - tail.len()).unwrap_or("");
            let nl = if before.ends_with('\r') { "\r\n" } else { "\n" };
            (nl.to_string(), indent_of(&tail[1..]))
        })
        .collect()
}

/// The leading spaces and tabs of `s`.
fn indent_of(s: &str) -> String {
    s.chars().take_while(|c| *c == ' ' || *c == '\t').collect()
}

/// The indentation of the line `at` starts, when only spaces and tabs come before it there.
pub(crate) fn line_indent(src: &str, at: usize) -> Option<String> {
    let before = src.get(..at)?;
    let line = &before[before.rfind('\n').map_or(0, |i| i + 1)..];
    (indent_of(line).len() == line.len()).then(|| line.to_string())
}

/// The most common item; among equals the first seen.
fn most_common<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Option<T> {
    let mut seen: Vec<(T, usize)> = Vec::new();
    for it in items {
        match seen.iter_mut().find(|(s, _)| *s == it) {
            Some(e) => e.1 += 1,
            None => seen.push((it, 1)),
        }
    }
    let best = seen
        .iter()
        .enumerate()
        .max_by_key(|(i, (_, n))| (*n, std::cmp::Reverse(*i)))
        .map(|(i, _)| i)?;
    Some(seen.swap_remove(best).0)
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
    // this element's line at depth 0, its children's at 1
    let inner = st.inside(src, node, depth);
    let start_tag = start_tag(src, node, ours, st, start_end, self_closing);
    let groups = groups(ours);
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
        }) || ours.drops.iter().any(|d| d == k || d == key_name(k))
    };
    let order_of = |k: &Option<String>| {
        k.as_deref().and_then(|k| {
            ours.order
                .iter()
                .position(|o| *o == k)
                .or_else(|| ours.order.iter().position(|o| *o == key_name(k)))
        })
    };
    let render_group = |kids: &[&Kid], existing: &[roxmltree::Node], sep: &str| {
        render_group(src, &inner, kids, existing, sep)
    };
    let existing_of = |k: &str| -> Vec<roxmltree::Node> {
        children
            .iter()
            .zip(&existing)
            .filter(|(_, ek)| ek.as_deref() == Some(k))
            .map(|(c, _)| *c)
            .collect()
    };

    if self_closing {
        return opened(src, node, ours, &inner, start_tag, &groups, &emitted);
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
            inner.sep(1)
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
                    out.push_str(&render_group(kids, &[], &sep));
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
                        out.push_str(&render_group(&groups[gi].1, &existing_of(k), &sep));
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
    let sep = sep_seen.unwrap_or_else(|| inner.sep(1));
    let mut appended = false;
    for gi in 0..groups.len() {
        if emitted[gi] || skip_empty(&groups[gi].1) {
            continue;
        }
        out.push_str(&sep);
        out.push_str(&render_group(&groups[gi].1, &[], &sep));
        appended = true;
    }
    if appended && children.is_empty() && is_blank(final_gap) {
        out.push_str(&inner.sep(0));
    } else {
        out.push_str(final_gap);
    }
    out.push_str(src.get(end_tag_start..range.end).unwrap_or(""));
    out
}

/// The start tag `merge` writes: the user's, byte for byte (opened if it was self-closing),
/// where `ours` keeps it or it already says what ours would; else ours.
fn start_tag(
    src: &str,
    node: &roxmltree::Node,
    ours: &El,
    st: &Style,
    start_end: usize,
    self_closing: bool,
) -> String {
    let range = node.range();
    let kept = || {
        let t = src.get(range.start..start_end).unwrap_or("");
        if self_closing {
            format!(
                "{}>",
                t.trim_end_matches('>').trim_end_matches('/').trim_end()
            )
        } else {
            t.to_string()
        }
    };
    if ours.keep_start {
        kept()
    } else if node.attributes().len() == ours.attrs.len()
        && ours
            .attrs
            .iter()
            .all(|(k, v)| node.attribute(k.as_str()) == Some(v.as_str()))
    {
        // the start tag already says what ours would: its bytes stay (a later patch of a
        // file whose quote style the first one tipped over writes nothing new)
        kept()
    } else {
        format!("{}>", ours.start(st))
    }
}

/// A self-closing element merged: as it was when nothing of ours is pending, else opened
/// with our groups inside.
fn opened(
    src: &str,
    node: &roxmltree::Node,
    ours: &El,
    inner: &Style,
    start_tag: String,
    groups: &[(Option<String>, Vec<&Kid>)],
    emitted: &[bool],
) -> String {
    let pending: Vec<usize> = (0..groups.len())
        .filter(|&i| !emitted[i] && !skip_empty(&groups[i].1))
        .collect();
    if pending.is_empty() {
        return src.get(node.range()).unwrap_or("").to_string();
    }
    let mut out = start_tag;
    for i in pending {
        out.push_str(&inner.sep(1));
        out.push_str(&render_group(src, inner, &groups[i].1, &[], &inner.sep(1)));
    }
    out.push_str(&inner.sep(0));
    let _ = write!(out, "</{}>", ours.name);
    out
}

/// Our children grouped by key, in our order (children without a key each alone).
fn groups(ours: &El) -> Vec<(Option<String>, Vec<&Kid>)> {
    let mut groups: Vec<(Option<String>, Vec<&Kid>)> = Vec::new();
    for k in &ours.kids {
        let key = k.key();
        match groups.iter_mut().find(|(g, _)| key.is_some() && *g == key) {
            Some((_, v)) => v.push(k),
            None => groups.push((key, vec![k])),
        }
    }
    groups
}

/// Our i-th child of a key written over the i-th existing child of that key: merged, kept
/// byte for byte when it already says the same, or with its other attributes kept.
fn render_group(
    src: &str,
    inner: &Style,
    kids: &[&Kid],
    existing: &[roxmltree::Node],
    sep: &str,
) -> String {
    let mut s = String::new();
    for (i, kid) in kids.iter().enumerate() {
        if i > 0 {
            s.push_str(sep);
        }
        match (kid, existing.get(i)) {
            (Kid::El(e), Some(ex)) if e.merge => s.push_str(&merge(src, ex, e, inner, 1)),
            (Kid::El(e), Some(ex)) if same(ex, e) => s.push_str(src.get(ex.range()).unwrap_or("")),
            (Kid::El(e), Some(ex)) if e.keep_attrs => {
                s.push_str(&splice_attrs(src, ex, e, inner, 1))
            }
            // written over an existing element: on its line, its children on theirs
            (Kid::El(e), Some(ex)) => s.push_str(&e.render(&inner.inside(src, ex, 1), 0)),
            _ => s.push_str(&kid.render(inner, 1)),
        }
    }
    s
}

/// A group of empty merged elements only: nothing to write where none exists.
fn skip_empty(kids: &[&Kid]) -> bool {
    kids.iter()
        .all(|k| matches!(k, Kid::El(e) if e.merge && e.kids.is_empty() && e.text.is_none()))
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
    fn new_lines_inside_an_element_follow_its_own_indentation() {
        // a virsh dumpxml (two spaces) with a block pasted from a guide (tabs): what is added
        // inside the block, and the lines of its own children, are indented with tabs
        let src = "<q>\n  <r>\n\t<a/>\n  </r>\n  <s/>\n</q>";
        let r = El::new("r")
            .merged()
            .keep_start()
            .kid(El::new("b").kid(El::new("c").kid(El::new("d"))));
        assert_eq!(
            run(src, &El::new("q").merged().keep_start().kid(r.clone())),
            "<q>\n  <r>\n\t<a/>\n\t<b>\n\t\t<c>\n\t\t\t<d/>\n\t\t</c>\n\t</b>\n  </r>\n  <s/>\n</q>"
        );
        // a tab-indented file with a 4-space block: four spaces inside it
        let src = "<q>\n\t<r>\n\t    <a/>\n\t</r>\n\t<s/>\n</q>";
        assert_eq!(
            run(src, &El::new("q").merged().keep_start().kid(r.clone())),
            "<q>\n\t<r>\n\t    <a/>\n\t    <b>\n\t        <c>\n\t            <d/>\n\t        </c>\n\t    </b>\n\t</r>\n\t<s/>\n</q>"
        );
        // an element whose children sit at its own column (a template's <devices>): the
        // children's column for new children, one file unit deeper for theirs
        let src = "<q>\n\t<r>\n\t<a/>\n\t</r>\n</q>";
        assert_eq!(
            run(src, &El::new("q").merged().keep_start().kid(r.clone())),
            "<q>\n\t<r>\n\t<a/>\n\t<b>\n\t\t<c>\n\t\t\t<d/>\n\t\t</c>\n\t</b>\n\t</r>\n</q>"
        );
        // an empty block in an odd column: one file unit deeper than its own line
        let src = "<q>\n       <r></r>\n       <s/>\n</q>";
        assert_eq!(
            run(
                src,
                &El::new("q")
                    .merged()
                    .keep_start()
                    .kid(El::new("r").merged().keep_start().kid(El::new("b")))
            ),
            "<q>\n       <r>\n              <b/>\n       </r>\n       <s/>\n</q>"
        );
    }

    #[test]
    fn a_replaced_element_keeps_its_own_indentation() {
        // <v> replaced whole, <c> merged under a new start tag (in the document's quote):
        // tab-indented blocks in a file indented with two spaces
        let src = "<q a=\"1\" b=\"2\" d=\"3\">\n  <r/>\n  <s/>\n  <u/>\n\t<v>\n\t\t<x/>\n\t</v>\n\t<c m='x'>\n\t\t<t/>\n\t</c>\n</q>";
        let mut ours = El::new("q").merged().keep_start();
        ours.push(El::new("v").kid(El::new("y")).kid(El::new("y")));
        ours.push(El::new("c").attr("m", "h").merged().kid(El::new("t")));
        assert_eq!(
            run(src, &ours),
            "<q a=\"1\" b=\"2\" d=\"3\">\n  <r/>\n  <s/>\n  <u/>\n\t<v>\n\t\t<y/>\n\t\t<y/>\n\t</v>\n\t<c m=\"h\">\n\t\t<t/>\n\t</c>\n</q>"
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
    fn style_is_what_most_of_the_file_does() {
        let doc = |s: &'static str| roxmltree::Document::parse(s).unwrap();
        let st = |s: &'static str| {
            let d = doc(s);
            Style::detect(s, &d.root_element())
        };
        // first attribute double-quoted, the rest single: single
        let s = st("<r a=\"1\">\n    <x b='2'/>\n    <y c='3' d='4'/>\n</r>");
        assert_eq!((s.quote, s.unit.as_str()), ('\'', "    "));
        // a tie goes to the first attribute's quote
        assert_eq!(st("<r a=\"1\">\n  <x b='2'/>\n</r>").quote, '"');
        // a column-0 comment (and one odd element) among tab-indented children
        let s = st("<r>\n<!-- c -->\n\t<a/>\n<b/>\n\t<c/>\r\n\t<d/>\n</r>");
        assert_eq!((s.nl.as_str(), s.unit.as_str()), ("\n", "\t"));
        // one line: compact; no children: libvirt's two spaces
        let s = st("<r><a x='1'/><b/></r>");
        assert_eq!((s.nl.as_str(), s.unit.as_str()), ("", ""));
        let s = st("<r x='1'/>");
        assert_eq!(
            (s.nl.as_str(), s.unit.as_str(), s.quote),
            ("\n", "  ", '\'')
        );
    }

    #[test]
    fn equal_elements_keep_their_bytes_and_kept_attributes_stay() {
        let src = "<r>\n  <t name=\"rtc\"   tickpolicy=\"catchup\"/>\n  <t name='pit' track='guest' tickpolicy='delay'>\n    <catchup slew='120'/>\n  </t>\n</r>";
        let ours = El::new("r")
            .merged()
            .keep_start()
            .kid(
                El::new("t")
                    .attr("name", "rtc")
                    .attr("tickpolicy", "catchup"),
            )
            .kid(
                El::new("t")
                    .attr("name", "pit")
                    .attr("tickpolicy", "catchup")
                    .attr("present", "yes")
                    .keep_attrs(true),
            );
        let out = run(src, &ours);
        // the same element, odd spacing and all; no key of its own (t has no timer key), so
        // it is the i-th element of the group
        assert!(
            out.contains("<t name=\"rtc\"   tickpolicy=\"catchup\"/>"),
            "{out}"
        );
        assert!(
            out.contains("<t name='pit' track='guest' tickpolicy='catchup' present='yes'>\n    <catchup slew='120'/>\n  </t>"),
            "{out}"
        );
        // without keep_content the element closes itself
        let ours = El::new("r").merged().keep_start().kid(
            El::new("t")
                .attr("name", "rtc")
                .attr("x", "a'b")
                .keep_attrs(false),
        );
        let src = "<r>\n  <t name=\"rtc\" tickpolicy=\"catchup\">\n    <c/>\n  </t>\n</r>";
        assert_eq!(
            run(src, &ours),
            "<r>\n  <t name=\"rtc\" tickpolicy=\"catchup\" x=\"a'b\"/>\n</r>"
        );
    }

    #[test]
    fn a_start_tag_that_says_the_same_keeps_its_quotes() {
        // mostly single quotes until the patch removed them; the second patch detects double
        let src =
            "<r a=\"1\" b=\"2\" c=\"3\">\n  <cpu mode='x' check='none'>\n    <k/>\n  </cpu>\n</r>";
        let ours = El::new("r").merged().keep_start().kid(
            El::new("cpu")
                .attr("mode", "x")
                .attr("check", "none")
                .merged()
                .kid(El::new("k")),
        );
        assert_eq!(run(src, &ours), src);
        // a different value: ours, in the document's quote
        let ours = El::new("r")
            .merged()
            .keep_start()
            .kid(El::new("cpu").attr("mode", "y").merged().kid(El::new("k")));
        assert!(run(src, &ours).contains("<cpu mode=\"y\">"));
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
