//! Canonical linear forms of integer expressions: `c0 + Σ ci * atom_i`, where the atoms
//! are the sub-expressions that are not sums or products with a constant.

use crate::dtype::DataType;
use crate::expr::{BinOp, Expr, ExprNode};

#[derive(Clone, Debug)]
pub struct Linear {
    pub dtype: DataType,
    /// Atoms in the order they first appear, with their coefficients.
    pub terms: Vec<(Expr, i64)>,
    pub constant: i64,
}

impl Linear {
    pub fn zero(dtype: DataType) -> Self {
        Linear {
            dtype,
            terms: Vec::new(),
            constant: 0,
        }
    }

    /// The linear form of a scalar integer expression, or `None` on overflow.
    pub fn of(e: &Expr) -> Option<Linear> {
        let mut l = Linear::zero(e.dtype());
        l.add_expr(e, 1)?;
        Some(l)
    }

    fn add_term(&mut self, atom: &Expr, coeff: i64) -> Option<()> {
        if let Some(t) = self.terms.iter_mut().find(|(a, _)| a == atom) {
            t.1 = t.1.checked_add(coeff)?;
        } else {
            self.terms.push((atom.clone(), coeff));
        }
        Some(())
    }

    fn add_expr(&mut self, e: &Expr, scale: i64) -> Option<()> {
        if scale == 0 {
            return Some(());
        }
        match e.node() {
            ExprNode::IntImm { value, .. } => {
                self.constant = self.constant.checked_add(value.checked_mul(scale)?)?;
            }
            ExprNode::Binary {
                op: BinOp::Add,
                a,
                b,
            } => {
                self.add_expr(a, scale)?;
                self.add_expr(b, scale)?;
            }
            ExprNode::Binary {
                op: BinOp::Sub,
                a,
                b,
            } => {
                self.add_expr(a, scale)?;
                self.add_expr(b, scale.checked_neg()?)?;
            }
            ExprNode::Binary {
                op: BinOp::Mul,
                a,
                b,
            } => match (a.as_int(), b.as_int()) {
                (_, Some(k)) => self.add_expr(a, scale.checked_mul(k)?)?,
                (Some(k), _) => self.add_expr(b, scale.checked_mul(k)?)?,
                _ => self.add_term(e, scale)?,
            },
            _ => self.add_term(e, scale)?,
        }
        Some(())
    }

    /// `self + other * scale`, or `None` on overflow.
    pub fn add_scaled(&self, other: &Linear, scale: i64) -> Option<Linear> {
        let mut r = self.clone();
        r.constant = r.constant.checked_add(other.constant.checked_mul(scale)?)?;
        for (a, c) in &other.terms {
            r.add_term(a, c.checked_mul(scale)?)?;
        }
        Some(r)
    }

    /// Whether no atom remains (zero coefficients do not count).
    pub fn is_const(&self) -> bool {
        self.terms.iter().all(|(_, c)| *c == 0)
    }

    /// The canonical expression: positive terms in order of appearance, then the negative
    /// ones subtracted, then the constant.
    pub fn to_expr(&self) -> Expr {
        let lit = |v: i64| Expr::int_of(self.dtype, v);
        let mut acc: Option<Expr> = None;
        for (atom, c) in self.terms.iter().filter(|(_, c)| *c > 0) {
            let t = if *c == 1 {
                atom.clone()
            } else {
                Expr::binary(BinOp::Mul, atom.clone(), lit(*c))
            };
            acc = Some(match acc {
                None => t,
                Some(a) => Expr::binary(BinOp::Add, a, t),
            });
        }
        for (atom, c) in self.terms.iter().filter(|(_, c)| *c < 0) {
            acc = Some(match (acc, c.checked_neg()) {
                (Some(a), Some(n)) => {
                    let t = if n == 1 {
                        atom.clone()
                    } else {
                        Expr::binary(BinOp::Mul, atom.clone(), lit(n))
                    };
                    Expr::binary(BinOp::Sub, a, t)
                }
                (Some(a), None) => Expr::binary(
                    BinOp::Add,
                    a,
                    Expr::binary(BinOp::Mul, atom.clone(), lit(*c)),
                ),
                (None, _) => Expr::binary(BinOp::Mul, atom.clone(), lit(*c)),
            });
        }
        match acc {
            None => lit(self.constant),
            Some(a) if self.constant > 0 => Expr::binary(BinOp::Add, a, lit(self.constant)),
            Some(a) if self.constant < 0 && self.constant != i64::MIN => {
                Expr::binary(BinOp::Sub, a, lit(-self.constant))
            }
            Some(a) if self.constant < 0 => Expr::binary(BinOp::Add, a, lit(self.constant)),
            Some(a) => a,
        }
    }
}
