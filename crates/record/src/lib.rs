//! udamon-record (being written)
pub mod model;
