//! The record log (being written).
