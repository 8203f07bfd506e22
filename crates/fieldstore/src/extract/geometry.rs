//! geometry
pub struct Grid;
