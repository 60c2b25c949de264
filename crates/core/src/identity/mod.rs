//! Layer `identity`: who is calling: the grant (a hashed credential and its [`grant::GrantId`]),
//! sessions bound to grants, stray credentials and the 401 challenge.
//!
//! May use: `terms`, `wire`.

pub mod challenge;
pub mod grant;
pub mod payload;
pub mod session;
pub mod stray;
