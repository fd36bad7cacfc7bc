//! The HTTP edge: routes and the serving loop (`server`) over the handlers' state (`state`),
//! which format and encoding a scraper asked for (`negotiate`), the explanation as JSON and
//! as a page (`explain`), TLS, who may scrape (`auth`, `token_review`), and rotated
//! credential files with the task that re-reads them (`reload`), and the admission guard's
//! own HTTPS listener (`webhook`).

pub mod auth;
mod explain;
pub mod negotiate;
pub mod reload;
pub mod server;
mod state;
pub mod tls;
pub mod token_review;
pub mod webhook;
