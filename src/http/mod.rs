//! The HTTP edge: routes and the serving loop (`server`), TLS, who may scrape (`auth`,
//! `token_review`), and rotated credential files (`reload`).

pub mod auth;
pub mod reload;
pub mod server;
pub mod tls;
pub mod token_review;
