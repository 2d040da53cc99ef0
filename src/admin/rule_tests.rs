//! A push runs the set's rule tests first, as `rebound test` does: the tests in the rules
//! directory's `tests/`, against the pushed files compiled. A failing test refuses the push
//! (422, each failure with its file:line:col) unless the body says `"skip_tests": true`.
//!
//! Only a set that would be accepted is tested: one the reloader refuses goes on to the push,
//! which refuses it with its errors and records the rejection, as before.

use super::error::ApiError;
use axum::http::StatusCode;
use rebound_engine::ruletest::{Report, RunOptions, load_suite_each, read_test_files, run_suite};
use rebound_engine::{SourceFile, compile};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

/// Runs the tests of `dir` (`dir/tests/*.yaml`) against `files`; an error answer when any
/// fails. A set that does not compile is left to the push to refuse (`Ok`).
pub fn check(dir: &Path, files: &BTreeMap<String, String>) -> Result<(), ApiError> {
    let sources = files
        .iter()
        .map(|(name, text)| SourceFile::new(name.clone(), name.clone(), text.clone()))
        .collect();
    let Ok(set) = compile(sources) else {
        return Ok(());
    };
    let tests = read_test_files(dir).map_err(|e| {
        ApiError::internal(format!(
            "cannot read the rule tests in {}: {e}",
            dir.join("tests").display()
        ))
    })?;
    // Named as an operator sees them beside the rule files: `tests/NAME.yaml`.
    let tests: Vec<SourceFile> = tests
        .into_iter()
        .map(|f| {
            let path = format!("tests/{}", f.name);
            SourceFile::new(f.name, path, f.bytes)
        })
        .collect();
    let suite = load_suite_each(&set, &tests);
    let report = run_suite(&set, &suite, RunOptions::default());
    if report.ok() {
        return Ok(());
    }
    Err(ApiError::with_body(
        StatusCode::UNPROCESSABLE_ENTITY,
        refusal(&report),
    ))
}

/// The 422 body of a push its tests refused: `{"error", "tests": {"passed", "failed"},
/// "errors": [{file, line, column, message}]}`, one error per failed case or path and per
/// test file that did not load.
fn refusal(report: &Report) -> Value {
    let mut errors: Vec<Value> = report
        .results
        .iter()
        .filter_map(|r| {
            let f = r.failure.as_ref()?;
            let message = format!(
                "{} '{}' failed under seed {}: {} (to replay: {})",
                r.kind,
                r.name,
                f.seed,
                f.problems.join("; "),
                f.reproduce
            );
            Some(located(&r.at, message))
        })
        .collect();
    errors.extend(report.broken_files.iter().map(|b| {
        let message = format!(
            "this test file does not load ({} error(s)), so none of its tests ran: {}",
            b.errors, b.message
        );
        located(&b.at, message)
    }));
    let total = report.passed + report.failed;
    json!({
        "error": format!(
            "{} of {total} rule tests failed: the push was refused and nothing changed \
             (send \"skip_tests\": true to push anyway)",
            report.failed
        ),
        "tests": { "passed": report.passed, "failed": report.failed },
        "errors": errors,
    })
}

/// An error at `at` (`FILE:LINE:COL`, `FILE:LINE` or `FILE`), as the API shows errors.
fn located(at: &str, message: String) -> Value {
    let mut parts = at.rsplitn(3, ':');
    let last = parts.next().and_then(|p| p.parse::<usize>().ok());
    let middle = parts.next();
    let (file, line, column) = match (last, middle.map(|m| (m, m.parse::<usize>().ok()))) {
        (Some(col), Some((_, Some(line)))) => (parts.next().unwrap_or(at), Some(line), Some(col)),
        (Some(line), Some((file, None))) => (file, Some(line), None),
        _ => (at, None, None),
    };
    json!({ "file": file, "line": line, "column": column, "message": message })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_is_split_into_file_line_and_column_whatever_it_holds() {
        let at = |s: &str| {
            let v = located(s, "m".into());
            (v["file"].clone(), v["line"].clone(), v["column"].clone())
        };
        assert_eq!(
            at("tests/a.yaml:12:5"),
            (json!("tests/a.yaml"), json!(12), json!(5))
        );
        assert_eq!(
            at("tests/a.yaml:12"),
            (json!("tests/a.yaml"), json!(12), json!(null))
        );
        assert_eq!(
            at("tests/a.yaml"),
            (json!("tests/a.yaml"), json!(null), json!(null))
        );
    }

    #[test]
    fn a_failing_test_refuses_the_set_with_its_place_and_a_passing_one_lets_it_through() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tests")).unwrap();
        let test = "version: 1\ncases:\n  - name: fast waits a second\n    given: { code: E }\n    \
                    expect: { action: retry, delay: 1s, rule: fast }\n";
        std::fs::write(dir.path().join("tests/t.yaml"), test).unwrap();
        let set = |delay: &str| {
            let rule = format!(
                "version: 1\nrules:\n  - id: fast\n    retry: {{ backoff: {{ fixed: {delay} }} }}\n"
            );
            BTreeMap::from([("a.yaml".to_owned(), rule)])
        };
        check(dir.path(), &set("1s")).expect("the test passes");

        let refused = check(dir.path(), &set("2s")).expect_err("the test fails");
        assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let body = refused.body();
        assert_eq!(body["tests"], json!({"passed": 0, "failed": 1}), "{body}");
        let error = &body["errors"][0];
        assert_eq!(
            (error["file"].as_str(), error["line"].as_u64()),
            (Some("tests/t.yaml"), Some(3)),
            "{body}"
        );
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains("case 'fast waits a second' failed"),
            "{message}"
        );
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("\"skip_tests\": true"),
            "{body}"
        );

        // A set that does not compile is the push's to refuse.
        let broken = BTreeMap::from([("a.yaml".to_owned(), "version: [".to_owned())]);
        check(dir.path(), &broken).expect("left to the push");
    }
}
