//! Checks on a crate's source layout, read with `syn`: which functions run past a length
//! limit, and whether its modules import each other in a circle. Code under
//! `#[cfg(test)]` and `#[test]` functions is left out: tests may read any module.
//!
//! A module is a file (`a/b.rs` and `a/b/mod.rs` are `a::b`); an edge `m → n` is a path
//! `crate::…`, `self::…` or `super::…` in `m` (a `use`, a type, a call) whose longest prefix
//! naming a module of the crate is `n`. Edges from a module to its own descendants are the
//! module tree, not imports, and are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::Visit;

/// A function longer than the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongFn {
    /// Path of the file, relative to the source folder.
    pub file: String,
    pub name: String,
    pub lines: usize,
}

/// One source file: its module path (`analyze::clocks`; the crate root is the empty path)
/// and its parsed syntax.
struct Module {
    path: Vec<String>,
    file: String,
    ast: syn::File,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn modules(src: &Path) -> Vec<Module> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(src).unwrap_or(&p).to_path_buf();
            let mut path: Vec<String> = rel
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                path.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                path.pop();
            }
            let text = std::fs::read_to_string(&p)
                .unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
            let ast =
                syn::parse_file(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", p.display()));
            Module {
                path,
                file: rel.to_string_lossy().into_owned(),
                ast,
            }
        })
        .collect()
}

fn is_test_attr(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        if a.path().is_ident("test") {
            return true;
        }
        if a.path().is_ident("cfg") {
            let mut test = false;
            let _ = a.parse_nested_meta(|m| {
                test |= m.path.is_ident("test");
                Ok(())
            });
            return test;
        }
        false
    })
}

/// Every function, method and associated function outside test code, with its length in
/// lines (signature to closing brace; its doc comment not counted).
struct Fns<'a> {
    file: &'a str,
    found: Vec<LongFn>,
}

impl Fns<'_> {
    fn push(&mut self, name: String, block: &syn::Block, sig: &syn::Signature) {
        let lines = block
            .span()
            .end()
            .line
            .saturating_sub(sig.span().start().line)
            + 1;
        self.found.push(LongFn {
            file: self.file.to_string(),
            name,
            lines,
        });
    }
}

impl<'ast> Visit<'ast> for Fns<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test_attr(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if is_test_attr(&f.attrs) {
            return;
        }
        self.push(f.sig.ident.to_string(), &f.block, &f.sig);
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if !is_test_attr(&i.attrs) {
            syn::visit::visit_item_impl(self, i);
        }
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_test_attr(&f.attrs) {
            return;
        }
        self.push(f.sig.ident.to_string(), &f.block, &f.sig);
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(b) = &f.default {
            self.push(f.sig.ident.to_string(), b, &f.sig);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

/// The functions of the crate under `src` longer than `max` lines, tests aside, longest
/// first.
pub fn long_functions(src: &Path, max: usize) -> Vec<LongFn> {
    let mut out = Vec::new();
    for m in modules(src) {
        let mut v = Fns {
            file: &m.file,
            found: Vec::new(),
        };
        v.visit_file(&m.ast);
        out.extend(v.found.into_iter().filter(|f| f.lines > max));
    }
    out.sort_by(|a, b| b.lines.cmp(&a.lines).then(a.file.cmp(&b.file)));
    out
}

/// The paths a module names, outside test code, as written (`crate`, `self`, `super` first).
struct Paths {
    found: Vec<Vec<String>>,
}

impl Paths {
    fn tree(&mut self, prefix: &mut Vec<String>, t: &syn::UseTree) {
        match t {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut v = prefix.clone();
                v.push(n.ident.to_string());
                self.found.push(v);
            }
            syn::UseTree::Rename(r) => {
                let mut v = prefix.clone();
                v.push(r.ident.to_string());
                self.found.push(v);
            }
            syn::UseTree::Glob(_) => self.found.push(prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.tree(prefix, t);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test_attr(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_test_attr(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if !is_test_attr(&i.attrs) {
            syn::visit::visit_item_impl(self, i);
        }
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if !is_test_attr(&u.attrs) {
            self.tree(&mut Vec::new(), &u.tree);
        }
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.found
            .push(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }
}

/// The module graph of the crate under `src`: each module's (`a::b`, the root `crate`) imports
/// of other modules of the crate.
pub fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(src);
    let known: BTreeSet<Vec<String>> = mods.iter().map(|m| m.path.clone()).collect();
    let name = |p: &[String]| {
        if p.is_empty() {
            "crate".to_string()
        } else {
            p.join("::")
        }
    };
    let mut graph = BTreeMap::new();
    for m in &mods {
        let mut v = Paths { found: Vec::new() };
        v.visit_file(&m.ast);
        let mut deps = BTreeSet::new();
        for p in v.found {
            let mut abs: Vec<String> = match p.first().map(String::as_str) {
                Some("crate") => p[1..].to_vec(),
                Some("self") => m.path.iter().chain(&p[1..]).cloned().collect(),
                Some("super") => {
                    let mut base = m.path.clone();
                    let mut rest = &p[..];
                    while rest.first().map(String::as_str) == Some("super") {
                        base.pop();
                        rest = &rest[1..];
                    }
                    base.extend(rest.iter().cloned());
                    base
                }
                _ => continue,
            };
            while !abs.is_empty() && !known.contains(&abs) {
                abs.pop();
            }
            if abs == m.path || abs.starts_with(&m.path) && !m.path.is_empty() {
                continue; // itself or its own submodules
            }
            if m.path.is_empty() {
                continue; // the crate root declares and re-exports
            }
            deps.insert(name(&abs));
        }
        graph.insert(name(&m.path), deps);
    }
    graph
}

/// The circles in the crate's module graph: each strongly connected set of two or more
/// modules, sorted.
pub fn module_cycles(src: &Path) -> Vec<Vec<String>> {
    let g = module_graph(src);
    // Tarjan's strongly connected components
    struct S<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn strong<'a>(s: &mut S<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on.insert(v);
        let g = s.g;
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                strong(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = S {
        g: &g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v.as_str()) {
            strong(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// The layout rules as two tests of the calling crate (its `src/`): no function outside tests
/// runs past 150 lines, and no modules import each other in a circle. Write
/// `testkit::layout_tests!();` in the crate's `tests/layout.rs`.
#[macro_export]
macro_rules! layout_tests {
    () => {
        fn src() -> &'static ::std::path::Path {
            ::std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))
        }

        #[test]
        fn no_function_runs_past_150_lines() {
            let long = $crate::layout::long_functions(src(), 150);
            assert!(long.is_empty(), "functions over 150 lines: {long:?}");
        }

        #[test]
        fn no_module_imports_in_a_circle() {
            let cycles = $crate::layout::module_cycles(src());
            assert!(cycles.is_empty(), "import circles: {cycles:?}");
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (p, text) in files {
            let p = d.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        d
    }

    #[test]
    fn finds_a_circle_through_use_and_calls_and_ignores_tests_and_children() {
        let d = tree(&[
            ("lib.rs", "pub mod a; pub mod b; pub mod c;"),
            ("a/mod.rs", "pub mod x; use crate::b::f; use self::x::g;"),
            ("a/x.rs", "pub fn g() { super::super::c::h(); }"),
            ("b.rs", "pub fn f() { crate::a::x::g() }"),
            (
                "c.rs",
                "pub fn h() {} #[cfg(test)] mod tests { use crate::a::x::g; }",
            ),
        ]);
        let g = module_graph(d.path());
        assert_eq!(g["a"], BTreeSet::from(["b".to_string()]));
        assert_eq!(g["a::x"], BTreeSet::from(["c".to_string()]));
        assert!(g["c"].is_empty(), "{g:?}");
        // a → b → a::x: a circle only if a::x came back to a or b
        assert!(module_cycles(d.path()).is_empty());
        let d = tree(&[
            ("lib.rs", "pub mod a; pub mod b;"),
            ("a.rs", "pub fn f() { crate::b::g() }"),
            ("b.rs", "use crate::a::f; pub fn g() {}"),
        ]);
        assert_eq!(
            module_cycles(d.path()),
            vec![vec!["a".to_string(), "b".to_string()]]
        );
    }

    #[test]
    fn measures_functions_but_not_tests() {
        let long = format!("fn long() {{\n{}}}\n", "    let _ = 1;\n".repeat(10));
        let test = format!("#[test]\nfn t() {{\n{}}}\n", "    let _ = 1;\n".repeat(20));
        let method = format!(
            "struct S;\nimpl S {{\n    fn m(&self) {{\n{}    }}\n}}\n",
            "        let _ = 1;\n".repeat(12)
        );
        let d = tree(&[("lib.rs", &format!("{long}{test}{method}fn short() {{}}\n"))]);
        let found = long_functions(d.path(), 5);
        let names: Vec<(&str, usize)> = found.iter().map(|f| (f.name.as_str(), f.lines)).collect();
        assert_eq!(names, vec![("m", 14), ("long", 12)]);
    }
}
