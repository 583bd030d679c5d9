//! Programs of a task built for ranges of sizes (issue 61) as the cost model sees them.
//! Their loops that run to the sizes read them from the sizes' vector, and the
//! features count a loop whose extent is not a constant as one iteration: such a
//! program would look like a tiny one, and nothing like the fixed programs the model's
//! memory holds. The model sees instead the program at the first (largest) point of the
//! task's sample: each read of a size replaced by its value there and the program
//! simplified, so that its loops have the extents of the fixed program at that point.
//! (The measured cost is the sample's weighted mean, each point's time scaled to the
//! largest point's size: what the program at the largest point would take if every
//! point ran at its own speed.)

use std::collections::HashMap;
use tessera_ir::arith::simplify_stmt;
use tessera_ir::visit::{mutate_expr_children, ExprMutator, StmtMutator};
use tessera_ir::{Expr, ExprNode, PrimFunc};
use tessera_runtime::runner::SizePoints;

/// Replaces the reads of one buffer's constant elements by values.
struct ReadsOf<'a> {
    buffer: &'a tessera_ir::Buffer,
    values: HashMap<i64, i64>,
}

impl ExprMutator for ReadsOf<'_> {
    fn mutate_expr(&mut self, e: &Expr) -> Expr {
        if let ExprNode::Load { buffer, indices } = e.node() {
            if buffer == self.buffer && indices.len() == 1 {
                if let Some(v) = indices[0].as_int().and_then(|k| self.values.get(&k)) {
                    return Expr::int_of(e.dtype(), *v);
                }
            }
        }
        mutate_expr_children(self, e)
    }
}

impl StmtMutator for ReadsOf<'_> {}

/// `func` (a candidate of a task whose sizes are `sizes.param`) at the first point of
/// `sizes`: what the cost model extracts features from. A function without that
/// parameter is returned as it is.
pub fn at_largest_point(func: &PrimFunc, sizes: &SizePoints) -> PrimFunc {
    let (Some(buffer), Some(point)) = (func.params.get(sizes.param), sizes.points.first()) else {
        return func.clone();
    };
    let mut reads = ReadsOf {
        buffer,
        values: (0..).zip(point).map(|(k, &v)| (k, i64::from(v))).collect(),
    };
    let body = simplify_stmt(&reads.mutate_stmt(&func.body));
    PrimFunc {
        body,
        ..func.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_ir::DataType;
    use tessera_te::{placeholder, ComputeDag, Schedule};

    /// A product whose rows and terms run to `n[0]`, lowered naively.
    fn bounded_product() -> PrimFunc {
        let n = placeholder(&[1], DataType::int32(), "n").unwrap();
        let a = placeholder(&[6, 5], DataType::float32(), "A").unwrap();
        let b = placeholder(&[5, 4], DataType::float32(), "B").unwrap();
        let k = tessera_te::reduce_axis_bounded(5, n.at(&[Expr::int(0)]), "k");
        let rows = Some(n.at(&[Expr::int(0)]));
        let c = tessera_te::compute_bounded(&[6, 4], &[rows], "C", "", &["i", "j"], |ix| {
            tessera_te::sum(
                a.at(&[ix[0].clone(), k.expr()]) * b.at(&[k.expr(), ix[1].clone()]),
                std::slice::from_ref(&k),
            )
        })
        .unwrap();
        let dag = ComputeDag::new(&[c]).unwrap();
        let s = Schedule::create(&dag.outputs).unwrap();
        let mut args = dag.inputs();
        args.extend(dag.outputs.iter().cloned());
        tessera_te::lower(&s, &args, "f").unwrap()
    }

    #[test]
    fn the_model_sees_a_range_program_at_the_largest_point() {
        let f = bounded_product();
        assert!(f.to_string().contains("n[0]"), "{f}");
        let param = f.params.iter().position(|b| b.name() == "n").unwrap();
        let sizes = SizePoints {
            param,
            points: vec![vec![5], vec![2]],
            weights: vec![0.5, 1.0],
            ranges: Vec::new(),
        };
        let at = at_largest_point(&f, &sizes);
        let text = at.to_string();
        assert!(!text.contains("n[0]"), "{text}");
        assert!(text.contains("for (k, 0, 5)"), "{text}");
        assert_eq!(at.params.len(), f.params.len());
        // a function without the parameter is left as it is
        let other = SizePoints { param: 9, ..sizes };
        assert_eq!(at_largest_point(&f, &other).to_string(), f.to_string());
    }
}
