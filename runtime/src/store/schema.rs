//! The SQLite schema, its version, and the migrations run on open.
//!
//! The version lives in `PRAGMA user_version` (an integer in the file header, read without
//! touching any table); `PRAGMA application_id` marks the file as Rebound's. On open:
//!
//! - version 0 and no tables: a new file, migrated from 0 up;
//! - a version below [`CURRENT_VERSION`]: each missing step runs in its own transaction, which
//!   also sets the new version, so a crash mid-migration leaves a consistent older version;
//! - a version above [`CURRENT_VERSION`]: refused with [`StoreError::NewerSchema`], never read.

use std::path::Path;

use rusqlite::Connection;

use super::StoreError;

/// The schema version this build writes and understands.
pub const CURRENT_VERSION: u32 = 7;

/// `PRAGMA application_id` of a Rebound database ("RBND").
pub const APPLICATION_ID: i32 = 0x5242_4e44;

/// Step `i` migrates from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 0 → 1: the first schema.
    r#"
    CREATE TABLE retries (
        message_id       TEXT PRIMARY KEY NOT NULL,
        biz              TEXT NOT NULL,
        payload          BLOB NOT NULL,
        headers          TEXT NOT NULL,      -- JSON object, string to string
        due_ms           INTEGER NOT NULL,
        attempt          INTEGER NOT NULL,
        first_seen_ms    INTEGER NOT NULL,
        last_code        TEXT NOT NULL,
        last_message     TEXT NOT NULL,
        last_delay_ms    INTEGER NOT NULL,
        rule             TEXT NOT NULL,
        rule_set_version TEXT NOT NULL
    );

    CREATE TABLE dead_letters (
        id               INTEGER PRIMARY KEY,
        message_id       TEXT NOT NULL,
        biz              TEXT NOT NULL,
        payload          BLOB NOT NULL,
        headers          TEXT NOT NULL,
        label            TEXT NOT NULL,
        reason           TEXT NOT NULL,
        last_code        TEXT NOT NULL,
        last_message     TEXT NOT NULL,
        attempts         INTEGER NOT NULL,
        first_ms         INTEGER NOT NULL,
        last_ms          INTEGER NOT NULL,
        rule             TEXT NOT NULL,
        rule_set_version TEXT NOT NULL,
        status           TEXT NOT NULL DEFAULT 'dead'
                         CHECK (status IN ('dead', 'replayed', 'skipped'))
    );
    -- At most one open dead letter per message; replayed and skipped ones are history.
    CREATE UNIQUE INDEX dead_letters_open ON dead_letters (message_id) WHERE status = 'dead';
    CREATE INDEX dead_letters_message ON dead_letters (message_id, id);
    CREATE INDEX dead_letters_label ON dead_letters (label, id);

    CREATE TABLE audit_log (
        id               INTEGER PRIMARY KEY,
        at_ms            INTEGER NOT NULL,
        action           TEXT NOT NULL CHECK (action IN ('replay', 'skip')),
        message_id       TEXT NOT NULL,
        dead_letter_id   INTEGER NOT NULL REFERENCES dead_letters (id),
        operator         TEXT NOT NULL,
        reason           TEXT NOT NULL
    );
    CREATE INDEX audit_log_message ON audit_log (message_id, id);

    -- One small row per message with a final fate (1 = acked, 2 = dead-lettered).
    CREATE TABLE fates (
        message_id       TEXT PRIMARY KEY NOT NULL,
        fate             INTEGER NOT NULL CHECK (fate IN (1, 2)),
        at_ms            INTEGER NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE positions (
        source           TEXT PRIMARY KEY NOT NULL,
        position         INTEGER NOT NULL,
        at_ms            INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 1 → 2: a dead letter keeps its failure's attrs; a retry keeps its message's offset; an
    // acked fate keeps its source offset, so that the source's position prunes it.
    r#"
    ALTER TABLE dead_letters ADD COLUMN attrs TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE retries ADD COLUMN offset INTEGER;
    ALTER TABLE fates ADD COLUMN source TEXT;
    ALTER TABLE fates ADD COLUMN position INTEGER;
    CREATE INDEX fates_by_position ON fates (source, position) WHERE source IS NOT NULL;
    "#,
    // 2 → 3: a retry and a dead letter keep every failure of the message (`failures`, JSON) and
    // how often it was redriven; a letter can be `expired`; the audit log keeps the runtime's
    // own actions too (expire, retry now, kill), which need not name a letter. SQLite cannot
    // change a CHECK, so the two tables are rebuilt.
    r#"
    ALTER TABLE retries ADD COLUMN failures TEXT NOT NULL DEFAULT '';
    ALTER TABLE retries ADD COLUMN redrives INTEGER NOT NULL DEFAULT 0;

    CREATE TABLE audit_log_v3 (
        id               INTEGER PRIMARY KEY,
        at_ms            INTEGER NOT NULL,
        action           TEXT NOT NULL
                         CHECK (action IN ('replay', 'skip', 'expire', 'retry_now', 'kill')),
        message_id       TEXT NOT NULL,
        dead_letter_id   INTEGER,
        operator         TEXT NOT NULL,
        reason           TEXT NOT NULL
    );
    INSERT INTO audit_log_v3 SELECT id, at_ms, action, message_id, dead_letter_id, operator, reason
        FROM audit_log;
    DROP TABLE audit_log;
    ALTER TABLE audit_log_v3 RENAME TO audit_log;
    CREATE INDEX audit_log_message ON audit_log (message_id, id);

    CREATE TABLE dead_letters_v3 (
        id               INTEGER PRIMARY KEY,
        message_id       TEXT NOT NULL,
        biz              TEXT NOT NULL,
        payload          BLOB NOT NULL,
        headers          TEXT NOT NULL,
        label            TEXT NOT NULL,
        reason           TEXT NOT NULL,
        last_code        TEXT NOT NULL,
        last_message     TEXT NOT NULL,
        attempts         INTEGER NOT NULL,
        first_ms         INTEGER NOT NULL,
        last_ms          INTEGER NOT NULL,
        rule             TEXT NOT NULL,
        rule_set_version TEXT NOT NULL,
        status           TEXT NOT NULL DEFAULT 'dead'
                         CHECK (status IN ('dead', 'replayed', 'skipped', 'expired')),
        attrs            TEXT NOT NULL DEFAULT '{}',
        failures         TEXT NOT NULL DEFAULT '',
        redrives         INTEGER NOT NULL DEFAULT 0
    );
    INSERT INTO dead_letters_v3 (id, message_id, biz, payload, headers, label, reason, last_code,
        last_message, attempts, first_ms, last_ms, rule, rule_set_version, status, attrs)
        SELECT id, message_id, biz, payload, headers, label, reason, last_code, last_message,
        attempts, first_ms, last_ms, rule, rule_set_version, status, attrs FROM dead_letters;
    DROP TABLE dead_letters;
    ALTER TABLE dead_letters_v3 RENAME TO dead_letters;
    CREATE UNIQUE INDEX dead_letters_open ON dead_letters (message_id) WHERE status = 'dead';
    CREATE INDEX dead_letters_message ON dead_letters (message_id, id);
    CREATE INDEX dead_letters_label ON dead_letters (label, id);
    CREATE INDEX dead_letters_by_status ON dead_letters (status, label, last_ms);
    "#,
    // 3 → 4: a retry and a dead letter keep their message's ordering key (ordered keys), so a
    // recovered retry and a replayed letter hold their key's later messages back again.
    r#"
    ALTER TABLE retries ADD COLUMN ordering_key TEXT;
    ALTER TABLE dead_letters ADD COLUMN ordering_key TEXT;
    "#,
    // 4 → 5: the acked fates without an offset (a broker source's, which no position prunes),
    // by time, for `WriteOp::PruneFates`.
    r#"
    CREATE INDEX fates_unpositioned ON fates (at_ms) WHERE fate = 1 AND source IS NULL;
    "#,
    // 5 → 6: the decision log, a bounded sample (`WriteOp::LogDecisions`): one JSON entry per
    // decision in the order logged (`seq`; AUTOINCREMENT so a trimmed seq is never reused),
    // `at_ms` the decision's time for `since`.
    r#"
    CREATE TABLE decisions (
        seq              INTEGER PRIMARY KEY AUTOINCREMENT,
        at_ms            INTEGER NOT NULL,
        entry            TEXT NOT NULL
    );
    CREATE INDEX decisions_at ON decisions (at_ms);
    "#,
    // 6 → 7: the decision log in pages (`decisions::DecisionPage`): a row holds the entries of
    // one write, a JSON text a line, oldest first; `packing` says how `entries` holds them
    // (0 the lines as they are, 1 LZ4-compressed: `decisions::pack`). `through` numbers the
    // log's entries up to this page's last (its rowid order is the log's order: the newest
    // page always stays, so a rowid is never reused); the newest page's `floor` is the last
    // entry trimmed (never lower than before), so a read leaves out the entries of the
    // oldest page that fall outside the newest `keep`. A version-6 log becomes pages of one
    // entry each, none trimmed.
    r#"
    CREATE TABLE decision_pages (
        seq              INTEGER PRIMARY KEY,
        first_ms         INTEGER NOT NULL,
        last_ms          INTEGER NOT NULL,
        count            INTEGER NOT NULL,
        through          INTEGER NOT NULL,
        floor            INTEGER NOT NULL,
        packing          INTEGER NOT NULL,
        entries          BLOB NOT NULL
    );
    CREATE INDEX decision_pages_through ON decision_pages (through);
    INSERT INTO decision_pages (first_ms, last_ms, count, through, floor, packing, entries)
        SELECT at_ms, at_ms, 1, ROW_NUMBER() OVER (ORDER BY seq), 0, 0,
               CAST(entry || char(10) AS BLOB)
        FROM decisions ORDER BY seq;
    DROP TABLE decisions;
    "#,
];

/// Brings the database at `path` to [`CURRENT_VERSION`], or refuses it.
pub fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let open_err = |source| StoreError::Open {
        path: path.to_owned(),
        source,
    };
    let app_id: i32 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(open_err)?;
    let found: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(open_err)?;
    let found = u32::try_from(found).unwrap_or(u32::MAX);
    if found > CURRENT_VERSION {
        return Err(StoreError::NewerSchema {
            path: path.to_owned(),
            found,
            supported: CURRENT_VERSION,
        });
    }
    if app_id != APPLICATION_ID {
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
            .map_err(open_err)?;
        // A fresh, empty file becomes ours; anything else with foreign tables is not ours.
        if app_id != 0 || tables > 0 {
            return Err(StoreError::NotRebound {
                path: path.to_owned(),
                found: app_id,
                expected: APPLICATION_ID,
            });
        }
    }
    for from in found..CURRENT_VERSION {
        let to = from + 1;
        let step = |conn: &mut Connection| -> rusqlite::Result<()> {
            let tx = conn.transaction()?;
            tx.execute_batch(MIGRATIONS[from as usize])?;
            tx.pragma_update(None, "application_id", APPLICATION_ID)?;
            tx.pragma_update(None, "user_version", to)?;
            tx.commit()
        };
        step(conn).map_err(|source| StoreError::Migrate {
            path: path.to_owned(),
            from,
            to,
            source,
        })?;
    }
    Ok(())
}
