//! The model zoo (being written).
