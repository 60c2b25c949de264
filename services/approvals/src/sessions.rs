//! The approvers' web sessions, stored in the database (so they survive a restart and work on
//! every instance that shares a PostgreSQL database).
//!
//! The cookie holds 32 random bytes (64 hex characters); the database holds only their SHA-256,
//! so a copy of the database lets nobody in. A session lasts [`SESSION_TTL`] from login; logout
//! deletes it, which signs it out on every instance at once. Expired rows are deleted by the
//! retention task.

use sha2::{Digest, Sha256};

use crate::auth::{hex, random_bytes, Session, SESSION_TTL};
use crate::store::{Changes, StoredSession};
use crate::{App, Error};

/// The stored key of a cookie value: hex SHA-256.
fn id_hash(id: &str) -> String {
    hex(&Sha256::digest(id.as_bytes()))
}

/// Whether a cookie value can be a session id (64 lowercase hex), before touching the database.
fn well_formed(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl App {
    /// Creates a session for `approver`; returns its id (the cookie value).
    pub async fn session_create(&self, approver: &str) -> Result<String, Error> {
        let id = hex(&random_bytes::<32>().map_err(Error::Internal)?);
        let csrf = hex(&random_bytes::<32>().map_err(Error::Internal)?);
        let hash = id_hash(&id);
        let ttl = i64::try_from(SESSION_TTL.as_secs()).unwrap_or(i64::MAX);
        let approver = approver.to_string();
        self.db(move |st, now| {
            let session = StoredSession { approver, csrf, expires_at: now.saturating_add(ttl), flash: None };
            st.session_create(&hash, &session, now)?;
            Ok(((), Changes::default()))
        })
        .await?;
        Ok(id)
    }

    /// The unexpired session of a cookie value; with `take_flash` its flash message is returned
    /// once. A database error is logged and counts as no session (the page asks to log in).
    pub async fn session_get(&self, id: &str, take_flash: bool) -> Option<Session> {
        if !well_formed(id) {
            return None;
        }
        let hash = id_hash(id);
        match self.db(move |st, now| Ok((st.session_get(&hash, now, take_flash)?, Changes::default()))).await {
            Ok(found) => {
                found.map(|s| Session { approver: s.approver, csrf: s.csrf, expires_at: s.expires_at, flash: s.flash })
            }
            Err(e) => {
                tracing::error!(error = %e, "session lookup");
                None
            }
        }
    }

    /// Sets the message shown on the session's next page (best effort: logged on failure).
    pub async fn session_set_flash(&self, id: &str, msg: String) {
        let hash = id_hash(id);
        if let Err(e) = self.db(move |st, _| Ok((st.session_set_flash(&hash, &msg)?, Changes::default()))).await {
            tracing::error!(error = %e, "session flash");
        }
    }

    /// Deletes a session (logout).
    pub async fn session_remove(&self, id: &str) -> Result<(), Error> {
        let hash = id_hash(id);
        self.db(move |st, _| Ok((st.session_remove(&hash)?, Changes::default()))).await
    }
}
