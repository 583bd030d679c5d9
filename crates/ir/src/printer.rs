//! The printer: expressions as TVM prints them (`(a + b)`, `floordiv(a, b)`, `0f`,
//! `tir.exp(x)`), statements as an indented, brace-delimited loop program.

use crate::buffer::Buffer;
use crate::dtype::{DataType, TypeCode};
use crate::expr::{BinOp, Expr, ExprNode};
use crate::stmt::{ForKind, PrimFunc, Stmt, StmtNode};
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

fn write_list(f: &mut Formatter<'_>, items: &[Expr]) -> fmt::Result {
    for (i, e) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{e}")?;
    }
    Ok(())
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.node() {
            ExprNode::Var(v) => f.write_str(v.name()),
            ExprNode::IntImm { dtype, value } => match dtype.code {
                TypeCode::Bool => f.write_str(if *value != 0 { "True" } else { "False" }),
                _ if *dtype == DataType::int32() => write!(f, "{value}"),
                _ => write!(f, "({dtype}){value}"),
            },
            ExprNode::FloatImm { dtype, value } => {
                let suffix = match dtype.bits {
                    32 => "f",
                    16 => "h",
                    _ => "",
                };
                write!(f, "{}{}", format_g(*value), suffix)
            }
            ExprNode::Binary { op, a, b } => match op {
                BinOp::Add => write!(f, "({a} + {b})"),
                BinOp::Sub => write!(f, "({a} - {b})"),
                BinOp::Mul => write!(f, "({a}*{b})"),
                BinOp::Div => write!(f, "({a} / {b})"),
                BinOp::Mod => write!(f, "({a} % {b})"),
                BinOp::FloorDiv => write!(f, "floordiv({a}, {b})"),
                BinOp::FloorMod => write!(f, "floormod({a}, {b})"),
                BinOp::Min => write!(f, "min({a}, {b})"),
                BinOp::Max => write!(f, "max({a}, {b})"),
            },
            ExprNode::Cmp { op, a, b } => write!(f, "({a} {} {b})", op.symbol()),
            ExprNode::And(a, b) => write!(f, "({a} && {b})"),
            ExprNode::Or(a, b) => write!(f, "({a} || {b})"),
            ExprNode::Not(a) => write!(f, "!{a}"),
            ExprNode::Select {
                cond,
                then_value,
                else_value,
            } => {
                write!(f, "select({cond}, {then_value}, {else_value})")
            }
            ExprNode::Cast { dtype, value } => write!(f, "{dtype}({value})"),
            ExprNode::Load { buffer, indices } => {
                write!(f, "{}[", buffer.name())?;
                write_list(f, indices)?;
                f.write_str("]")
            }
            ExprNode::Ramp {
                base,
                stride,
                lanes,
            } => write!(f, "ramp({base}, {stride}, {lanes})"),
            ExprNode::Broadcast { value, lanes } => write!(f, "x{lanes}({value})"),
            ExprNode::Call { op, args, .. } => {
                write!(f, "{}(", op.name())?;
                write_list(f, args)?;
                f.write_str(")")
            }
        }
    }
}

fn buffer_decl(b: &Buffer) -> String {
    let shape: Vec<String> = b.shape().iter().map(|d| d.to_string()).collect();
    format!("{}: {}[{}]", b.name(), b.dtype(), shape.join(", "))
}

struct StmtPrinter {
    out: String,
    indent: usize,
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
                self.block(&format!("for ({var}, {min}, {extent}){kind}"), body)
            }
            StmtNode::Store {
                buffer,
                indices,
                value,
            } => {
                let idx: Vec<String> = indices.iter().map(|i| i.to_string()).collect();
                self.line(&format!("{}[{}] = {value}", buffer.name(), idx.join(", ")))
            }
            StmtNode::Allocate { buffer, body } => self.block(
                &format!("allocate {}, {}", buffer_decl(buffer), buffer.scope()),
                body,
            ),
            StmtNode::IfThenElse {
                cond,
                then_case,
                else_case,
            } => {
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
                self.block(&format!("attr [{key}] = {value}"), body)
            }
            StmtNode::Let { var, value, body } => self.block(&format!("let {var} = {value}"), body),
            StmtNode::Evaluate(e) => self.line(&e.to_string()),
            StmtNode::StorageSync(scope) => self.line(&format!("sync({scope})")),
        }
    }
}

impl Display for Stmt {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let mut p = StmtPrinter {
            out: String::new(),
            indent: 0,
        };
        p.print(self);
        f.write_str(&p.out)
    }
}

impl Display for PrimFunc {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let params: Vec<String> = self.params.iter().map(buffer_decl).collect();
        writeln!(f, "func {}({}) {{", self.name, params.join(", "))?;
        let mut p = StmtPrinter {
            out: String::new(),
            indent: 1,
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
