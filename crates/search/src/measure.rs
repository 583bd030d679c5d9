//! Measurement (being written).
