//! The reader of the printer's text form ([`crate::printer`]): a function printed by
//! Tessera reads back into the same function, so IR can be written by hand in tests —
//! the verifier's filetests (`tests/filetests/`, Cranelift's habit) are functions in
//! text with the refusal each must get.
//!
//! The text does not carry everything a function holds, and the reader fills it in as
//! follows:
//!
//! - **a name is a variable**: every occurrence of a name in a function is one
//!   variable (a loop or `let` over a name already seen binds that same variable, so a
//!   nested rebinding reads as one); a name never bound is a fresh `int32` variable (a
//!   symbolic size in a parameter's shape, or a variable the verifier will find
//!   unbound);
//! - a loop variable takes its start's type, a `let` variable its value's;
//! - parameters are global buffers; an `allocate` declares a new buffer, which its
//!   name means inside the allocation (an output parameter and the intermediate that
//!   computes it often share a name) and, where the name meant nothing before, after it
//!   too (so that a use outside the allocation reads as one, for the verifier);
//! - a number with a `.` or an exponent and no suffix is `float64`, `f` and `h` mark
//!   `float32` and `float16`; an integer is `int32` unless cast as `(int64)5`;
//! - an intrinsic call has its first argument's type (`tir.if_then_else`: its second's).
//!
//! Lines starting with `//` are comments.

use crate::buffer::{Buffer, StorageScope};
use crate::dtype::DataType;
use crate::expr::{BinOp, CmpOp, Expr, Intrinsic, Var};
use crate::stmt::{ForKind, PrimFunc, Stmt, ThreadAxis};
use std::collections::HashMap;
use std::str::FromStr;

/// Text that does not read as a function: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Number(String),
    Punct(&'static str),
}

impl std::fmt::Display for Tok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tok::Ident(s) | Tok::Number(s) => write!(f, "`{s}`"),
            Tok::Punct(p) => write!(f, "`{p}`"),
        }
    }
}

/// Punctuation, longest first so that `<=` is not read as `<`.
const PUNCT: &[&str] = &[
    "==", "!=", "<=", ">=", "&&", "||", "(", ")", "[", "]", "{", "}", ",", ":", "=", "<", ">", "+",
    "-", "*", "/", "%", "!",
];

fn lex(text: &str) -> Result<Vec<(Tok, usize)>, ParseError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line_no = n + 1;
        let s = line.trim_start();
        if s.starts_with("//") {
            continue;
        }
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let c = b[i] as char;
            if c.is_whitespace() {
                i += 1;
            } else if c.is_ascii_alphabetic() || c == '_' {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.')
                {
                    i += 1;
                }
                out.push((Tok::Ident(line[start..i].to_string()), line_no));
            } else if c.is_ascii_digit() {
                let start = i;
                while i < b.len() {
                    let d = b[i];
                    let exponent_sign = (d == b'+' || d == b'-') && matches!(b[i - 1], b'e' | b'E');
                    if d.is_ascii_digit() || d == b'.' || d == b'e' || d == b'E' || exponent_sign {
                        i += 1;
                    } else {
                        break;
                    }
                }
                if i < b.len() && matches!(b[i], b'f' | b'h') {
                    i += 1;
                }
                out.push((Tok::Number(line[start..i].to_string()), line_no));
            } else if let Some(p) = PUNCT.iter().find(|p| line[i..].starts_with(**p)) {
                out.push((Tok::Punct(p), line_no));
                i += p.len();
            } else {
                return Err(ParseError {
                    line: line_no,
                    message: format!("unexpected character `{c}`"),
                });
            }
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    vars: HashMap<String, Var>,
    buffers: HashMap<String, Buffer>,
}

type R<T> = Result<T, ParseError>;

impl Parser {
    fn line(&self) -> usize {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map_or(1, |t| t.1)
    }

    fn err<T>(&self, message: impl Into<String>) -> R<T> {
        Err(ParseError {
            line: self.line(),
            message: message.into(),
        })
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }

    fn peek_at(&self, k: usize) -> Option<&Tok> {
        self.toks.get(self.pos + k).map(|t| &t.0)
    }

    fn next(&mut self) -> R<Tok> {
        match self.toks.get(self.pos) {
            Some((t, _)) => {
                self.pos += 1;
                Ok(t.clone())
            }
            None => self.err("unexpected end of text"),
        }
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Tok::Punct(q)) if *q == p)
    }

    fn is_ident(&self, name: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(s)) if s == name)
    }

    fn expect(&mut self, p: &str) -> R<()> {
        match self.next()? {
            Tok::Punct(q) if q == p => Ok(()),
            t => {
                self.pos -= 1;
                self.err(format!("expected `{p}`, found {t}"))
            }
        }
    }

    fn ident(&mut self) -> R<String> {
        match self.next()? {
            Tok::Ident(s) => Ok(s),
            t => {
                self.pos -= 1;
                self.err(format!("expected a name, found {t}"))
            }
        }
    }

    fn keyword(&mut self, word: &str) -> R<()> {
        if self.is_ident(word) {
            self.pos += 1;
            Ok(())
        } else {
            self.err(format!("expected `{word}`"))
        }
    }

    fn dtype(&mut self) -> R<DataType> {
        let name = self.ident()?;
        DataType::from_str(&name).or_else(|e| self.err(e.to_string()))
    }

    fn scope(&mut self) -> R<StorageScope> {
        let name = self.ident()?;
        match StorageScope::parse(&name) {
            Some(s) => Ok(s),
            None => self.err(format!("unknown storage scope `{name}`")),
        }
    }

    /// The variable of `name`: the one already seen, else a new one of `dtype`.
    fn var(&mut self, name: &str, dtype: DataType) -> Var {
        self.vars
            .entry(name.to_string())
            .or_insert_with(|| Var::new(name, dtype))
            .clone()
    }

    fn buffer(&self, name: &str) -> R<Buffer> {
        match self.buffers.get(name) {
            Some(b) => Ok(b.clone()),
            None => self.err(format!(
                "buffer `{name}` is neither a parameter nor allocated"
            )),
        }
    }

    fn list(&mut self, close: &str) -> R<Vec<Expr>> {
        let mut items = Vec::new();
        if self.is_punct(close) {
            self.pos += 1;
            return Ok(items);
        }
        loop {
            items.push(self.expr()?);
            if self.is_punct(",") {
                self.pos += 1;
            } else {
                self.expect(close)?;
                return Ok(items);
            }
        }
    }

    fn args(&mut self, name: &str, n: usize) -> R<Vec<Expr>> {
        let args = self.list(")")?;
        if args.len() != n {
            return self.err(format!("`{name}` takes {n} arguments, got {}", args.len()));
        }
        Ok(args)
    }

    fn number(&self, text: &str, negative: bool) -> R<Expr> {
        let (body, float) = match text.strip_suffix('f') {
            Some(b) => (b, Some(DataType::float32())),
            None => match text.strip_suffix('h') {
                Some(b) => (b, Some(DataType::float(16))),
                None if text.contains(['.', 'e', 'E']) => (text, Some(DataType::float64())),
                None => (text, None),
            },
        };
        let sign = if negative { -1.0 } else { 1.0 };
        match float {
            Some(dtype) => match body.parse::<f64>() {
                Ok(v) => Ok(Expr::float_of(dtype, sign * v)),
                Err(_) => self.err(format!("`{text}` is not a number")),
            },
            None => match body.parse::<i64>() {
                Ok(v) => Ok(Expr::int(if negative { -v } else { v })),
                Err(_) => self.err(format!("`{text}` is not an integer")),
            },
        }
    }

    fn expr(&mut self) -> R<Expr> {
        match self.next()? {
            Tok::Number(n) => self.number(&n, false),
            Tok::Punct("-") => match self.next()? {
                Tok::Number(n) => self.number(&n, true),
                Tok::Ident(w) if special_float(&w, true).is_some() => {
                    Ok(special_float(&w, true).expect("checked"))
                }
                t => self.err(format!("expected a number after `-`, found {t}")),
            },
            Tok::Punct("!") => Ok(Expr::not(self.expr()?)),
            Tok::Punct("(") => self.parenthesized(),
            Tok::Ident(name) => self.named(name),
            t => {
                self.pos -= 1;
                self.err(format!("expected an expression, found {t}"))
            }
        }
    }

    /// After `(`: a typed integer `(int64)5`, or a binary operation `(a + b)`.
    fn parenthesized(&mut self) -> R<Expr> {
        if let (Some(Tok::Ident(t)), Some(Tok::Punct(")"))) = (self.peek(), self.peek_at(1)) {
            if let Ok(dtype) = DataType::from_str(t) {
                self.pos += 2;
                let v = self.expr()?;
                return match v.as_int() {
                    Some(v) => Ok(Expr::int_of(dtype, v)),
                    None => self.err(format!("`({dtype})` must prefix an integer")),
                };
            }
        }
        let a = self.expr()?;
        let op = match self.next()? {
            Tok::Punct(p) => p,
            t => return self.err(format!("expected an operator, found {t}")),
        };
        let b = self.expr()?;
        self.expect(")")?;
        let bin = |o: BinOp| Ok(Expr::binary(o, a.clone(), b.clone()));
        let cmp = |o: CmpOp| Ok(Expr::cmp(o, a.clone(), b.clone()));
        match op {
            "+" => bin(BinOp::Add),
            "-" => bin(BinOp::Sub),
            "*" => bin(BinOp::Mul),
            "/" => bin(BinOp::Div),
            "%" => bin(BinOp::Mod),
            "==" => cmp(CmpOp::Eq),
            "!=" => cmp(CmpOp::Ne),
            "<" => cmp(CmpOp::Lt),
            "<=" => cmp(CmpOp::Le),
            ">" => cmp(CmpOp::Gt),
            ">=" => cmp(CmpOp::Ge),
            "&&" => Ok(Expr::and(a, b)),
            "||" => Ok(Expr::or(a, b)),
            other => self.err(format!("`{other}` is not a binary operator")),
        }
    }

    /// An expression that starts with a name: a call, a load or a variable.
    fn named(&mut self, name: String) -> R<Expr> {
        match name.as_str() {
            "True" => return Ok(Expr::bool(true)),
            "False" => return Ok(Expr::bool(false)),
            _ => {}
        }
        if let Some(v) = special_float(&name, false) {
            return Ok(v);
        }
        if self.is_punct("[") {
            self.pos += 1;
            let buffer = self.buffer(&name)?;
            let indices = self.list("]")?;
            return Ok(Expr::load(&buffer, indices));
        }
        if !self.is_punct("(") {
            return Ok(self.var(&name, DataType::int32()).to_expr());
        }
        self.pos += 1;
        let binary = match name.as_str() {
            "floordiv" => Some(BinOp::FloorDiv),
            "floormod" => Some(BinOp::FloorMod),
            "min" => Some(BinOp::Min),
            "max" => Some(BinOp::Max),
            _ => None,
        };
        if let Some(op) = binary {
            let a = self.args(&name, 2)?;
            return Ok(Expr::binary(op, a[0].clone(), a[1].clone()));
        }
        match name.as_str() {
            "select" => {
                let a = self.args(&name, 3)?;
                Ok(Expr::select(a[0].clone(), a[1].clone(), a[2].clone()))
            }
            "ramp" => {
                let a = self.args(&name, 3)?;
                let lanes = self.lanes(&a[2])?;
                Ok(Expr::ramp(a[0].clone(), a[1].clone(), lanes))
            }
            _ => self.call(name),
        }
    }

    fn lanes(&self, e: &Expr) -> R<u16> {
        match e.as_int().map(u16::try_from) {
            Some(Ok(l)) if l > 0 => Ok(l),
            _ => self.err(format!("lanes `{e}` must be a positive integer")),
        }
    }

    /// After `name(`: a broadcast `x4(v)`, an intrinsic `tir.exp(x)` or a cast
    /// `float32(x)`.
    fn call(&mut self, name: String) -> R<Expr> {
        if let Some(Ok(lanes)) = name.strip_prefix('x').map(u16::from_str) {
            let a = self.args(&name, 1)?;
            return Ok(Expr::broadcast(a[0].clone(), lanes));
        }
        if let Some(op) = Intrinsic::parse(&name) {
            let a = self.args(&name, op.arity())?;
            let dtype = match op {
                Intrinsic::IfThenElse => a[1].dtype(),
                _ => a[0].dtype(),
            };
            return Ok(Expr::call(dtype, op, a));
        }
        match DataType::from_str(&name) {
            Ok(dtype) => {
                let a = self.args(&name, 1)?;
                Ok(Expr::cast(dtype, a[0].clone()))
            }
            Err(_) => self.err(format!("unknown call `{name}`")),
        }
    }

    /// Statements up to the closing `}` (consumed).
    fn block(&mut self) -> R<Stmt> {
        self.expect("{")?;
        let mut stmts = Vec::new();
        while !self.is_punct("}") {
            stmts.push(self.stmt()?);
        }
        self.pos += 1;
        Ok(Stmt::seq(stmts))
    }

    fn stmt(&mut self) -> R<Stmt> {
        let word = match self.peek() {
            Some(Tok::Ident(w)) => w.clone(),
            _ => return Ok(Stmt::evaluate(self.expr()?)),
        };
        match word.as_str() {
            "for" => self.for_loop(),
            "allocate" => {
                self.pos += 1;
                let name = self.ident()?;
                self.expect(":")?;
                let dtype = self.dtype()?;
                self.expect("[")?;
                let shape = self.list("]")?;
                self.expect(",")?;
                let scope = self.scope()?;
                let buffer = Buffer::new(name.clone(), dtype, shape, scope);
                let outer = self.buffers.insert(name.clone(), buffer.clone());
                let body = self.block()?;
                if let Some(outer) = outer {
                    self.buffers.insert(name, outer);
                }
                Ok(Stmt::allocate(buffer, body))
            }
            "if" => {
                self.pos += 1;
                self.expect("(")?;
                let cond = self.expr()?;
                self.expect(")")?;
                let then_case = self.block()?;
                if self.is_ident("else") {
                    self.pos += 1;
                    Ok(Stmt::if_then_else(cond, then_case, self.block()?))
                } else {
                    Ok(Stmt::if_then(cond, then_case))
                }
            }
            "attr" => {
                self.pos += 1;
                self.expect("[")?;
                let key = self.ident()?;
                self.expect("]")?;
                self.expect("=")?;
                let value = self.expr()?;
                Ok(Stmt::attr(key, value, self.block()?))
            }
            "let" => {
                self.pos += 1;
                let name = self.ident()?;
                self.expect("=")?;
                let value = self.expr()?;
                let var = self.var(&name, value.dtype());
                Ok(Stmt::let_stmt(var, value, self.block()?))
            }
            "sync" if matches!(self.peek_at(1), Some(Tok::Punct("("))) => {
                self.pos += 2;
                let scope = self.scope()?;
                self.expect(")")?;
                Ok(Stmt::storage_sync(scope))
            }
            _ => self.store_or_evaluate(),
        }
    }

    fn for_loop(&mut self) -> R<Stmt> {
        self.keyword("for")?;
        self.expect("(")?;
        let name = self.ident()?;
        self.expect(",")?;
        let min = self.expr()?;
        self.expect(",")?;
        let extent = self.expr()?;
        self.expect(")")?;
        let var = self.var(&name, min.dtype());
        let word = match self.peek() {
            Some(Tok::Ident(w)) => w.clone(),
            _ => String::new(),
        };
        let kind = match word.as_str() {
            "parallel" => ForKind::Parallel,
            "vectorized" => ForKind::Vectorized,
            "unrolled" => ForKind::Unrolled,
            "bind" => {
                self.pos += 1;
                self.expect("(")?;
                let axis = self.ident()?;
                let Some(axis) = ThreadAxis::parse(&axis) else {
                    return self.err(format!("unknown thread axis `{axis}`"));
                };
                self.expect(")")?;
                ForKind::ThreadBinding(axis)
            }
            _ => ForKind::Serial,
        };
        if matches!(word.as_str(), "parallel" | "vectorized" | "unrolled") {
            self.pos += 1;
        }
        Ok(Stmt::for_loop(var, min, extent, kind, self.block()?))
    }

    /// `A[i] = v`, or an expression evaluated for its effect.
    fn store_or_evaluate(&mut self) -> R<Stmt> {
        let start = self.pos;
        let name = self.ident()?;
        if self.is_punct("[") {
            self.pos += 1;
            let indices = self.list("]")?;
            if self.is_punct("=") {
                self.pos += 1;
                let buffer = self.buffer(&name)?;
                let value = self.expr()?;
                return Ok(Stmt::store(&buffer, indices, value));
            }
        }
        self.pos = start;
        Ok(Stmt::evaluate(self.expr()?))
    }

    fn func(&mut self) -> R<PrimFunc> {
        self.keyword("func")?;
        let name = self.ident()?;
        self.expect("(")?;
        let mut params = Vec::new();
        while !self.is_punct(")") {
            if !params.is_empty() {
                self.expect(",")?;
            }
            let pname = self.ident()?;
            self.expect(":")?;
            let dtype = self.dtype()?;
            self.expect("[")?;
            let shape = self.list("]")?;
            let b = Buffer::new(pname.clone(), dtype, shape, StorageScope::Global);
            if self.buffers.insert(pname.clone(), b.clone()).is_some() {
                return self.err(format!("parameter `{pname}` is declared twice"));
            }
            params.push(b);
        }
        self.pos += 1;
        let body = self.block()?;
        if let Some((t, _)) = self.toks.get(self.pos) {
            return self.err(format!("text after the function: {t}"));
        }
        Ok(PrimFunc::new(name, params, body))
    }
}

/// `inf` and `nan` as the printer writes them (`format_g`, with the type's suffix).
fn special_float(word: &str, negative: bool) -> Option<Expr> {
    let (v, dtype) = match word {
        "inf" => (f64::INFINITY, DataType::float64()),
        "nan" => (f64::NAN, DataType::float64()),
        "inff" => (f64::INFINITY, DataType::float32()),
        "nanf" => (f64::NAN, DataType::float32()),
        "infh" => (f64::INFINITY, DataType::float(16)),
        "nanh" => (f64::NAN, DataType::float(16)),
        _ => return None,
    };
    Some(Expr::float_of(dtype, if negative { -v } else { v }))
}

/// Reads a function in the printer's text form.
pub fn parse_func(text: &str) -> Result<PrimFunc, ParseError> {
    let mut p = Parser {
        toks: lex(text)?,
        pos: 0,
        vars: HashMap::new(),
        buffers: HashMap::new(),
    };
    p.func()
}

impl FromStr for PrimFunc {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_func(s)
    }
}
