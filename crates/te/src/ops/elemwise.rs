//! elemwise
