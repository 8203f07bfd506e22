pub mod info;
pub mod request;
pub mod schema;
