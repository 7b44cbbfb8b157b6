//! `CpuSet`: a set of logical CPU (PU) or NUMA node numbers.
//!
//! Parses and prints the three spellings found on real hosts:
//! - Linux lists: `0-3,8,10-11` (`cpulist`, `smp_affinity_list`, `local_cpulist`);
//! - Linux masks: `ff,ffffffff` (`smp_affinity`, `local_cpus`, `cpumap`): 32-bit hex words,
//!   most significant first, separated by commas;
//! - hwloc bitmaps: `0x000000ff,0xffffffff` (also `0xf...f` for "infinitely many").

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Largest CPU number accepted from any input (keeps hostile input from allocating gigabytes).
pub const MAX_CPU: u32 = 1 << 20;

/// A sorted set of small non-negative integers, stored as a bitmap.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet {
    words: Vec<u64>,
}

/// Why a CPU list or mask could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cpu set {input:?}: {reason}")]
pub struct CpuSetError {
    pub input: String,
    pub reason: String,
}

fn err(input: &str, reason: impl Into<String>) -> CpuSetError {
    let mut input = input.to_string();
    if input.len() > 64 {
        let mut cut = 64;
        while !input.is_char_boundary(cut) {
            cut -= 1;
        }
        input.truncate(cut);
        input.push('…');
    }
    CpuSetError {
        input,
        reason: reason.into(),
    }
}

impl CpuSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// A set holding `0..n`.
    pub fn range(start: u32, end_exclusive: u32) -> Self {
        let mut s = Self::new();
        for i in start..end_exclusive {
            s.insert(i);
        }
        s
    }

    pub fn insert(&mut self, cpu: u32) {
        let w = (cpu / 64) as usize;
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1u64 << (cpu % 64);
    }

    pub fn remove(&mut self, cpu: u32) {
        let w = (cpu / 64) as usize;
        if let Some(word) = self.words.get_mut(w) {
            *word &= !(1u64 << (cpu % 64));
        }
        self.trim();
    }

    pub fn contains(&self, cpu: u32) -> bool {
        let w = (cpu / 64) as usize;
        self.words
            .get(w)
            .is_some_and(|word| word & (1u64 << (cpu % 64)) != 0)
    }

    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// Smallest member.
    pub fn first(&self) -> Option<u32> {
        self.iter().next()
    }

    /// Largest member.
    pub fn last(&self) -> Option<u32> {
        for (i, &w) in self.words.iter().enumerate().rev() {
            if w != 0 {
                return Some(i as u32 * 64 + 63 - w.leading_zeros());
            }
        }
        None
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let bit = w.trailing_zeros();
                w &= w - 1;
                Some(i as u32 * 64 + bit)
            })
        })
    }

    pub fn to_vec(&self) -> Vec<u32> {
        self.iter().collect()
    }

    pub fn union(&self, other: &CpuSet) -> CpuSet {
        let n = self.words.len().max(other.words.len());
        let mut words = vec![0u64; n];
        for (i, w) in words.iter_mut().enumerate() {
            *w = self.words.get(i).copied().unwrap_or(0) | other.words.get(i).copied().unwrap_or(0);
        }
        let mut s = CpuSet { words };
        s.trim();
        s
    }

    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let n = self.words.len().min(other.words.len());
        let mut s = CpuSet {
            words: (0..n).map(|i| self.words[i] & other.words[i]).collect(),
        };
        s.trim();
        s
    }

    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        let mut s = CpuSet {
            words: self
                .words
                .iter()
                .enumerate()
                .map(|(i, &w)| w & !other.words.get(i).copied().unwrap_or(0))
                .collect(),
        };
        s.trim();
        s
    }

    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.difference(other).is_empty()
    }

    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }

    /// Parse a Linux CPU list such as `0-3,8,10-11` (an empty string or a lone newline is the
    /// empty set, as sysfs writes it for CPU-less nodes).
    pub fn parse_list(input: &str) -> Result<Self, CpuSetError> {
        let mut set = CpuSet::new();
        let s = input.trim();
        if s.is_empty() {
            return Ok(set);
        }
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(err(input, "empty element"));
            }
            // `a-b:stride/group` is accepted by the kernel's bitmap_parselist; we support the
            // plain and ranged forms that sysfs and /proc print.
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (parse_num(input, a)?, parse_num(input, b)?),
                None => {
                    let n = parse_num(input, part)?;
                    (n, n)
                }
            };
            if lo > hi {
                return Err(err(input, format!("range {lo}-{hi} goes backwards")));
            }
            for cpu in lo..=hi {
                set.insert(cpu);
            }
        }
        Ok(set)
    }

    /// Parse a Linux hex mask (`smp_affinity`, `cpumap`): comma-separated 32-bit words, most
    /// significant first; leading zeros and an optional `0x` are accepted.
    pub fn parse_mask(input: &str) -> Result<Self, CpuSetError> {
        let s = input.trim();
        if s.is_empty() {
            return Err(err(input, "empty mask"));
        }
        let words: Vec<&str> = s.split(',').collect();
        let mut set = CpuSet::new();
        let nwords = words.len();
        for (i, word) in words.iter().enumerate() {
            let word = word.trim();
            let word = word
                .strip_prefix("0x")
                .or_else(|| word.strip_prefix("0X"))
                .unwrap_or(word);
            if word.is_empty() || word.len() > 8 {
                return Err(err(input, "each mask word must be 1 to 8 hex digits"));
            }
            let v = u32::from_str_radix(word, 16)
                .map_err(|_| err(input, format!("{word:?} is not hexadecimal")))?;
            let base = (nwords - 1 - i) as u64 * 32;
            for bit in 0..32u64 {
                if v & (1 << bit) != 0 {
                    let cpu = base + bit;
                    if cpu > MAX_CPU as u64 {
                        return Err(err(input, format!("cpu number above {MAX_CPU}")));
                    }
                    set.insert(cpu as u32);
                }
            }
        }
        Ok(set)
    }

    /// Parse an hwloc bitmap string (`0x0000ffff,0xffffffff`, `0x0`, `0xf...f`). An infinite
    /// bitmap (`0xf...f`, hwloc's "full") is returned as `Ok(None)`: the caller decides what it
    /// covers (usually every PU).
    ///
    /// hwloc writes all-zero 32-bit words as empty strings (`0xffffffff,,0xffffffff` is
    /// bits 0-31 and 64-95), which is accepted here (not in [`CpuSet::parse_mask`]).
    pub fn parse_hwloc(input: &str) -> Result<Option<Self>, CpuSetError> {
        let s = input.trim();
        if s == "0xf...f" {
            return Ok(None);
        }
        // infinite prefix followed by explicit words: keep the explicit part only
        let s = s.strip_prefix("0xf...f,").unwrap_or(s);
        if s.is_empty() {
            return Err(err(input, "empty bitmap"));
        }
        let nwords = s.split(',').count();
        let mut set = CpuSet::new();
        for (i, word) in s.split(',').enumerate() {
            let word = word.trim();
            let word = word
                .strip_prefix("0x")
                .or_else(|| word.strip_prefix("0X"))
                .unwrap_or(word);
            if word.is_empty() {
                // hwloc's abbreviation of a zero word
                continue;
            }
            if word.len() > 8 {
                return Err(err(input, "each bitmap word must be at most 8 hex digits"));
            }
            let v = u32::from_str_radix(word, 16)
                .map_err(|_| err(input, format!("{word:?} is not hexadecimal")))?;
            if v == 0 {
                continue;
            }
            let base = (nwords - 1 - i) as u64 * 32;
            let top = base + 31 - u64::from(v.leading_zeros());
            if top > u64::from(MAX_CPU) {
                return Err(err(input, format!("bit number above {MAX_CPU}")));
            }
            let w = (base / 64) as usize;
            if set.words.len() <= w {
                set.words.resize(w + 1, 0);
            }
            set.words[w] |= u64::from(v) << (base % 64);
        }
        Ok(Some(set))
    }

    /// The Linux list spelling, e.g. `0-3,8`.
    pub fn to_list_string(&self) -> String {
        let mut out = String::new();
        let mut iter = self.iter().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end += 1;
                iter.next();
            }
            if !out.is_empty() {
                out.push(',');
            }
            if start == end {
                out.push_str(&start.to_string());
            } else {
                out.push_str(&format!("{start}-{end}"));
            }
        }
        out
    }

    /// The Linux mask spelling (32-bit words, most significant first), e.g. `ff,ffffffff`.
    /// `min_words` pads with leading zero words, as the kernel prints for nr_cpu_ids.
    pub fn to_mask_string(&self, min_words: usize) -> String {
        let bits = self.last().map(|l| l as usize + 1).unwrap_or(1);
        let nwords = bits.div_ceil(32).max(min_words).max(1);
        let mut parts = Vec::with_capacity(nwords);
        for i in (0..nwords).rev() {
            let w64 = self.words.get(i / 2).copied().unwrap_or(0);
            let w32 = if i % 2 == 0 {
                w64 as u32
            } else {
                (w64 >> 32) as u32
            };
            parts.push(format!("{w32:08x}"));
        }
        parts.join(",")
    }
}

fn parse_num(input: &str, s: &str) -> Result<u32, CpuSetError> {
    let n: u32 = s
        .trim()
        .parse()
        .map_err(|_| err(input, format!("{:?} is not a cpu number", s.trim())))?;
    if n > MAX_CPU {
        return Err(err(input, format!("cpu number {n} above {MAX_CPU}")));
    }
    Ok(n)
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_list_string())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({})", self.to_list_string())
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut s = CpuSet::new();
        for c in iter {
            s.insert(c);
        }
        s
    }
}

impl std::str::FromStr for CpuSet {
    type Err = CpuSetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuSet::parse_list(s)
    }
}

/// Serialized as a sorted JSON array of numbers (what scripts want), read back from either an
/// array or a list string.
impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            List(Vec<u32>),
            Str(String),
        }
        match Repr::deserialize(deserializer)? {
            Repr::List(v) => {
                if let Some(bad) = v.iter().find(|&&c| c > MAX_CPU) {
                    return Err(serde::de::Error::custom(format!(
                        "cpu number {bad} above {MAX_CPU}"
                    )));
                }
                Ok(v.into_iter().collect())
            }
            Repr::Str(s) => CpuSet::parse_list(&s).map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_round_trip() {
        let s = CpuSet::parse_list("0-3,8,10-11\n").unwrap();
        assert_eq!(s.to_vec(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(s.to_list_string(), "0-3,8,10-11");
        assert_eq!(s.len(), 7);
        assert_eq!(s.first(), Some(0));
        assert_eq!(s.last(), Some(11));
        assert!(CpuSet::parse_list("").unwrap().is_empty());
        assert!(CpuSet::parse_list("\n").unwrap().is_empty());
    }

    #[test]
    fn list_errors() {
        assert!(CpuSet::parse_list("3-1").is_err());
        assert!(CpuSet::parse_list("a").is_err());
        assert!(CpuSet::parse_list("1,,2").is_err());
        assert!(CpuSet::parse_list("99999999").is_err());
    }

    #[test]
    fn masks() {
        let s = CpuSet::parse_mask("00000000,000000ff").unwrap();
        assert_eq!(s.to_list_string(), "0-7");
        let s = CpuSet::parse_mask("1,00000001").unwrap();
        assert_eq!(s.to_vec(), vec![0, 32]);
        assert_eq!(s.to_mask_string(0), "00000001,00000001");
        assert_eq!(
            CpuSet::parse_list("0-7").unwrap().to_mask_string(0),
            "000000ff"
        );
        assert_eq!(CpuSet::new().to_mask_string(0), "00000000");
        assert!(CpuSet::parse_mask("xyz").is_err());
        assert!(CpuSet::parse_mask("").is_err());
    }

    #[test]
    fn hwloc_bitmaps() {
        let s = CpuSet::parse_hwloc("0x0000ffff,0xffffffff")
            .unwrap()
            .unwrap();
        assert_eq!(s.to_list_string(), "0-47");
        assert_eq!(CpuSet::parse_hwloc("0xf...f").unwrap(), None);
        assert!(CpuSet::parse_hwloc("0x0").unwrap().unwrap().is_empty());
        // hwloc writes zero words as empty strings
        let s = CpuSet::parse_hwloc("0xffffffff,,0xffffffff")
            .unwrap()
            .unwrap();
        assert_eq!(s.to_list_string(), "0-31,64-95");
        let s = CpuSet::parse_hwloc("0x00000100,0x0").unwrap().unwrap();
        assert_eq!(s.to_vec(), vec![40]);
        let s = CpuSet::parse_hwloc("0x000000ff,,,,,,0x000000ff,0x0")
            .unwrap()
            .unwrap();
        assert_eq!(s.to_list_string(), "32-39,224-231");
        assert_eq!(
            CpuSet::parse_hwloc("0x00000001").unwrap().unwrap(),
            CpuSet::parse_mask("1").unwrap()
        );
        assert!(CpuSet::parse_hwloc("").is_err());
        assert!(CpuSet::parse_hwloc("0xzz").is_err());
        assert!(CpuSet::parse_hwloc("0x123456789").is_err());
        // a bit far above MAX_CPU is refused, zero words up there are not
        let far = format!("0x1{}", ",".repeat(40_000));
        assert!(CpuSet::parse_hwloc(&far).is_err());
        let zeros = format!("0x0{}", ",".repeat(40_000));
        assert!(CpuSet::parse_hwloc(&zeros).unwrap().unwrap().is_empty());
    }

    #[test]
    fn set_algebra() {
        let a = CpuSet::parse_list("0-7").unwrap();
        let b = CpuSet::parse_list("4-11").unwrap();
        assert_eq!(a.union(&b).to_list_string(), "0-11");
        assert_eq!(a.intersection(&b).to_list_string(), "4-7");
        assert_eq!(a.difference(&b).to_list_string(), "0-3");
        assert!(a.intersects(&b));
        assert!(!a.is_subset(&b));
        assert!(a.intersection(&b).is_subset(&a));
        let mut c = a.clone();
        c.remove(7);
        assert_eq!(c.last(), Some(6));
    }

    #[test]
    fn serde_forms() {
        let s: CpuSet = serde_json::from_str("[3,1,2]").unwrap();
        assert_eq!(s.to_list_string(), "1-3");
        let s: CpuSet = serde_json::from_str("\"0-2,5\"").unwrap();
        assert_eq!(serde_json::to_string(&s).unwrap(), "[0,1,2,5]");
    }
}
