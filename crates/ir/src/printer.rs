//! The printer: expressions as TVM prints them (`(a + b)`, `floordiv(a, b)`, `0f`,
//! `tir.exp(x)`), statements as an indented, brace-delimited loop program in which each
//! name is one variable or buffer (a second of the same name gets a suffix, `i_1`), so
//! that [`crate::parser`] reads a printed function back.

use crate::buffer::Buffer;
use crate::dtype::{DataType, TypeCode};
use crate::expr::{BinOp, Expr, ExprNode, Var};
use crate::stmt::{ForKind, PrimFunc, Stmt, StmtNode};
use std::collections::{HashMap, HashSet};
use std::fmt::{self, Display, Formatter, Write};

/// Formats a float the way C++ streams do by default (`%g`, six significant digits).
pub fn format_g(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    const P: i32 = 6;
    let sci = format!("{:.*e}", (P - 1) as usize, v);
    let (mant, exp) = sci.split_once('e').unwrap();
    let x: i32 = exp.parse().unwrap();
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if (-4..P).contains(&x) {
        trim(&format!("{:.*}", (P - 1 - x) as usize, v))
    } else {
        let sign = if x < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", trim(mant), sign, x.abs())
    }
}

/// The names a function prints with: each variable and buffer keeps its own name, and
/// a second one that carries a name already printed for another gets a suffix (`i_1`),
/// so that a name in the text is one variable or buffer (what [`crate::parser`] reads).
/// Names are given in print order; an expression printed alone keeps its names as they
/// are.
#[derive(Default)]
struct Names {
    unique: bool,
    given: HashMap<u64, String>,
    /// Names given, by namespace (variables, buffers).
    taken: HashSet<(bool, String)>,
}

impl Names {
    fn unique() -> Names {
        Names {
            unique: true,
            ..Names::default()
        }
    }

    /// The printed name of the variable or buffer handle `id` called `name`.
    fn of(&mut self, buffer: bool, id: u64, name: &str) -> String {
        if !self.unique {
            return name.to_string();
        }
        if let Some(n) = self.given.get(&id) {
            return n.clone();
        }
        let mut n = name.to_string();
        let mut k = 0;
        while self.taken.contains(&(buffer, n.clone())) {
            k += 1;
            n = format!("{name}_{k}");
        }
        self.taken.insert((buffer, n.clone()));
        self.given.insert(id, n.clone());
        n
    }

    fn var(&mut self, v: &Var) -> String {
        self.of(false, v.id(), v.name())
    }

    fn buffer(&mut self, b: &Buffer) -> String {
        self.of(true, b.data().id(), b.name())
    }
}

fn list(items: &[Expr], names: &mut Names) -> String {
    let parts: Vec<String> = items.iter().map(|e| expr(e, names)).collect();
    parts.join(", ")
}

/// `e` as text, its names from `names`.
fn expr(e: &Expr, names: &mut Names) -> String {
    let mut two = |a: &Expr, b: &Expr| (expr(a, names), expr(b, names));
    match e.node() {
        ExprNode::Var(v) => names.var(v),
        ExprNode::IntImm { dtype, value } => match dtype.code {
            TypeCode::Bool => (if *value != 0 { "True" } else { "False" }).into(),
            _ if *dtype == DataType::int32() => format!("{value}"),
            _ => format!("({dtype}){value}"),
        },
        ExprNode::FloatImm { dtype, value } => {
            let suffix = match dtype.bits {
                32 => "f",
                16 => "h",
                _ => "",
            };
            format!("{}{}", format_g(*value), suffix)
        }
        ExprNode::Binary { op, a, b } => {
            let (a, b) = two(a, b);
            match op {
                BinOp::Add => format!("({a} + {b})"),
                BinOp::Sub => format!("({a} - {b})"),
                BinOp::Mul => format!("({a}*{b})"),
                BinOp::Div => format!("({a} / {b})"),
                BinOp::Mod => format!("({a} % {b})"),
                BinOp::FloorDiv => format!("floordiv({a}, {b})"),
                BinOp::FloorMod => format!("floormod({a}, {b})"),
                BinOp::Min => format!("min({a}, {b})"),
                BinOp::Max => format!("max({a}, {b})"),
            }
        }
        ExprNode::Cmp { op, a, b } => {
            let (a, b) = two(a, b);
            format!("({a} {} {b})", op.symbol())
        }
        ExprNode::And(a, b) => {
            let (a, b) = two(a, b);
            format!("({a} && {b})")
        }
        ExprNode::Or(a, b) => {
            let (a, b) = two(a, b);
            format!("({a} || {b})")
        }
        ExprNode::Not(a) => format!("!{}", expr(a, names)),
        ExprNode::Select {
            cond,
            then_value,
            else_value,
        } => format!(
            "select({}, {}, {})",
            expr(cond, names),
            expr(then_value, names),
            expr(else_value, names)
        ),
        ExprNode::Cast { dtype, value } => format!("{dtype}({})", expr(value, names)),
        ExprNode::Load { buffer, indices } => {
            let b = names.buffer(buffer);
            format!("{b}[{}]", list(indices, names))
        }
        ExprNode::Ramp {
            base,
            stride,
            lanes,
        } => {
            let (base, stride) = two(base, stride);
            format!("ramp({base}, {stride}, {lanes})")
        }
        ExprNode::Broadcast { value, lanes } => format!("x{lanes}({})", expr(value, names)),
        ExprNode::Call { op, args, .. } => format!("{}({})", op.name(), list(args, names)),
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(&expr(self, &mut Names::default()))
    }
}

fn buffer_decl(b: &Buffer, names: &mut Names) -> String {
    let name = names.buffer(b);
    format!("{name}: {}[{}]", b.dtype(), list(b.shape(), names))
}

struct StmtPrinter {
    out: String,
    indent: usize,
    names: Names,
}

impl StmtPrinter {
    fn line(&mut self, text: &str) {
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn block(&mut self, head: &str, body: &Stmt) {
        self.line(&format!("{head} {{"));
        self.indent += 1;
        self.print(body);
        self.indent -= 1;
        self.line("}");
    }

    fn expr(&mut self, e: &Expr) -> String {
        expr(e, &mut self.names)
    }

    fn print(&mut self, s: &Stmt) {
        match s.node() {
            StmtNode::For {
                var,
                min,
                extent,
                kind,
                body,
            } => {
                let kind = match kind {
                    ForKind::Serial => String::new(),
                    ForKind::Parallel => " parallel".into(),
                    ForKind::Vectorized => " vectorized".into(),
                    ForKind::Unrolled => " unrolled".into(),
                    ForKind::ThreadBinding(t) => format!(" bind({t})"),
                };
                let v = self.names.var(var);
                let (min, extent) = (self.expr(min), self.expr(extent));
                self.block(&format!("for ({v}, {min}, {extent}){kind}"), body)
            }
            StmtNode::Store {
                buffer,
                indices,
                value,
            } => {
                let b = self.names.buffer(buffer);
                let idx = list(indices, &mut self.names);
                let value = self.expr(value);
                self.line(&format!("{b}[{idx}] = {value}"))
            }
            StmtNode::Allocate { buffer, body } => {
                let decl = buffer_decl(buffer, &mut self.names);
                self.block(&format!("allocate {decl}, {}", buffer.scope()), body)
            }
            StmtNode::IfThenElse {
                cond,
                then_case,
                else_case,
            } => {
                let cond = self.expr(cond);
                self.line(&format!("if ({cond}) {{"));
                self.indent += 1;
                self.print(then_case);
                self.indent -= 1;
                if let Some(e) = else_case {
                    self.line("} else {");
                    self.indent += 1;
                    self.print(e);
                    self.indent -= 1;
                }
                self.line("}");
            }
            StmtNode::Seq(stmts) => stmts.iter().for_each(|x| self.print(x)),
            StmtNode::Attr { key, value, body } => {
                let value = self.expr(value);
                self.block(&format!("attr [{key}] = {value}"), body)
            }
            StmtNode::Let { var, value, body } => {
                let v = self.names.var(var);
                let value = self.expr(value);
                self.block(&format!("let {v} = {value}"), body)
            }
            StmtNode::Evaluate(e) => {
                let e = self.expr(e);
                self.line(&e)
            }
            StmtNode::StorageSync(scope) => self.line(&format!("sync({scope})")),
        }
    }
}

impl Display for Stmt {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let mut p = StmtPrinter {
            out: String::new(),
            indent: 0,
            names: Names::unique(),
        };
        p.print(self);
        f.write_str(&p.out)
    }
}

impl Display for PrimFunc {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let mut names = Names::unique();
        let params: Vec<String> = self
            .params
            .iter()
            .map(|b| buffer_decl(b, &mut names))
            .collect();
        writeln!(f, "func {}({}) {{", self.name, params.join(", "))?;
        let mut p = StmtPrinter {
            out: String::new(),
            indent: 1,
            names,
        };
        p.print(&self.body);
        f.write_str(&p.out)?;
        f.write_char('}')?;
        f.write_char('\n')
    }
}

#[cfg(test)]
mod tests {
    use super::format_g;

    #[test]
    fn floats_print_like_cpp_streams() {
        assert_eq!(format_g(0.0), "0");
        assert_eq!(format_g(1.5), "1.5");
        assert_eq!(format_g(-3.4028234663852886e38), "-3.40282e+38");
        assert_eq!(format_g(0.0001), "0.0001");
        assert_eq!(format_g(0.00001), "1e-05");
        assert_eq!(format_g(123456.0), "123456");
        assert_eq!(format_g(1234567.0), "1.23457e+06");
        assert_eq!(format_g(0.1), "0.1");
    }
}
