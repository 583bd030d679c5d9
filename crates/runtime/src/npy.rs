//! The NumPy `.npy` format (<https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html>).
//!
//! Written: version 1.0 (2.0 for a header too long for 1.0), little-endian, C order, the header padded with spaces and a
//! newline so that the data starts at a multiple of 64 bytes, like NumPy's own writer
//! (including its spare space after the dict for growing the first axis in place).
//! Read: versions 1.0, 2.0 and 3.0, either byte order, C order only. Every malformed
//! input is an [`NpyError`]; nothing is allocated before the data size is checked
//! against the bytes actually present.

use crate::error::NpyError;
use crate::ndarray::{Kind, NDArray};
use tessera_ir::DataType;

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// NumPy aligns the start of the data to this many bytes.
const ARRAY_ALIGN: usize = 64;
/// NumPy leaves room for the growth axis to have this many digits.
const GROWTH_AXIS_MAX_DIGITS: usize = 21;

/// The descriptor's type part (without the byte-order character) and element size.
fn type_str(kind: Kind) -> &'static str {
    match kind {
        Kind::Bool => "b1",
        Kind::I8 => "i1",
        Kind::I16 => "i2",
        Kind::I32 => "i4",
        Kind::I64 => "i8",
        Kind::U8 => "u1",
        Kind::U16 => "u2",
        Kind::U32 => "u4",
        Kind::U64 => "u8",
        Kind::F16 => "f2",
        Kind::F32 => "f4",
        Kind::F64 => "f8",
    }
}

fn dtype_of(type_part: &str) -> Option<DataType> {
    Some(match type_part {
        "b1" => DataType::bool(),
        "i1" => DataType::int(8),
        "i2" => DataType::int(16),
        "i4" => DataType::int(32),
        "i8" => DataType::int(64),
        "u1" => DataType::uint(8),
        "u2" => DataType::uint(16),
        "u4" => DataType::uint(32),
        "u8" => DataType::uint(64),
        "f2" => DataType::float(16),
        "f4" => DataType::float(32),
        "f8" => DataType::float(64),
        _ => return None,
    })
}

/// NumPy's `repr` of a shape tuple: `()`, `(3,)`, `(2, 3)`.
fn shape_repr(shape: &[usize]) -> String {
    match shape {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        _ => {
            let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            format!("({})", parts.join(", "))
        }
    }
}

pub(crate) fn encode(a: &NDArray) -> Vec<u8> {
    let size = a.dtype().bytes();
    let order = if size == 1 { '|' } else { '<' };
    let mut header = format!(
        "{{'descr': '{order}{}', 'fortran_order': False, 'shape': {}, }}",
        type_str(a.kind()),
        shape_repr(a.shape())
    );
    if let Some(first) = a.shape().first() {
        let digits = first.to_string().len();
        header.push_str(&" ".repeat(GROWTH_AXIS_MAX_DIGITS.saturating_sub(digits)));
    }
    // magic (6) + version (2) + header length (2, or 4 from version 2.0) + header +
    // '\n', padded to 64. Version 1.0 unless the header outgrows its 16-bit length,
    // as NumPy does.
    let hlen = header.len() + 1;
    let pad = |prefix: usize| ARRAY_ALIGN - ((prefix + hlen) % ARRAY_ALIGN);
    let mut out = Vec::with_capacity(12 + hlen + ARRAY_ALIGN + a.nbytes());
    out.extend_from_slice(MAGIC);
    let padlen = if hlen + pad(10) <= u16::MAX as usize {
        let padlen = pad(10);
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&((hlen + padlen) as u16).to_le_bytes());
        padlen
    } else {
        let padlen = pad(12);
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&((hlen + padlen) as u32).to_le_bytes());
        padlen
    };
    out.extend_from_slice(header.as_bytes());
    out.resize(out.len() + padlen, b' ');
    out.push(b'\n');
    let start = out.len();
    out.extend_from_slice(a.as_bytes());
    if cfg!(target_endian = "big") {
        swap_elements(&mut out[start..], size);
    }
    out
}

fn swap_elements(bytes: &mut [u8], size: usize) {
    if size > 1 {
        for e in bytes.chunks_exact_mut(size) {
            e.reverse();
        }
    }
}

pub(crate) fn decode(bytes: &[u8]) -> Result<NDArray, NpyError> {
    if bytes.len() < MAGIC.len() + 2 || &bytes[..MAGIC.len()] != MAGIC {
        return Err(NpyError::BadMagic);
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (len_size, utf8) = match (major, minor) {
        (1, 0) => (2, false),
        (2, 0) => (4, false),
        (3, 0) => (4, true),
        _ => return Err(NpyError::UnsupportedVersion { major, minor }),
    };
    let len_end = 8 + len_size;
    let len_bytes = bytes.get(8..len_end).ok_or(NpyError::TruncatedHeader)?;
    let header_len = len_bytes
        .iter()
        .rev()
        .fold(0usize, |acc, &b| (acc << 8) | b as usize);
    let header_end = len_end
        .checked_add(header_len)
        .ok_or(NpyError::TruncatedHeader)?;
    let header_bytes = bytes
        .get(len_end..header_end)
        .ok_or(NpyError::TruncatedHeader)?;
    let header: String = if utf8 {
        std::str::from_utf8(header_bytes)
            .map_err(|_| NpyError::BadHeader("header is not UTF-8".into()))?
            .to_string()
    } else {
        // Latin-1: every byte is the code point of the same value.
        header_bytes.iter().map(|&b| b as char).collect()
    };
    let h = parse_header(&header)?;
    if h.fortran_order {
        return Err(NpyError::FortranOrder);
    }
    let (dtype, swap) = parse_descr(&h.descr)?;
    let size = dtype.bytes();
    let too_large = || NpyError::TooLarge(h.shape.clone());
    let mut shape = Vec::with_capacity(h.shape.len());
    for &d in &h.shape {
        shape.push(usize::try_from(d).map_err(|_| too_large())?);
    }
    let expected = shape
        .iter()
        .try_fold(size, |acc, &d| acc.checked_mul(d))
        .ok_or_else(too_large)?;
    let data = &bytes[header_end..];
    if data.len() != expected {
        return Err(NpyError::DataSize {
            expected,
            got: data.len(),
        });
    }
    if dtype.is_bool() {
        if let Some((index, &byte)) = data.iter().enumerate().find(|(_, b)| **b > 1) {
            return Err(NpyError::InvalidBool { index, byte });
        }
    }
    let mut a = NDArray::zeros(dtype, &shape).map_err(|_| too_large())?;
    let out = a.as_bytes_mut();
    out.copy_from_slice(data);
    if swap {
        swap_elements(out, size);
    }
    Ok(a)
}

/// The data type a descriptor names and whether its byte order is not the host's.
fn parse_descr(descr: &str) -> Result<(DataType, bool), NpyError> {
    let unsupported = || NpyError::UnsupportedDescr(descr.to_string());
    let mut chars = descr.chars();
    let order = chars.next().ok_or_else(unsupported)?;
    let dtype = dtype_of(chars.as_str()).ok_or_else(unsupported)?;
    let little = cfg!(target_endian = "little");
    let swap = match order {
        '|' if dtype.bytes() == 1 => false,
        '<' | '>' | '=' if dtype.bytes() == 1 => false,
        '<' => !little,
        '>' => little,
        '=' => false,
        _ => return Err(unsupported()),
    };
    Ok((dtype, swap))
}

struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<u64>,
}

#[derive(Debug)]
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<u64>),
    /// Anything else (a list, as in a structured dtype's descriptor), as its text.
    Other(String),
}

/// Parses the header's Python dict literal: `{'descr': '<f4', 'fortran_order': False,
/// 'shape': (2, 3), }`.
fn parse_header(text: &str) -> Result<Header, NpyError> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    p.ws();
    p.expect(b'{')?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        p.ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.ws();
        p.expect(b':')?;
        p.ws();
        let value = p.value()?;
        let bad = |what: &str| NpyError::BadHeader(format!("`{key}` is not {what}"));
        match key.as_str() {
            "descr" => {
                descr = Some(match value {
                    Value::Str(s) => s,
                    Value::Other(s) => return Err(NpyError::UnsupportedDescr(s)),
                    _ => return Err(bad("a string")),
                })
            }
            "fortran_order" => match value {
                Value::Bool(b) => fortran = Some(b),
                _ => return Err(bad("a bool")),
            },
            "shape" => match value {
                Value::Tuple(t) => shape = Some(t),
                _ => return Err(bad("a tuple of integers")),
            },
            _ => return Err(NpyError::BadHeader(format!("unexpected key `{key}`"))),
        }
        p.ws();
        if !p.eat(b',') {
            p.ws();
            p.expect(b'}')?;
            break;
        }
    }
    p.ws();
    if p.i != p.s.len() {
        return Err(NpyError::BadHeader("text after the dict".into()));
    }
    let missing = |k: &str| NpyError::BadHeader(format!("missing key `{k}`"));
    Ok(Header {
        descr: descr.ok_or_else(|| missing("descr"))?,
        fortran_order: fortran.ok_or_else(|| missing("fortran_order"))?,
        shape: shape.ok_or_else(|| missing("shape"))?,
    })
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn err(&self, what: &str) -> NpyError {
        NpyError::BadHeader(format!("{what} at offset {}", self.i))
    }
    fn expect(&mut self, c: u8) -> Result<(), NpyError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.err(&format!("expected `{}`", c as char)))
        }
    }
    fn string(&mut self) -> Result<String, NpyError> {
        let q = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => return Err(self.err("expected a string")),
        };
        self.i += 1;
        let start = self.i;
        while let Some(c) = self.peek() {
            if c == b'\\' {
                return Err(self.err("escape sequences are not supported"));
            }
            if c == q {
                let s = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                self.i += 1;
                return Ok(s);
            }
            self.i += 1;
        }
        Err(self.err("unterminated string"))
    }
    fn word(&mut self, w: &str) -> bool {
        if self.s[self.i..].starts_with(w.as_bytes()) {
            self.i += w.len();
            true
        } else {
            false
        }
    }
    fn value(&mut self) -> Result<Value, NpyError> {
        match self.peek() {
            Some(b'\'' | b'"') => Ok(Value::Str(self.string()?)),
            Some(b'(') => self.tuple(),
            Some(b'[') => self.other(),
            _ if self.word("True") => Ok(Value::Bool(true)),
            _ if self.word("False") => Ok(Value::Bool(false)),
            _ => Err(self.err("expected a value")),
        }
    }
    fn tuple(&mut self) -> Result<Value, NpyError> {
        self.expect(b'(')?;
        let mut items = Vec::new();
        loop {
            self.ws();
            if self.eat(b')') {
                break;
            }
            items.push(self.uint()?);
            self.ws();
            if !self.eat(b',') {
                self.ws();
                self.expect(b')')?;
                break;
            }
        }
        // `(3)` is an integer in Python, not a tuple; NumPy writes `(3,)`.
        Ok(Value::Tuple(items))
    }
    fn uint(&mut self) -> Result<u64, NpyError> {
        let start = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        if start == self.i {
            return Err(self.err("expected a non-negative integer"));
        }
        let digits = std::str::from_utf8(&self.s[start..self.i]).expect("ASCII digits");
        let v = digits
            .parse::<u64>()
            .map_err(|_| NpyError::BadHeader(format!("dimension {digits} is too large")))?;
        // Python 2 wrote longs with an `L` suffix.
        self.eat(b'L');
        Ok(v)
    }
    /// Skips a bracketed value (brackets matched, strings respected), keeping its text.
    fn other(&mut self) -> Result<Value, NpyError> {
        let start = self.i;
        let mut open = Vec::new();
        while let Some(c) = self.peek() {
            match c {
                b'\'' | b'"' => {
                    self.string()?;
                    continue;
                }
                b'[' => open.push(b']'),
                b'(' => open.push(b')'),
                b'{' => open.push(b'}'),
                b']' | b')' | b'}' => {
                    if open.pop() != Some(c) {
                        return Err(self.err("mismatched brackets"));
                    }
                    if open.is_empty() {
                        self.i += 1;
                        let s = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                        return Ok(Value::Other(s));
                    }
                }
                _ => {}
            }
            self.i += 1;
        }
        Err(self.err("unbalanced brackets"))
    }
}
