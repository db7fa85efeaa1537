//! The `toolgate` command itself: `demo` works with nothing else, and bad settings are
//! refused with a clear message.

mod common;

use common::*;
use serde_json::json;

#[tokio::test]
async fn demo_runs_the_gateway_in_front_of_the_example_server() {
    let tg = Toolgate::start(&mut vec!["demo".to_string()], None).await;
    let s = open_session(&tg.url()).await;
    let bad = json!({"origin": "LHR", "destination": "JFK", "departureDate": "2031-08-08", "passengers": 2});
    let a = post(&tg.url(), Some(&s), call(1, "book_flight", bad))
        .await
        .json();
    assert_eq!(a["result"]["isError"], true);
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/departureDate": "must match the pattern ^\\d{2}/\\d{2}/\\d{4}$, got \"2031-08-08\""})
    );
    let a = post(
        &tg.url(),
        Some(&s),
        call(2, "add", json!({"a": "10", "b": 2})),
    )
    .await
    .json();
    assert_eq!(result_text(&a), "12");
}

#[tokio::test]
async fn bad_configuration_is_refused_with_a_clear_message() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args([
            "serve",
            "--upstream",
            "https://example.com/mcp",
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("https upstreams are not supported yet"),
        "{err}"
    );

    let cfg = tempfile_lite::TempFile::new("[validation]\nmood = \"enforce\"\n");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--upstream", "http://127.0.0.1:9/mcp", "--config"])
        .arg(&cfg.path)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown field") && err.contains("mood"),
        "{err}"
    );
}
