//! Layer `outcome`: what was decided about a request and how it is told: the [`refusal::Refusal`]
//! answered, the [`decision::Decision`] record and its [`kind::DecisionKind`], the audit line
//! and the per-tool decision series.
//!
//! May use: `terms`, `wire`, `identity`, `limits`, `policy`, `rls`, `config`, `approval`.

pub mod audit;
pub mod catalog;
pub mod decision;
pub mod kind;
pub mod refusal;
pub mod series;
