pub mod daemon;
pub mod driver;
