pub mod fdb5_form;
pub mod hammer;
pub mod info;
pub mod request;
pub mod sample;
pub mod schema;
pub mod server;
pub mod store;
