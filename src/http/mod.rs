//! The HTTP edge: routes and the serving loop (`server`), the explanation as JSON and as
//! a page (`explain`), TLS, who may scrape (`auth`,
//! `token_review`), and rotated credential files (`reload`).

pub mod auth;
mod explain;
pub mod reload;
pub mod server;
pub mod tls;
pub mod token_review;
