//! The statistics actions (`statistics`, `statistics-mtg2`), their windows and operations.

pub mod legacy;
pub mod mtg2;
pub mod operations;
pub mod tables;
pub mod window;
