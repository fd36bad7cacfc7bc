//! The HTTP edge: routes and the serving loop (`server`), which format and encoding a
//! scraper asked for (`negotiate`), the explanation as JSON and as a page (`explain`), TLS, who may scrape (`auth`,
//! `token_review`), and rotated credential files (`reload`).

pub mod auth;
mod explain;
pub mod negotiate;
pub mod reload;
pub mod server;
pub mod tls;
pub mod token_review;
