//! Any program that prints its results as lines `name value unit`:
//!
//! ```text
//! fp16_matmul 187.3 TFLOP/s
//! h2d_copy: 24.6 GB/s
//! ```
//!
//! A line is read when it has exactly three words: a name starting with a letter or `_` (a
//! trailing `:` is dropped), a finite number, and a unit that is not a number. Every other
//! line is ignored.

use super::{number, Measure, ReadError, Tool};

/// The benchmark name of every measure.
pub const BENCHMARK: &str = "generic";

/// The measure a `name value unit` line gives, if it is one.
pub fn line(line: &str) -> Option<Measure> {
    let mut words = line.split_whitespace();
    let (name, value, unit) = (words.next()?, words.next()?, words.next()?);
    if words.next().is_some() {
        return None;
    }
    let name = name.strip_suffix(':').unwrap_or(name);
    let first = name.chars().next()?;
    if !(first.is_alphabetic() || first == '_') || number(unit).is_some() {
        return None;
    }
    Some(Measure::new(BENCHMARK, name, number(value)?, unit))
}

/// Reads every `name value unit` line of `text`: metric = the name, value and unit as
/// written.
pub fn read(text: &str) -> Result<Vec<Measure>, ReadError> {
    let out: Vec<Measure> = text.lines().filter_map(line).collect();
    if out.is_empty() {
        return Err(ReadError::missing(Tool::Generic, "`name value unit` lines"));
    }
    Ok(out)
}
