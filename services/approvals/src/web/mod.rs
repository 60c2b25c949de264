//! The approvers' web pages: server-rendered HTML, a session cookie, a CSRF token per session in
//! every form, and a few lines of script that reload the page when `/ui/version` changes.
//!
//! - [`index`]: `/` (pending approvals, recent decisions) and `/ui/version`;
//! - [`one`]: `/approvals/{id}`, one approval;
//! - [`decide`]: the Approve / Deny form's `POST`;
//! - [`login`]: sign in and out;
//! - [`card`]: one approval's card, [`leg`] its continuation-leg section, [`arguments`] the
//!   arguments as the approver reads them;
//! - [`layout`], [`assets`], [`guard`]: what every page shares.

pub mod arguments;
mod assets;
pub mod card;
mod decide;
mod guard;
mod index;
mod layout;
pub mod leg;
mod login;
mod one;

pub use arguments::{
    number_may_change, raw_prefix_visible, render_arguments, render_json, visible, whitespace_may_mislead, Rendered,
    ESCAPED_BADGE, NUMBERS_BADGE, WHITESPACE_BADGE,
};
pub use card::{View, LIST_ARGUMENTS_MAX, REQUEST_ID_SHOWN};
pub use decide::{decision, DecisionForm};
pub use guard::COOKIE;
pub use index::{index, version, GRANTS_SHOWN, PENDING_SHOWN};
pub use login::{login, login_form, logout, CsrfForm, LoginForm, NextQuery};
pub use one::one;
